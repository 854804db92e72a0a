// src/providers/google.ts against a stub Google API, called through the real OAuth client
// (src/net/oauth.ts with a stub token endpoint): every page of a change list, the cursors Google
// stops honouring (404, 410), metadata-only message reads, free windows around busy time, Drive
// removals, and the errors: 5xx Retryable, other 4xx Permanent, no token or query in a message.
import { afterAll, beforeEach, describe, expect, test } from "bun:test";
import { FakeClock } from "../../src/clock.ts";
import { createHttp, type HttpStatusError, RetryLater } from "../../src/net/http.ts";
import { createOAuth, type StoredToken } from "../../src/net/oauth.ts";
import { Permanent, Retryable } from "../../src/plugin/types.ts";
import {
  CALENDAR,
  calendarChanges,
  DRIVE,
  DRIVE_CHANGE_FIELDS,
  driveChanges,
  driveStartToken,
  freeWindows,
  GMAIL,
  gmailHistory,
  gmailMessage,
  gmailRecent,
  MESSAGE_HEADERS,
} from "../../src/providers/google.ts";
import { PAYLOAD_SENTINEL, SECRET_SENTINEL } from "../helpers/logs.ts";

const TOKEN = `test-${SECRET_SENTINEL}`;

interface Seen {
  method: string;
  path: string;
  query: URLSearchParams;
  search: string;
  auth: string;
  body: string;
}

/** The API requests the stub received, and its answers to the next ones, in order. */
let seen: Seen[] = [];
let replies: ((s: Seen) => Response)[] = [];
let tokenCalls = 0;
beforeEach(() => {
  seen = [];
  replies = [];
  tokenCalls = 0;
});

const server = Bun.serve({
  port: 0,
  hostname: "127.0.0.1",
  async fetch(req) {
    const u = new URL(req.url);
    if (u.pathname === "/token") {
      tokenCalls++;
      return Response.json({ access_token: TOKEN, expires_in: 3600, token_type: "Bearer" });
    }
    const s: Seen = {
      method: req.method,
      path: u.pathname,
      query: u.searchParams,
      search: u.search,
      auth: req.headers.get("authorization") ?? "",
      body: await req.text(),
    };
    seen.push(s);
    const reply = replies.shift();
    return reply ? reply(s) : Response.json({ error: "no answer queued" }, { status: 400 });
  },
});
const root = `http://127.0.0.1:${server.port}`;
afterAll(() => server.stop(true));

const gmail = { base: `${root}/gmail/v1` };
const calendar = { base: `${root}/calendar/v3` };
const drive = { base: `${root}/drive/v3` };

function api() {
  const clock = new FakeClock();
  let stored: StoredToken | null = null;
  const credential = JSON.stringify({
    client_id: "cid",
    client_secret: "cs",
    refresh_token: "rt",
    token_uri: `${root}/token`,
  });
  return createOAuth({
    http: createHttp({ clock }),
    clock,
    credential: async () => credential,
    store: { load: () => stored, save: (t) => void (stored = t) },
  });
}

const json =
  (body: unknown, status = 200) =>
  () =>
    Response.json(body, { status });
const status =
  (code: number, headers: Record<string, string> = {}) =>
  () =>
    new Response(`{"error":{"code":${code},"message":"${PAYLOAD_SENTINEL}"}}`, { status: code, headers });

async function failure(p: Promise<unknown>): Promise<Error> {
  try {
    await p;
  } catch (e) {
    return e as Error;
  }
  throw new Error("expected the call to fail");
}

test("the default bases are Google's", () => {
  expect([GMAIL, CALENDAR, DRIVE]).toEqual([
    "https://gmail.googleapis.com/gmail/v1",
    "https://www.googleapis.com/calendar/v3",
    "https://www.googleapis.com/drive/v3",
  ]);
});

