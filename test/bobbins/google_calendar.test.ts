// google.calendar: a Calendar watch channel (core's Google channel source) and a processor that
// reads the changed events with the stored sync token, through a real `hookspool run` whose
// token endpoint and events.list a stub Google on 127.0.0.1 answers: the first notification is
// the baseline, the next ones deliver what changed, a 410 makes a full resync, the sync handshake
// never reaches the processor, a wrong token is 401; and a hooks module's travel().
import { afterEach, describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { stringify } from "smol-toml";
import { capturesOf } from "../../src/bobbin/captures.ts";
import { openSpool } from "../../src/store/sqlite/db.ts";
import { baseOf, dayOf } from "../../bobbins/google/calendar/processor.ts";
import { type Hookspool, runHookspool, startHookspool, waitFor } from "../helpers/proc.ts";
import { Receiver } from "../helpers/receiver.ts";
import { tempDir } from "../helpers/tmp.ts";
import { builtin, type CaptureResult, expectAsCaptured, kitOf } from "./catalogue.ts";

const bobbin = builtin("google.calendar");
const kit = kitOf(bobbin);
const captures = capturesOf(bobbin.files());
const capture = (name: string) => {
  const c = captures.find((x) => x.file === `captures/${name}.http`);
  if (!c) throw new Error(`no captures/${name}.http`);
  return c;
};
const CHANNEL = capture("accepted").expect.key ?? "";
const DAY_MS = 86_400_000;

type Event = Record<string, unknown>;
type Answer = { status?: number; body: unknown };
interface Asked {
  method: string;
  path: string;
  query: Record<string, string | undefined>;
  authorization: string | null;
  form?: Record<string, string>;
}

/**
 * A stand-in for Google: the token endpoint (POST /token) and events.list
 * (GET /calendar/v3/calendars/<id>/events), which answers through `events` (the test's script)
 * and records every request.
 */
function stubGoogle(events: (q: Record<string, string | undefined>) => Answer) {
  const asked: Asked[] = [];
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    async fetch(req) {
      const u = new URL(req.url);
      const query = Object.fromEntries(u.searchParams);
      const a: Asked = { method: req.method, path: u.pathname, query, authorization: req.headers.get("authorization") };
      if (req.method === "POST" && u.pathname === "/token") {
        a.form = Object.fromEntries(new URLSearchParams(await req.text()));
        asked.push(a);
        return Response.json({ access_token: "kit-test-access", expires_in: 3600, token_type: "Bearer" });
      }
      asked.push(a);
      if (req.method !== "GET" || !/^\/calendar\/v3\/calendars\/[^/]+\/events$/.test(u.pathname))
        return Response.json({ error: { code: 404, message: "Not Found" } }, { status: 404 });
      if (a.authorization !== "Bearer kit-test-access")
        return Response.json({ error: { code: 401, message: "Invalid Credentials" } }, { status: 401 });
      const answer = events(query);
      return Response.json(answer.body, { status: answer.status ?? 200 });
    },
  });
  const url = `http://127.0.0.1:${server.port}`;
  return { url, asked, lists: () => asked.filter((x) => x.path.endsWith("/events")), stop: () => server.stop(true) };
}

const event = (id: string, over: Event = {}): Event => ({
  kind: "calendar#event",
  id,
  status: "confirmed",
  htmlLink: `https://www.google.com/calendar/event?eid=${id}`,
  updated: new Date().toISOString(),
  summary: `Event ${id} (example)`,
  start: { dateTime: "2026-08-31T10:00:00+02:00" },
  end: { dateTime: "2026-08-31T11:00:00+02:00" },
  ...over,
});
const page = (items: Event[], tail: { nextSyncToken?: string; nextPageToken?: string }) => ({
  body: { kind: "calendar#events", summary: "Example Calendar", items, ...tail },
});