describe("gmailHistory", () => {
  test("reads every page, with the token from the OAuth client, and keeps the newest historyId", async () => {
    replies = [
      json({
        history: [{ id: "101", messagesAdded: [{ message: { id: "m1", threadId: "t1" } }, { message: { id: "m2" } }] }],
        nextPageToken: "p2",
        historyId: "150",
      }),
      json({
        history: [{ id: "120", messagesAdded: [{ message: { id: "m3" } }, { message: { id: "m2" } }] }, { id: "121" }],
        historyId: "155",
      }),
    ];
    const r = await gmailHistory(api(), "a.b+c@example.com", "100", gmail);
    expect(r).toEqual({ tooOld: false, messageIds: ["m1", "m2", "m3"], historyId: "155" });
    expect(seen.map((s) => s.path)).toEqual([
      "/gmail/v1/users/a.b%2Bc%40example.com/history",
      "/gmail/v1/users/a.b%2Bc%40example.com/history",
    ]);
    for (const s of seen) {
      expect(s.method).toBe("GET");
      expect(s.auth).toBe(`Bearer ${TOKEN}`);
      expect(s.query.get("startHistoryId")).toBe("100");
      expect(s.query.getAll("historyTypes")).toEqual(["messageAdded"]);
      expect(s.query.has("access_token")).toBe(false);
    }
    expect(seen[0]?.query.has("pageToken")).toBe(false);
    expect(seen[1]?.query.get("pageToken")).toBe("p2");
  });

  test("an empty history keeps the answer's historyId", async () => {
    replies = [json({ historyId: "160" })];
    expect(await gmailHistory(api(), "me", "155", gmail)).toEqual({ tooOld: false, messageIds: [], historyId: "160" });
  });

  test("a 404 (the id is out of the history Google keeps) is tooOld", async () => {
    replies = [status(404)];
    expect(await gmailHistory(api(), "me", "1", gmail)).toEqual({ tooOld: true });
  });

  test("more pages than pageLimit is Retryable", async () => {
    replies = [json({ nextPageToken: "p2", historyId: "1" }), json({ nextPageToken: "p3", historyId: "2" })];
    const e = await failure(gmailHistory(api(), "me", "1", { ...gmail, pageLimit: 2 }));
    expect(e).toBeInstanceOf(Retryable);
    expect(e.message).toBe("gmail history: more than 2 pages");
    expect(seen).toHaveLength(2);
  });
});

describe("gmailRecent", () => {
  test("the profile's historyId, then one page of the newest message ids", async () => {
    replies = [
      json({ emailAddress: "me@example.com", messagesTotal: 9, historyId: "900" }),
      json({
        messages: [
          { id: "a", threadId: "t" },
          { id: "b", threadId: "t" },
        ],
        resultSizeEstimate: 2,
      }),
    ];
    expect(await gmailRecent(api(), "me", 5, gmail)).toEqual({ messageIds: ["a", "b"], historyId: "900" });
    expect(seen.map((s) => s.path)).toEqual(["/gmail/v1/users/me/profile", "/gmail/v1/users/me/messages"]);
    expect(seen[1]?.query.get("maxResults")).toBe("5");
    expect(seen[1]?.query.has("pageToken")).toBe(false);
  });

  test("max is held to 100", async () => {
    replies = [json({ historyId: "1" }), json({})];
    expect(await gmailRecent(api(), "me", 500, gmail)).toEqual({ messageIds: [], historyId: "1" });
    expect(seen[1]?.query.get("maxResults")).toBe("100");
  });
});

describe("gmailMessage", () => {
  const answer = {
    id: "m1",
    threadId: "t1",
    labelIds: ["INBOX", "UNREAD"],
    snippet: "Your appointment is on",
    internalDate: "1717000000000",
    payload: {
      headers: [
        { name: "From", value: "Dentist <noreply@dentist.example>" },
        { name: "To", value: "me@example.com" },
        { name: "Subject", value: "Reminder" },
        { name: "Date", value: "Wed, 29 May 2024 10:00:00 +0000" },
        { name: "list-id", value: "<news.dentist.example>" },
        { name: "Message-ID", value: "<abc@dentist.example>" },
      ],
    },
  };

  test("asks for metadata and the named headers only, and keeps the snippet off the wire", async () => {
    replies = [json(answer)];
    const m = await gmailMessage(api(), "me", "m1", gmail);
    expect(m).toEqual({
      id: "m1",
      threadId: "t1",
      labelIds: ["INBOX", "UNREAD"],
      from: "Dentist <noreply@dentist.example>",
      to: "me@example.com",
      subject: "Reminder",
      date: "Wed, 29 May 2024 10:00:00 +0000",
      listId: "<news.dentist.example>",
      messageId: "<abc@dentist.example>",
      internalDate: "1717000000000",
    });
    const s = seen[0];
    expect(s?.path).toBe("/gmail/v1/users/me/messages/m1");
    expect(s?.query.getAll("format")).toEqual(["metadata"]);
    expect(s?.query.getAll("metadataHeaders")).toEqual([...MESSAGE_HEADERS]);
    expect(s?.query.get("fields")).not.toContain("snippet");
    expect(s?.search).not.toContain("format=full");
    expect(s?.search).not.toContain("format=raw");
  });

  test("the snippet when asked", async () => {
    replies = [json(answer)];
    const m = await gmailMessage(api(), "me", "m1", { ...gmail, snippet: true });
    expect(m?.snippet).toBe("Your appointment is on");
    expect(seen[0]?.query.get("fields")).toContain("snippet");
    expect(seen[0]?.query.get("format")).toBe("metadata");
  });

  test("a 404 (deleted since) is null", async () => {
    replies = [status(404)];
    expect(await gmailMessage(api(), "me", "gone", gmail)).toBeNull();
  });
});

describe("calendarChanges", () => {
  const id = "team#x@group.calendar.google.com";

  test("every page since the sync token, deleted events included, and the last page's nextSyncToken", async () => {
    replies = [
      json({
        items: [
          {
            id: "e1",
            status: "confirmed",
            summary: "Standup",
            start: { dateTime: "2024-06-03T09:00:00Z" },
            end: { dateTime: "2024-06-03T09:15:00Z" },
            updated: "2024-06-01T08:00:00Z",
            htmlLink: "https://calendar.example/e1",
            location: "Room 1",
          },
        ],
        nextPageToken: "p2",
      }),
      json({
        items: [
          { id: "e2", status: "cancelled" },
          {
            id: "e3",
            status: "confirmed",
            summary: "Holiday",
            start: { date: "2024-06-10" },
            end: { date: "2024-06-11" },
            updated: "u",
            htmlLink: "h",
          },
        ],
        nextSyncToken: "s2",
      }),
    ];
    const r = await calendarChanges(api(), id, "s1", calendar);
    expect(r).toEqual({
      resync: false,
      nextSyncToken: "s2",
      events: [
        {
          id: "e1",
          status: "confirmed",
          summary: "Standup",
          start: "2024-06-03T09:00:00Z",
          end: "2024-06-03T09:15:00Z",
          updated: "2024-06-01T08:00:00Z",
          htmlLink: "https://calendar.example/e1",
          location: "Room 1",
        },
        { id: "e2", status: "cancelled", summary: "", start: "", end: "", updated: "", htmlLink: "" },
        {
          id: "e3",
          status: "confirmed",
          summary: "Holiday",
          start: "2024-06-10",
          end: "2024-06-11",
          updated: "u",
          htmlLink: "h",
        },
      ],
    });
    expect(seen.map((s) => s.path)).toEqual([
      "/calendar/v3/calendars/team%23x%40group.calendar.google.com/events",
      "/calendar/v3/calendars/team%23x%40group.calendar.google.com/events",
    ]);
    for (const s of seen) {
      expect(s.query.get("syncToken")).toBe("s1");
      expect(s.query.get("showDeleted")).toBe("true");
      expect(s.query.has("timeMin")).toBe(false);
    }
    expect(seen[1]?.query.get("pageToken")).toBe("p2");
  });

  test("a 410 Gone asks for a full sync", async () => {
    replies = [status(410)];
    expect(await calendarChanges(api(), id, "expired", calendar)).toEqual({ resync: true });
  });

  test("a full sync sends timeMin and no syncToken", async () => {
    replies = [json({ items: [], nextSyncToken: "first" })];
    expect(await calendarChanges(api(), "primary", null, { ...calendar, timeMin: "2024-06-01T00:00:00Z" })).toEqual({
      resync: false,
      events: [],
      nextSyncToken: "first",
    });
    expect(seen[0]?.query.get("timeMin")).toBe("2024-06-01T00:00:00Z");
    expect(seen[0]?.query.has("syncToken")).toBe(false);
    expect(seen[0]?.query.get("showDeleted")).toBe("true");
  });

  test("a full sync's default timeMin is a day ago", async () => {
    replies = [json({ nextSyncToken: "first" })];
    await calendarChanges(api(), "primary", null, calendar);
    const at = Date.parse(seen[0]?.query.get("timeMin") ?? "");
    expect(Math.abs(at - (Date.now() - 86_400_000))).toBeLessThan(60_000);
  });

  test("a last page without nextSyncToken is Permanent", async () => {
    replies = [json({ items: [] })];
    expect(await failure(calendarChanges(api(), "primary", "s1", calendar))).toBeInstanceOf(Permanent);
  });
});