/** What an item of the event is, as the bobbin emits it. */
const itemOf = (e: Event) => {
  const when = (v: unknown) => {
    const t = (v ?? {}) as { dateTime?: string; date?: string };
    return t.dateTime ?? t.date ?? "";
  };
  return {
    key: "primary",
    id: e.id,
    status: e.status,
    summary: e.summary ?? "",
    start: when(e.start),
    end: when(e.end),
    updated: e.updated ?? "",
    htmlLink: e.htmlLink ?? "",
    location: e.location ?? "",
  };
};
/** Items by event id: each item is a batch of its own, and batches may arrive in any order. */
const byId = (items: Record<string, unknown>[]) => [...items].sort((a, b) => String(a.id).localeCompare(String(b.id)));

interface Run {
  hs: Hookspool;
  port: number;
  home: string;
  receiver: Receiver<{ route: string; key: string; events: Record<string, unknown>[] }>;
  /** Send a notification (the accepted capture's headers, with these overrides). */
  notify(over?: Record<string, string | null>, name?: string): Promise<{ status: number; body: string }>;
  /** The changed items delivered so far, in order. */
  items(): Record<string, unknown>[];
  /** Wait until the notification of this message number has been processed (its batch delivered). */
  processed(messageNumber: string): Promise<void>;
  stop(): Promise<void>;
}

const runs: Run[] = [];
const stubs: { stop(): void }[] = [];
afterEach(async () => {
  for (const r of runs.splice(0)) await r.stop();
  for (const s of stubs.splice(0)) s.stop();
});

/**
 * `hookspool run` with one google.calendar instance, its API and token endpoint on `google`. A home
 * of its own per test, not the shared run (catalogue.ts): the instance's api_base_url and the
 * credential's token_uri name this test's stub Google, so the home is written after the stub
 * listens, and each test starts from a processor with no stored sync token.
 */
async function start(googleUrl: string, settings: Record<string, unknown> = {}): Promise<Run> {
  const home = tempDir("hookspool-calendar-");
  const receiver = new Receiver<{ route: string; key: string; events: Record<string, unknown>[] }>({});
  const credential = {
    ...(JSON.parse(kit.secrets.credential ?? "{}") as Record<string, string>),
    token_uri: `${googleUrl}/token`,
  };
  writeFileSync(join(home, "secret-channel-token"), kit.secrets.channel_token ?? "", { mode: 0o600 });
  writeFileSync(join(home, "secret-credential"), JSON.stringify(credential), { mode: 0o600 });
  const instance = kit.instance.name;
  writeFileSync(
    join(home, "config.toml"),
    stringify({
      intake: { listen: "127.0.0.1:0" },
      dispatch: { poll_s: 0.05, heartbeat_s: 1 },
      bobbins: {
        [instance]: {
          bobbin: "google.calendar",
          secrets: {
            channel_token: { file: join(home, "secret-channel-token") },
            credential: { file: join(home, "secret-credential") },
          },
          settings: { ...kit.instance.settings, api_base_url: `${googleUrl}/calendar/v3`, ...settings },
          outputs: { changed: "receiver" },
          span: "immediate",
        },
      },
      destinations: {
        receiver: {
          type: "http",
          url: `http://127.0.0.1:${receiver.port}/in`,
          allow_insecure: true,
          unsigned: true,
          timeout_s: 5,
        },
      },
    }),
  );
  const hs = await startHookspool(home, ["run"]);
  const port = await hs.port();
  const accepted = capture("accepted");
  const batchState = (n: string) => {
    const db = openSpool(join(home, "spool.db"));
    try {
      const row = db.db
        .query("SELECT b.state FROM events e JOIN batches b ON b.id = e.batch_id WHERE e.source = ? AND e.dedup_id = ?")
        .get(instance, `${CHANNEL}:${n}`) as { state: string } | null;
      return row?.state ?? null;
    } finally {
      db.close();
    }
  };
  const run: Run = {
    hs,
    port,
    home,
    receiver,
    async notify(over = {}, name = "accepted") {
      const c = name === "accepted" ? accepted : capture(name);
      const headers = new Headers();
      for (const [k, v] of c.request.headers)
        if (!["host", "content-length"].includes(k.toLowerCase())) headers.set(k, v);
      for (const [k, v] of Object.entries(over))
        if (v === null) headers.delete(k);
        else headers.set(k, v);
      const res = await fetch(
        `http://127.0.0.1:${port}${c.request.url.replace(/^\/hooks\/[^/?]+/, `/hooks/${instance}`)}`,
        { method: "POST", headers, body: c.request.body },
      );
      return { status: res.status, body: await res.text() };
    },
    items: () => receiver.accepted().flatMap((d) => d.doc.events),
    async processed(n) {
      await waitFor(`the batch of message ${n} delivered`, () => {
        const s = batchState(n);
        if (s === "dead") throw new Error(`the batch of message ${n} is dead: ${hs.stderr().slice(-800)}`);
        return s === "delivered";
      });
    },
    async stop() {
      hs.kill("SIGTERM");
      await hs.exited;
      receiver.stop();
    },
  };
  runs.push(run);
  return run;
}