describe("freeWindows", () => {
  const id = "me@example.com";
  const busy = [
    { start: "2024-06-03T12:10:00Z", end: "2024-06-03T13:00:00Z" },
    { start: "2024-06-03T10:00:00Z", end: "2024-06-03T11:00:00Z" },
    { start: "2024-06-03T10:30:00Z", end: "2024-06-03T12:00:00Z" },
    { start: "2024-06-03T16:30:00Z", end: "2024-06-03T17:30:00Z" },
  ];

  test("posts one calendar's query and finds the windows of at least minMinutes around busy time", async () => {
    replies = [json({ kind: "calendar#freeBusy", calendars: { [id]: { busy } } })];
    const r = await freeWindows(api(), id, "2024-06-03T09:00:00Z", "2024-06-03T17:00:00Z", 30, calendar);
    expect(seen[0]?.method).toBe("POST");
    expect(seen[0]?.path).toBe("/calendar/v3/freeBusy");
    expect(JSON.parse(seen[0]?.body ?? "")).toEqual({
      timeMin: "2024-06-03T09:00:00Z",
      timeMax: "2024-06-03T17:00:00Z",
      items: [{ id }],
    });
    expect(r.busy.map((b) => b.start)).toEqual([
      "2024-06-03T10:00:00Z",
      "2024-06-03T10:30:00Z",
      "2024-06-03T12:10:00Z",
      "2024-06-03T16:30:00Z",
    ]);
    // 12:00-12:10 is shorter than 30 minutes; the busy time past timeMax ends the last window.
    expect(r.free).toEqual([
      { start: "2024-06-03T09:00:00Z", end: "2024-06-03T10:00:00Z" },
      { start: "2024-06-03T13:00:00Z", end: "2024-06-03T16:30:00Z" },
    ]);
  });

  test("minMinutes 0 keeps the short gap; no busy time is one window", async () => {
    replies = [json({ calendars: { [id]: { busy } } }), json({ calendars: { [id]: { busy: [] } } })];
    const r = await freeWindows(api(), id, "2024-06-03T09:00:00Z", "2024-06-03T17:00:00Z", 0, calendar);
    expect(r.free).toContainEqual({ start: "2024-06-03T12:00:00Z", end: "2024-06-03T12:10:00Z" });
    const empty = await freeWindows(api(), id, "2024-06-03T09:00:00Z", "2024-06-03T17:00:00Z", 30, calendar);
    expect(empty).toEqual({ busy: [], free: [{ start: "2024-06-03T09:00:00Z", end: "2024-06-03T17:00:00Z" }] });
  });

  test("a calendar error in the answer: notFound is Permanent, backendError Retryable", async () => {
    replies = [
      json({ calendars: { [id]: { errors: [{ domain: "global", reason: "notFound" }] } } }),
      json({ calendars: { [id]: { errors: [{ domain: "global", reason: "backendError" }] } } }),
    ];
    const notFound = await failure(
      freeWindows(api(), id, "2024-06-03T09:00:00Z", "2024-06-03T17:00:00Z", 30, calendar),
    );
    expect(notFound).toBeInstanceOf(Permanent);
    const backend = await failure(freeWindows(api(), id, "2024-06-03T09:00:00Z", "2024-06-03T17:00:00Z", 30, calendar));
    expect(backend).toBeInstanceOf(Retryable);
  });

  test("a range that is not two times in order is Permanent before any request", async () => {
    expect(
      await failure(freeWindows(api(), id, "2024-06-03T17:00:00Z", "2024-06-03T09:00:00Z", 30, calendar)),
    ).toBeInstanceOf(Permanent);
    expect(await failure(freeWindows(api(), id, "tomorrow", "2024-06-03T09:00:00Z", 30, calendar))).toBeInstanceOf(
      Permanent,
    );
    expect(seen).toHaveLength(0);
  });
});

describe("Drive", () => {
  test("driveStartToken", async () => {
    replies = [json({ kind: "drive#startPageToken", startPageToken: "42" })];
    expect(await driveStartToken(api(), drive)).toBe("42");
    expect(seen[0]?.path).toBe("/drive/v3/changes/startPageToken");
  });

  test(
    "driveChanges reads every page, removals included, metadata fields only, and the last page's " +
      "newStartPageToken",
    async () => {
      replies = [
        json({
          changes: [
            {
              changeType: "file",
              fileId: "f1",
              removed: false,
              file: {
                name: "Plan.docx",
                mimeType: "application/vnd.google-apps.document",
                modifiedTime: "2024-06-03T10:00:00Z",
                trashed: false,
                webViewLink: "https://docs.example/f1",
              },
            },
            { changeType: "file", fileId: "f2", removed: true },
          ],
          nextPageToken: "43",
        }),
        json({
          changes: [
            { changeType: "drive", driveId: "d1", removed: false },
            { changeType: "file", fileId: "f3", removed: false, file: { name: "Old.pdf", trashed: true } },
          ],
          newStartPageToken: "44",
        }),
      ];
      const r = await driveChanges(api(), "42", drive);
      expect(r).toEqual({
        newStartPageToken: "44",
        changes: [
          {
            fileId: "f1",
            removed: false,
            name: "Plan.docx",
            mimeType: "application/vnd.google-apps.document",
            modifiedTime: "2024-06-03T10:00:00Z",
            trashed: false,
            webViewLink: "https://docs.example/f1",
          },
          { fileId: "f2", removed: true },
          { fileId: "f3", removed: false, name: "Old.pdf", trashed: true },
        ],
      });
      expect(seen.map((s) => [s.path, s.query.get("pageToken")])).toEqual([
        ["/drive/v3/changes", "42"],
        ["/drive/v3/changes", "43"],
      ]);
      for (const s of seen) {
        expect(s.query.get("includeRemoved")).toBe("true");
        expect(s.query.get("fields")).toBe(DRIVE_CHANGE_FIELDS);
      }
      expect(DRIVE_CHANGE_FIELDS).not.toMatch(/content|permissions|owners/);
    },
  );

  test("past pageLimit pages it returns what it read, with the next page token to go on from", async () => {
    replies = [json({ changes: [{ changeType: "file", fileId: "f1", removed: true }], nextPageToken: "43" })];
    expect(await driveChanges(api(), "42", { ...drive, pageLimit: 1 })).toEqual({
      changes: [{ fileId: "f1", removed: true }],
      newStartPageToken: "43",
    });
    expect(seen).toHaveLength(1);
  });
});

describe("errors", () => {
  test("the OAuth client's token is on every call, refreshed once after a 401", async () => {
    replies = [status(401), json({ startPageToken: "7" })];
    expect(await driveStartToken(api(), drive)).toBe("7");
    expect(tokenCalls).toBe(2);
    expect(seen.map((s) => s.auth)).toEqual([`Bearer ${TOKEN}`, `Bearer ${TOKEN}`]);
  });

  test("a 500 is Retryable, a 429 carries its Retry-After", async () => {
    replies = [status(500), status(429, { "retry-after": "30" })];
    const e500 = await failure(gmailHistory(api(), "me", "1", gmail));
    expect(e500).toBeInstanceOf(Retryable);
    expect((e500 as RetryLater).status).toBe(500);
    const e429 = await failure(calendarChanges(api(), "primary", "s1", calendar));
    expect(e429).toBeInstanceOf(RetryLater);
    expect((e429 as RetryLater).retryAfterS).toBe(30);
  });

  test("a 403 is Permanent with its status, not Retryable", async () => {
    replies = [status(403)];
    const e = await failure(gmailMessage(api(), "me", "m1", gmail));
    expect(e).toBeInstanceOf(Permanent);
    expect(e).not.toBeInstanceOf(Retryable);
    expect((e as HttpStatusError).status).toBe(403);
  });

  test("a 404 where none is expected is Permanent", async () => {
    replies = [status(404)];
    expect(await failure(driveChanges(api(), "42", drive))).toBeInstanceOf(Permanent);
  });

  test("no error names the token, a path, a query or a body", async () => {
    const secret = `x${PAYLOAD_SENTINEL}`;
    const calls: [() => Response, () => Promise<unknown>][] = [
      [status(500), () => gmailHistory(api(), secret, secret, gmail)],
      [status(403), () => gmailMessage(api(), secret, secret, { ...gmail, snippet: true })],
      [status(400), () => gmailRecent(api(), secret, 10, gmail)],
      [status(503), () => calendarChanges(api(), secret, secret, calendar)],
      [status(401), () => freeWindows(api(), secret, "2024-06-03T09:00:00Z", "2024-06-03T17:00:00Z", 30, calendar)],
      [status(403), () => driveChanges(api(), secret, drive)],
      [() => new Response(`not json ${PAYLOAD_SENTINEL}`, { status: 200 }), () => driveStartToken(api(), drive)],
      [json({ nextPageToken: secret }), () => gmailHistory(api(), "me", secret, { ...gmail, pageLimit: 1 })],
    ];
    for (const [reply, call] of calls) {
      replies = [reply, reply];
      const e = await failure(call());
      expect(e instanceof Retryable || e instanceof Permanent).toBe(true);
      for (const bad of [SECRET_SENTINEL, PAYLOAD_SENTINEL, "?", "/users", "/calendars", "/changes", "Bearer"])
        expect(e.message).not.toContain(bad);
    }
  });
});