describe("google.calendar through hookspool run, a stub Google on 127.0.0.1", () => {
  test("the captures get what they say: accepted queued under the channel id, sync 200 ignored, wrong " +
    "token 401, no channel id quarantined", async () => {
    const google = stubGoogle(() => page([event("kitevent01")], { nextSyncToken: "kit-sync-1" }));
    stubs.push(google);
    const r = await start(google.url);
    const results: CaptureResult[] = [];
    for (const c of captures) {
      const got = await r.notify({}, c.file.replace(/^captures\/|\.http$/g, ""));
      results.push({ capture: c, instance: kit.instance.name, status: got.status, body: got.body });
    }
    expectAsCaptured(results);
    expect(results.find((x) => x.capture.file === "captures/rejected.http")?.body).toBe("");
    await r.processed(capture("accepted").request.headers.find(([k]) => k === "X-Goog-Message-Number")?.[1] ?? "");
    const db = openSpool(join(r.home, "spool.db"));
    try {
      const stored = db.db
        .query(
          "SELECT b.key, e.event_type, e.payload, e.headers FROM events e JOIN batches b ON b.id = " +
            "e.batch_id WHERE e.source = ? AND b.destination != 'quarantine'",
        )
        .all(kit.instance.name) as { key: string; event_type: string; payload: string; headers: string }[];
      // Only the accepted notification was queued: not the sync, not the refused one.
      expect(stored.map((s) => [s.key, s.event_type])).toEqual([[CHANNEL, "exists"]]);
      expect(JSON.parse(stored[0]?.payload ?? "{}")).toMatchObject({
        channel_id: CHANNEL,
        resource_state: "exists",
        message_number: "2481093",
      });
      expect(`${stored[0]?.payload}${stored[0]?.headers}`).not.toContain(kit.secrets.channel_token ?? "");
    } finally {
      db.close();
    }
    // The accepted capture made the baseline: one full list, nothing delivered.
    expect(google.lists().map((l) => l.query.syncToken ?? null)).toEqual([null]);
    expect(r.items()).toEqual([]);
  }, 30_000);

  test("the first notification is the baseline; the next deliver what changed since the stored sync " +
    "token; a 410 makes a full resync", async () => {
    const t0 = Date.now();
    const old = new Date(t0 - 3 * DAY_MS).toISOString();
    const moved = event("kitevent01", {
      summary: "Planning (moved)",
      location: "Room 4.12",
      start: { dateTime: "2026-09-01T14:00:00+02:00" },
      end: { dateTime: "2026-09-01T15:00:00+02:00" },
    });
    const added = event("kitevent03", { start: { date: "2026-09-02" }, end: { date: "2026-09-03" } });
    const cancelled = {
      kind: "calendar#event",
      id: "kitevent02",
      status: "cancelled",
      updated: new Date(t0).toISOString(),
    };
    const recent = event("kitevent04", { summary: "Added while the token went stale" });
    let fullSyncs = 0;
    const google = stubGoogle((q) => {
      if (q.syncToken === undefined) {
        fullSyncs++;
        // The baseline, then (after the 410) the resync: one event unchanged for days, one new.
        if (fullSyncs === 1)
          return page([event("kitevent01", { updated: old }), event("kitevent02", { updated: old })], {
            nextSyncToken: "kit-sync-1",
          });
        return page([event("kitevent01", { summary: "Planning (moved)", updated: old }), recent], {
          nextSyncToken: "kit-sync-3",
        });
      }
      if (q.syncToken === "kit-sync-1") {
        // Two pages: the sync token only on the last.
        if (!q.pageToken) return page([moved, added], { nextPageToken: "kit-page-2" });
        return page([cancelled], { nextSyncToken: "kit-sync-2" });
      }
      if (q.syncToken === "kit-sync-2")
        return {
          status: 410,
          body: {
            error: {
              code: 410,
              message: "Sync token is no longer valid, a full sync is required.",
              errors: [{ domain: "calendar", reason: "fullSyncRequired" }],
            },
          },
        };
      if (q.syncToken === "kit-sync-3" || q.syncToken === "kit-sync-4")
        return page([], { nextSyncToken: "kit-sync-4" });
      return { status: 400, body: { error: { code: 400, message: "Invalid sync token" } } };
    });
    stubs.push(google);
    const r = await start(google.url);

    // The sync handshake: 200 ignored, and the processor never hears of it.
    expect(await r.notify({}, "sync")).toEqual({ status: 200, body: '{"status":"ignored"}' });
    // A wrong token: 401, empty.
    expect(await r.notify({ "X-Goog-Channel-Token": "kit-test-wrong-token" })).toEqual({ status: 401, body: "" });

    // 1. The first notification: the baseline. One full list from a day ago, nothing delivered.
    expect(await r.notify({ "X-Goog-Message-Number": "101" })).toEqual({ status: 202, body: '{"status":"queued"}' });
    await r.processed("101");
    const baseline = google.lists();
    expect(baseline.length).toBe(1);
    expect(baseline[0]?.path).toBe("/calendar/v3/calendars/primary/events");
    expect(baseline[0]?.query.syncToken).toBeUndefined();
    expect(baseline[0]?.query.showDeleted).toBe("true");
    expect(baseline[0]?.authorization).toBe("Bearer kit-test-access");
    const timeMin = Date.parse(baseline[0]?.query.timeMin ?? "");
    expect(Math.abs(timeMin - (t0 - DAY_MS))).toBeLessThan(60_000);
    // The refresh used the credential, at its token_uri.
    const refresh = google.asked.find((a) => a.path === "/token");
    expect(refresh?.form).toMatchObject({
      grant_type: "refresh_token",
      client_id: "kit-test-client",
      client_secret: "kit-test-secret",
      refresh_token: "kit-test-refresh",
    });
    expect(r.items()).toEqual([]);

    // The same notification again (Google's retry): a duplicate, no second processor run.
    expect(await r.notify({ "X-Goog-Message-Number": "101" })).toEqual({ status: 200, body: '{"status":"duplicate"}' });

    // 2. A change: the stored token is sent, every page is read, each changed event is one item.
    expect((await r.notify({ "X-Goog-Message-Number": "102" })).status).toBe(202);
    await r.processed("102");
    await waitFor("three changed items", () => r.items().length >= 3);
    const incremental = google.lists().slice(1);
    expect(incremental.map((l) => [l.query.syncToken, l.query.pageToken ?? null, l.query.timeMin ?? null])).toEqual([
      ["kit-sync-1", null, null],
      ["kit-sync-1", "kit-page-2", null],
    ]);
    expect(byId(r.items())).toEqual(byId([itemOf(moved), itemOf(added), itemOf(cancelled)]));
    const changed = r.receiver.accepted().map((d) => d.doc);
    expect(new Set(changed.map((d) => d.route))).toEqual(new Set(["calendar-changed"]));
    // The items' key is the calendar id.
    expect(new Set(changed.map((d) => d.key))).toEqual(new Set(["primary"]));

    // 3. The token went stale: 410, then a full list from a day ago; only what was updated since
    //    the last sync is delivered.
    expect((await r.notify({ "X-Goog-Message-Number": "103" })).status).toBe(202);
    await r.processed("103");
    await waitFor("the resync's item", () => r.items().length >= 4);
    const resync = google.lists().slice(3);
    expect(resync.map((l) => [l.query.syncToken ?? null, l.query.timeMin === undefined ? null : "timeMin"])).toEqual([
      ["kit-sync-2", null],
      [null, "timeMin"],
    ]);
    expect(Math.abs(Date.parse(resync[1]?.query.timeMin ?? "") - (Date.now() - DAY_MS))).toBeLessThan(60_000);
    // Step 2's items were all delivered before this notification: the rest are the resync's.
    expect(r.items().slice(3)).toEqual([itemOf(recent)]);

    // 4. The resync's token is the one asked with next; nothing changed, nothing delivered.
    expect((await r.notify({ "X-Goog-Message-Number": "104" })).status).toBe(202);
    await r.processed("104");
    expect(
      google
        .lists()
        .slice(5)
        .map((l) => l.query.syncToken),
    ).toEqual(["kit-sync-3"]);
    expect(r.items().length).toBe(4);
    // 5. The re-watch job's catch-up batch (SETUP.md, step 5) runs the processor like a notification.
    const sweep = join(r.home, "sweep.json");
    writeFileSync(sweep, '{"sweep": "calendar-rewatch"}');
    const enq = await runHookspool(r.home, [
      "enqueue",
      "--source",
      kit.instance.name,
      "--key",
      "sweep",
      "--event-type",
      "sweep",
      "--file",
      sweep,
    ]);
    expect(enq.code).toBe(0);
    await waitFor("the catch-up batch delivered", () => {
      const db = openSpool(join(r.home, "spool.db"));
      try {
        return (
          (
            db.db.query("SELECT state FROM batches WHERE key = 'sweep' AND destination = 'script:calendar'").get() as {
              state: string;
            } | null
          )?.state === "delivered"
        );
      } finally {
        db.close();
      }
    });
    expect(
      google
        .lists()
        .slice(6)
        .map((l) => l.query.syncToken),
    ).toEqual(["kit-sync-4"]);
    expect(r.items().length).toBe(4);
    // One token refresh for the whole run: the access token is kept in the state directory.
    expect(google.asked.filter((a) => a.path === "/token").length).toBe(1);

    // Never a secret or a token in the log.
    for (const secret of [
      kit.secrets.channel_token ?? "",
      "kit-test-secret",
      "kit-test-refresh",
      "kit-test-access",
      "kit-sync-1",
    ])
      expect(r.hs.stderr()).not.toContain(secret);
  }, 60_000);

  test("a hooks module's travel(event, dayEvents, ctx) is asked for each changed event, with that " +
    "day's events", async () => {
    const first = event("kitevent11", {
      summary: "Standup",
      start: { dateTime: "2026-09-01T09:00:00+02:00" },
      end: { dateTime: "2026-09-01T09:15:00+02:00" },
      location: "Office (example)",
    });
    const second = event("kitevent12", {
      summary: "Customer visit",
      start: { dateTime: "2026-09-01T14:00:00+02:00" },
      end: { dateTime: "2026-09-01T15:00:00+02:00" },
      location: "Customer site (example)",
    });
    const google = stubGoogle((q) => {
      if (q.timeMax !== undefined) return page([first, second], {});
      if (q.syncToken === undefined) return page([], { nextSyncToken: "kit-sync-1" });
      return page([second, { kind: "calendar#event", id: "kitevent13", status: "cancelled" }], {
        nextSyncToken: "kit-sync-2",
      });
    });
    stubs.push(google);
    const dir = tempDir("hookspool-calendar-hooks-");
    const hooks = join(dir, "hooks.ts");
    writeFileSync(
      hooks,
      `export function travel(event, dayEvents, ctx) {
  if (event.status === "cancelled") return undefined;
  const i = dayEvents.findIndex((e) => e.id === event.id);
  const before = i > 0 ? dayEvents[i - 1] : null;
  return { from: before ? before.location : null, to: event.location, day: dayEvents.map((e) => ` +
        `e.id), calendar: ctx.settings.calendar_id };
}
`,
      { mode: 0o644 },
    );
    const r = await start(google.url, { hooks });
    expect((await r.notify({ "X-Goog-Message-Number": "201" })).status).toBe(202);
    await r.processed("201");
    expect((await r.notify({ "X-Goog-Message-Number": "202" })).status).toBe(202);
    await r.processed("202");
    await waitFor("two changed items", () => r.items().length >= 2);
    expect(byId(r.items())).toEqual([
      {
        ...itemOf(second),
        travel: {
          from: "Office (example)",
          to: "Customer site (example)",
          day: ["kitevent11", "kitevent12"],
          calendar: "primary",
        },
      },
      itemOf({ id: "kitevent13", status: "cancelled" }),
    ]);
    // One day query, for the day of the changed event, in its own offset; none for the cancelled one.
    const days = google.lists().filter((l) => l.query.timeMax !== undefined);
    expect(days.map((d) => [d.query.timeMin, d.query.timeMax, d.query.singleEvents, d.query.orderBy])).toEqual([
      ["2026-09-01T00:00:00+02:00", "2026-09-02T00:00:00+02:00", "true", "startTime"],
    ]);
  }, 60_000);
});

describe("the processor's own rules", () => {
  test("api_base_url: empty is Google's; https, or plain http on 127.0.0.1 or localhost only", () => {
    expect(baseOf("")).toBeUndefined();
    expect(baseOf("https://calendar-proxy.example.com/calendar/v3/")).toBe(
      "https://calendar-proxy.example.com/calendar/v3",
    );
    expect(baseOf("http://127.0.0.1:8080/calendar/v3")).toBe("http://127.0.0.1:8080/calendar/v3");
    expect(baseOf("http://localhost:8080")).toBe("http://localhost:8080");
    for (const bad of [
      "http://calendar.example.com",
      "http://10.0.0.5/calendar/v3",
      "ftp://127.0.0.1/",
      "www.googleapis.com",
      "https://user:pw@www.googleapis.com",
      "https://www.googleapis.com/calendar/v3?key=x",
    ])
      expect([bad, baseOf(bad)]).toEqual([bad, null]);
  });

  test("an event's day: its date in its own offset, UTC for an all-day event, none for no start", () => {
    expect(dayOf("2026-09-01T14:00:00+02:00")).toEqual({
      timeMin: "2026-09-01T00:00:00+02:00",
      timeMax: "2026-09-02T00:00:00+02:00",
    });
    expect(dayOf("2026-12-31T23:30:00Z")).toEqual({ timeMin: "2026-12-31T00:00:00Z", timeMax: "2027-01-01T00:00:00Z" });
    expect(dayOf("2026-02-28")).toEqual({ timeMin: "2026-02-28T00:00:00Z", timeMax: "2026-03-01T00:00:00Z" });
    expect(dayOf("")).toBeNull();
  });

  test("an instance whose api_base_url is plain http on another host fails its batch for good", async () => {
    const google = stubGoogle(() => page([], { nextSyncToken: "kit-sync-1" }));
    stubs.push(google);
    const r = await start(google.url, { api_base_url: "http://calendar.example.com/calendar/v3" });
    expect((await r.notify({ "X-Goog-Message-Number": "301" })).status).toBe(202);
    const reason = await waitFor("the processor's batch dead", () => {
      const db = openSpool(join(r.home, "spool.db"));
      try {
        const row = db.db
          .query("SELECT last_error FROM batches WHERE destination = 'script:calendar' AND state = 'dead'")
          .get() as { last_error: string | null } | null;
        return row ? (row.last_error ?? "dead") : null;
      } finally {
        db.close();
      }
    });
    expect(reason).toContain("api_base_url must be https");
    expect(google.lists()).toEqual([]);
  }, 30_000);
});
