// google.gmail: Gmail's push notifications through a Pub/Sub push subscription (a token in the
// URL's query), a processor that asks Gmail what is new since its stored history id and
// classifies each message with the shipped rule pack (or the deployment's hooks). End to end
// through a real `hookspool run` whose Google (token endpoint, Gmail, Calendar free/busy) is a
// stub on 127.0.0.1; the rule pack, the push decoding and the processor's own decisions on their own.
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { stringify } from "smol-toml";
import { capturesOf } from "../../src/bobbin/captures.ts";
import type { Batch, Context, HttpAnswer, Item, OAuthClient } from "../../src/plugin/processor.ts";
import { BadPayload, Permanent } from "../../src/plugin/types.ts";
import { classify, needsSnippet, parseRulePack, type RulePack } from "../../src/providers/mailrules.ts";
import { openSpool } from "../../src/store/sqlite/db.ts";
import { findText } from "../../src/store/sqlite/inspect.ts";
import processor, {
  baseOf,
  FALLBACK_RECENT,
  type GmailSettings,
  hookVerdict,
  isIncoming,
  packsOf,
  SHIPPED_PACKS,
} from "../../bobbins/google/gmail/processor.ts";
import { decodePush } from "../../bobbins/google/gmail/source.ts";
import { startHookspool, waitFor } from "../helpers/proc.ts";
import { Receiver } from "../helpers/receiver.ts";
import { tempDir } from "../helpers/tmp.ts";
import { builtin, type CaptureResult, expectAsCaptured, kitOf } from "./catalogue.ts";

// Real hookspool processes on a shared 2-core machine: seconds, not the 5 s default.
setDefaultTimeout(30_000);

const bobbin = builtin("google.gmail");
const kit = kitOf(bobbin);
const NOW = kit.now ?? 0;
const OWNER = "owner@example.com";
const PUSH_TOKEN = kit.secrets.push_token;
const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString("base64");

// ---------------------------------------------------------------------------------------------
// A stub Google

interface Msg {
  id: string;
  from: string;
  subject: string;
  labelIds?: string[];
}

interface Asked {
  method: string;
  path: string;
  query: URLSearchParams;
  body: string;
}

/**
 * Google as the processor meets it: OAuth's token endpoint, Gmail's profile, messages and history, Calendar's freeBusy.
 */
class StubGoogle {
  readonly asked: Asked[] = [];
  historyId = "1000";
  recent: string[] = [];
  /** startHistoryId -> the ids history.list answers (and the new historyId), or 404. */
  history = new Map<string, { ids: string[]; historyId: string } | 404>();
  messages = new Map<string, Msg>();
  /** Busy an hour after the window opens, and again the next day. */
  static busyFrom(timeMin: string): { start: string; end: string }[] {
    const at = (h: number) => new Date(Date.parse(timeMin) + h * 3_600_000).toISOString().replace(".000Z", "Z");
    return [
      { start: at(1), end: at(2) },
      { start: at(30), end: at(31) },
    ];
  }
  private server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch: (req) => this.answer(req),
  });

  get url(): string {
    return `http://127.0.0.1:${this.server.port}`;
  }

  stop(): void {
    this.server.stop(true);
  }

  /** The Gmail calls asked so far, as "METHOD /path" after /users/<owner>. */
  gmailCalls(): string[] {
    const mailbox = `/users/${encodeURIComponent(OWNER)}`;
    return this.asked
      .filter((a) => a.path.startsWith(mailbox))
      .map((a) => `${a.method} ${a.path.slice(mailbox.length)}`);
  }

  private async answer(req: Request): Promise<Response> {
    const u = new URL(req.url);
    const body = await req.text();
    this.asked.push({ method: req.method, path: u.pathname, query: u.searchParams, body });
    if (req.method === "POST" && u.pathname === "/token")
      return Response.json({ access_token: "kit-test-access-token", expires_in: 3599, token_type: "Bearer" });
    if (req.headers.get("authorization") !== "Bearer kit-test-access-token")
      return Response.json({ error: { code: 401 } }, { status: 401 });
    const mailbox = `/users/${encodeURIComponent(OWNER)}`;
    if (req.method === "POST" && u.pathname === "/freeBusy") {
      const q = JSON.parse(body) as { timeMin: string; timeMax: string; items: { id: string }[] };
      return Response.json({
        kind: "calendar#freeBusy",
        timeMin: q.timeMin,
        timeMax: q.timeMax,
        calendars: { [q.items[0]?.id ?? ""]: { busy: StubGoogle.busyFrom(q.timeMin) } },
      });
    }
    if (!u.pathname.startsWith(mailbox)) return Response.json({ error: { code: 404 } }, { status: 404 });
    const rest = u.pathname.slice(mailbox.length);
    if (rest === "/profile")
      return Response.json({ emailAddress: OWNER, messagesTotal: 3, threadsTotal: 3, historyId: this.historyId });
    if (rest === "/messages")
      return Response.json({
        messages: this.recent.map((id) => ({ id, threadId: id })),
        resultSizeEstimate: this.recent.length,
      });
    if (rest === "/history") {
      const h = this.history.get(u.searchParams.get("startHistoryId") ?? "");
      if (h === undefined || h === 404)
        return Response.json({ error: { code: 404, message: "Requested entity was not found." } }, { status: 404 });
      return Response.json({
        history: h.ids.map((id, i) => ({
          id: String(Number(h.historyId) - h.ids.length + i),
          messagesAdded: [{ message: { id, threadId: id, labelIds: ["INBOX"] } }],
        })),
        historyId: h.historyId,
      });
    }
    const m = /^\/messages\/([^/]+)$/.exec(rest);
    const msg = m ? this.messages.get(decodeURIComponent(m[1] ?? "")) : undefined;
    if (!msg) return Response.json({ error: { code: 404 } }, { status: 404 });
    const headers = [
      { name: "From", value: msg.from },
      { name: "To", value: OWNER },
      { name: "Subject", value: msg.subject },
      { name: "Date", value: "Tue, 1 Dec 2026 09:12:44 +0000" },
      { name: "Message-ID", value: `<${msg.id}@mail.example.com>` },
    ];
    return Response.json({
      id: msg.id,
      threadId: `t-${msg.id}`,
      labelIds: msg.labelIds ?? ["INBOX", "UNREAD"],
      internalDate: "1796116364000",
      payload: { headers },
    });
  }
}

/** A Pub/Sub push of a Gmail notification, as the subscription posts it. */
function push(historyId: number, messageId: string): string {
  return JSON.stringify({
    message: {
      data: b64({ emailAddress: OWNER, historyId }),
      messageId,
      message_id: messageId,
      publishTime: "2026-12-01T08:00:01.000Z",
      publish_time: "2026-12-01T08:00:01.000Z",
    },
    subscription: "projects/example-project/subscriptions/hookspool-gmail-push",
  });
}

// ---------------------------------------------------------------------------------------------
// End to end

type ItemDoc = Record<string, unknown> & { key: string };

/**
 * A home serving one google.gmail instance, `gmail`, whose Google is `google`, delivering its items
 * to a receiver. Its own, not the shared run (catalogue.ts): the instance's api_base_url and the
 * credential's token_uri name the stub, which listens first, and a deployment's settings (hooks,
 * rule packs) and stored history id are those of the test that starts it.
 */
class Deployment {
  readonly receiver = new Receiver<{ route: string; key: string; events: ItemDoc[] }>({});
  readonly home = tempDir("hookspool-gmail-");
  hs: Awaited<ReturnType<typeof startHookspool>> | null = null;
  port = 0;

  constructor(
    readonly google: StubGoogle,
    private readonly settings: Record<string, unknown> = {},
  ) {}

  async start(): Promise<void> {
    const pushFile = join(this.home, "push-token");
    const credFile = join(this.home, "credential.json");
    writeFileSync(pushFile, PUSH_TOKEN, { mode: 0o600 });
    // The kit's credential, its token endpoint on the stub.
    writeFileSync(
      credFile,
      JSON.stringify({ ...JSON.parse(kit.secrets.credential ?? "{}"), token_uri: `${this.google.url}/token` }),
      { mode: 0o600 },
    );
    writeFileSync(
      join(this.home, "config.toml"),
      stringify({
        intake: { listen: "127.0.0.1:0" },
        dispatch: { poll_s: 0.05, heartbeat_s: 1 },
        bobbins: {
          gmail: {
            bobbin: "google.gmail",
            secrets: { push_token: { file: pushFile }, credential: { file: credFile } },
            settings: { ...kit.instance.settings, api_base_url: this.google.url, ...this.settings },
            outputs: { scheduling: "receiver", "agent-mail": "receiver" },
            span: "immediate",
          },
        },
        destinations: {
          receiver: {
            type: "http",
            url: `http://127.0.0.1:${this.receiver.port}/in`,
            allow_insecure: true,
            unsigned: true,
            timeout_s: 5,
          },
        },
      }),
    );
    this.hs = await startHookspool(this.home, ["run"]);
    this.port = await this.hs.port();
  }

  async stop(): Promise<void> {
    this.hs?.kill("SIGTERM");
    await this.hs?.exited;
    this.receiver.stop();
    this.google.stop();
  }

  stderr = () => this.hs?.stderr() ?? "";

  post = (body: string, token = PUSH_TOKEN) =>
    fetch(`http://127.0.0.1:${this.port}/hooks/gmail?token=${encodeURIComponent(token)}`, {
      method: "POST",
      headers: { "Content-Type": "application/json", "User-Agent": "APIs-Google" },
      body,
    });

  /** Every batch delivered, `notifications` notification batches among them (the quarantine aside). */
  settled = (notifications: number): boolean => {
    const db = openSpool(join(this.home, "spool.db"));
    try {
      const rows = db.db
        .query("SELECT route, state FROM batches WHERE source = 'gmail' AND destination != 'quarantine'")
        .all() as { route: string; state: string }[];
      return (
        rows.filter((r) => r.route === "gmail").length === notifications && rows.every((r) => r.state === "delivered")
      );
    } finally {
      db.close();
    }
  };

  /** The items delivered so far, each with the route of its batch. */
  items = (): Record<string, unknown>[] =>
    this.receiver.accepted().flatMap((d) => d.doc.events.map((e) => ({ route: d.doc.route, ...e })));
}

describe("google.gmail through hookspool run, against a stub Google", () => {
  const google = new StubGoogle();
  const d = new Deployment(google);
  const { post, settled, items } = d;
  const home = d.home;
  const receiver = d.receiver;
  const results: CaptureResult[] = [];
  let port = 0;

  beforeAll(async () => {
    await d.start();
    port = d.port;
  });
  afterAll(() => d.stop());

  test("the captures get what they expect: queued, 401, quarantined", async () => {
    google.historyId = "4821937";
    for (const c of capturesOf(bobbin.files())) {
      const r = c.request;
      const headers = r.headers.filter(([k]) => !["host", "content-length"].includes(k.toLowerCase()));
      const res = await fetch(`http://127.0.0.1:${port}${r.url}`, { method: r.method, headers, body: r.body });
      results.push({ capture: c, instance: "gmail", status: res.status, body: await res.text() });
    }
    expectAsCaptured(results);
    expect(results.find((r) => r.capture.file === "captures/rejected.http")?.body).toBe("");
    // The accepted capture is the first notification: the baseline, and nothing else.
    await waitFor("the baseline batch", () => settled(1));
    const db = openSpool(join(home, "spool.db"));
    try {
      const ev = db.db
        .query(
          "SELECT e.payload, e.event_type, e.dedup_id, b.key FROM events e JOIN batches b ON b.id = " +
            "e.batch_id WHERE b.route = 'gmail'",
        )
        .get() as Record<string, string>;
      expect(ev).toEqual({
        payload: JSON.stringify({
          emailAddress: OWNER,
          historyId: "4821937",
          messageId: "13467252813394811",
          publishTime: "2026-12-01T07:59:58.612Z",
        }),
        event_type: "gmail.notification",
        dedup_id: "13467252813394811",
        key: OWNER,
      });
    } finally {
      db.close();
    }
    expect(google.gmailCalls()).toEqual(["GET /profile", "GET /messages"]);
    expect(google.asked.find((a) => a.path.endsWith("/messages"))?.query.get("maxResults")).toBe("10");
    expect(items()).toEqual([]);
    // The same push again (Pub/Sub redelivers what it thinks failed): a duplicate.
    const accepted = results.find((r) => r.capture.file === "captures/accepted.http")?.capture.request.body;
    expect((await post(new TextDecoder().decode(accepted))).status).toBe(200);
  });

  test(
    "the next push: a scheduling item with free windows, an agent-mail item, nothing for the rest; " +
      "from the stored history id",
    async () => {
      google.messages.set("m-meet", {
        id: "m-meet",
        from: "Alex Doe <alex@partner.example>",
        subject: "Can we meet next week?",
      });
      google.messages.set("m-dentist", {
        id: "m-dentist",
        from: "Bright Smile Dental <noreply@dentist.example>",
        subject: "Appointment confirmed: Tue 14 May 2026 at 10:30",
      });
      google.messages.set("m-news", { id: "m-news", from: "News <news@list.example>", subject: "Your weekly digest" });
      google.messages.set("m-sent", {
        id: "m-sent",
        from: `Owner <${OWNER}>`,
        subject: "Re: can we meet?",
        labelIds: ["SENT"],
      });
      google.history.set("4821937", { ids: ["m-meet", "m-dentist", "m-news", "m-sent"], historyId: "4821990" });
      google.asked.length = 0;
      expect((await post(push(4821990, "13467252813395001"))).status).toBe(202);
      // settled: every batch of the source delivered, the processor's emits too (they are enqueued
      // with the notification's outcome), so no item is still on its way.
      await waitFor("the second notification's items", () => settled(2) && items().length >= 2);
      // Two routes, two keys' worth of batches in parallel: they may arrive in either order.
      const got = items().sort((a, b) => String(b.route).localeCompare(String(a.route)));
      expect(got.map((i) => i.route)).toEqual(["gmail-scheduling", "gmail-agent-mail"]);
      const [scheduling, mail] = got;
      expect(scheduling).toMatchObject({
        key: OWNER,
        id: "m-meet",
        threadId: "t-m-meet",
        from: "Alex Doe <alex@partner.example>",
        subject: "Can we meet next week?",
        labelIds: ["INBOX", "UNREAD"],
        rule: "appointments/meeting-request",
        values: {},
      });
      const window = scheduling?.window as { start: string; end: string };
      expect(Date.parse(window.end) - Date.parse(window.start)).toBe(7 * 86_400_000);
      expect(Math.abs(Date.parse(window.start) - Date.now())).toBeLessThan(600_000);
      const [one, two] = StubGoogle.busyFrom(window.start);
      expect(scheduling?.free).toEqual([
        { start: window.start, end: one?.start },
        { start: one?.end, end: two?.start },
        { start: two?.end, end: window.end },
      ]);
      expect(mail).toEqual({
        route: "gmail-agent-mail",
        key: OWNER,
        id: "m-dentist",
        threadId: "t-m-dentist",
        from: "Bright Smile Dental <noreply@dentist.example>",
        subject: "Appointment confirmed: Tue 14 May 2026 at 10:30",
        date: "Tue, 1 Dec 2026 09:12:44 +0000",
        labelIds: ["INBOX", "UNREAD"],
        rule: "appointments/appointment-confirmation",
        values: { date: "14 May 2026", time: "10:30" },
      });
      // From the baseline's history id; every message read as metadata without a snippet; one free/busy.
      const history = google.asked.filter((a) => a.path.endsWith("/history"));
      expect(history.map((a) => [a.query.get("startHistoryId"), a.query.get("historyTypes")])).toEqual([
        ["4821937", "messageAdded"],
      ]);
      const gets = google.asked.filter((a) => a.path.includes("/messages/"));
      expect(gets.map((a) => a.path.split("/").pop())).toEqual(["m-meet", "m-dentist", "m-news", "m-sent"]);
      for (const g of gets) {
        expect(g.query.get("format")).toBe("metadata");
        expect(g.query.get("fields")).not.toContain("snippet");
      }
      const freeBusy = google.asked.filter((a) => a.path === "/freeBusy");
      expect(freeBusy.map((a) => (JSON.parse(a.body) as { items: unknown }).items)).toEqual([[{ id: "primary" }]]);
    },
  );

  test("a 404 from history.list falls back to the newest messages, each classified once", async () => {
    google.messages.set("m-physio", {
      id: "m-physio",
      from: "Clinic <bookings@clinic.example>",
      subject: "Reminder: physio appointment on 3rd June at 9am",
    });
    google.history.set("4821990", 404);
    google.historyId = "4830000";
    // Newest first, as messages.list answers; m-dentist was classified already.
    google.recent = ["m-physio", "m-dentist"];
    google.asked.length = 0;
    const before = items().length;
    expect((await post(push(4830000, "13467252813395002"))).status).toBe(202);
    await waitFor("the fallback's item", () => settled(3) && items().length > before);
    expect(
      items()
        .slice(before)
        .map((i) => [i.route, i.id, i.values]),
    ).toEqual([["gmail-agent-mail", "m-physio", { date: "3rd June", time: "9am" }]]);
    expect(google.gmailCalls()).toEqual(["GET /history", "GET /profile", "GET /messages", "GET /messages/m-physio"]);
    expect(google.asked.find((a) => a.path.endsWith("/history"))?.query.get("startHistoryId")).toBe("4821990");
    expect(google.asked.find((a) => a.path.endsWith("/messages"))?.query.get("maxResults")).toBe(
      String(FALLBACK_RECENT),
    );
    // And the next push reads from the profile's history id.
    google.history.set("4830000", { ids: [], historyId: "4830001" });
    google.asked.length = 0;
    expect((await post(push(4830001, "13467252813395003"))).status).toBe(202);
    await waitFor("the fourth notification", () => settled(4));
    expect(google.asked.filter((a) => a.path.endsWith("/history")).map((a) => a.query.get("startHistoryId"))).toEqual([
      "4830000",
    ]);
  });

  test("the push token is in no stored column and no log line", async () => {
    const db = openSpool(join(home, "spool.db"));
    try {
      expect(findText(db, PUSH_TOKEN)).toBeNull();
      expect(findText(db, "kit-test-refresh")).toBeNull();
      // The quarantined capture kept its path, not its token.
      const q = db.db
        .query(
          "SELECT b.last_error, e.url FROM events e JOIN batches b ON b.id = e.batch_id WHERE " +
            "b.destination = 'quarantine'",
        )
        .all() as { last_error: string; url: string }[];
      expect(q).toEqual([{ last_error: "bad_payload", url: "/hooks/gmail" }]);
    } finally {
      db.close();
    }
    expect(d.stderr()).toContain("baseline recorded");
    expect(d.stderr()).not.toContain(PUSH_TOKEN);
    expect(d.stderr()).not.toContain("kit-test-refresh");
    expect(d.stderr()).not.toContain("kit-test-access-token");
    expect(receiver.unverified).toEqual([]);
  });
});

describe("a deployment's hooks module, loaded by the real runtime", () => {
  const google = new StubGoogle();
  const hooksFile = join(tempDir("hookspool-gmail-hooks-"), "hooks.ts");
  writeFileSync(
    hooksFile,
    `// Mail from the list is for the agent; nothing else, whatever the rule packs would say.
export async function classify(message, owner, ctx) {
  if (!message.from.includes("@list.example")) return null;
  return { output: "agent-mail", rule: "newsletter", values: { owner, list: message.subject.split(" ` +
      `").pop(), clock: typeof ctx.now() } };
}
`,
    { mode: 0o644 },
  );
  const d = new Deployment(google, { hooks: hooksFile });
  beforeAll(() => d.start());
  afterAll(() => d.stop());

  test("its classify decides each new message in place of the rule packs", async () => {
    google.historyId = "500";
    expect((await d.post(push(500, "23467252813390001"))).status).toBe(202);
    await waitFor("the baseline", () => d.settled(1));
    google.messages.set("m-meet", {
      id: "m-meet",
      from: "Alex Doe <alex@partner.example>",
      subject: "Can we meet next week?",
    });
    google.messages.set("m-news", { id: "m-news", from: "News <news@list.example>", subject: "Your weekly digest" });
    google.history.set("500", { ids: ["m-meet", "m-news"], historyId: "510" });
    expect((await d.post(push(510, "23467252813390002"))).status).toBe(202);
    await waitFor("the hook's item", () => d.settled(2) && d.items().length >= 1);
    expect(d.items().map((i) => [i.route, i.id, i.rule, i.values])).toEqual([
      ["gmail-agent-mail", "m-news", "newsletter", { owner: OWNER, list: "digest", clock: "number" }],
    ]);
  });
});

// ---------------------------------------------------------------------------------------------
// The rule pack

describe("the appointments rule pack", () => {
  const text = bobbin.files().get("rule-packs/appointments.toml") ?? "";
  const pack = parseRulePack("appointments", text).pack as RulePack;

  test("parses with no problem, and is the text the processor imports", () => {
    expect(parseRulePack("appointments", text).problems).toEqual([]);
    expect(SHIPPED_PACKS.appointments).toBe(text);
    expect(needsSnippet([pack])).toBe(false);
  });

  test("recognises scheduling requests and appointment confirmations by their subjects", () => {
    const cases: [string, string | null, Record<string, string>][] = [
      ["Can we meet next week?", "scheduling", {}],
      ["Re: could we talk on Friday", "scheduling", {}],
      ["Your availability for a 30-minute call", "scheduling", {}],
      ["Let's schedule a call about the renovation", "scheduling", {}],
      ["Appointment confirmed: Tue 14 May 2026 at 10:30", "agent-mail", { date: "14 May 2026", time: "10:30" }],
      ["Your dental appointment on 3rd June is booked for 9am", "agent-mail", { date: "3rd June", time: "9am" }],
      ["Reminder: appointment with Dr. Lee, 2026-06-03 09:15", "agent-mail", { date: "2026-06-03", time: "09:15" }],
      ["Appointment confirmation - please schedule a call if you need to change it", "agent-mail", {}],
      ["Your weekly digest", null, {}],
      ["Product availability update", null, {}],
      ["Meeting notes from Tuesday", null, {}],
    ];
    for (const [subject, output, values] of cases) {
      const hit = classify({ from: "Someone <someone@mail.example>", subject }, [pack]);
      expect([subject, hit?.output ?? null, hit?.values ?? {}]).toEqual([subject, output, values]);
    }
  });
});

// ---------------------------------------------------------------------------------------------
// The source's decoding

describe("a Pub/Sub push as a notification", () => {
  test("message.data decodes to {emailAddress, historyId}; messageId and publishTime come along", () => {
    expect(
      decodePush({
        message: {
          data: b64({ emailAddress: "Owner@Example.com", historyId: 9876543210 }),
          messageId: "1",
          publishTime: "t",
        },
      }),
    ).toEqual({ emailAddress: "Owner@Example.com", historyId: "9876543210", messageId: "1", publishTime: "t" });
    // base64url without padding, a string history id, the snake_case fields only.
    const url = Buffer.from(JSON.stringify({ emailAddress: OWNER, historyId: "77" })).toString("base64url");
    expect(decodePush({ message: { data: url, message_id: "2", publish_time: "u" } })).toEqual({
      emailAddress: OWNER,
      historyId: "77",
      messageId: "2",
      publishTime: "u",
    });
    expect(decodePush({ message: { data: b64({ emailAddress: OWNER }) } })).toEqual({
      emailAddress: OWNER,
      historyId: null,
      messageId: null,
      publishTime: null,
    });
  });

  test("anything else is bad_payload", () => {
    const bad: unknown[] = [
      {},
      { message: "x" },
      { message: {} },
      { message: { data: "not base64!" } },
      { message: { data: Buffer.from("not json").toString("base64") } },
      { message: { data: b64(["a"]) } },
      { message: { data: b64({ historyId: 1 }) } },
      { message: { data: b64({ emailAddress: "no address", historyId: 1 }) } },
    ];
    for (const body of bad) {
      let caught: unknown;
      try {
        decodePush(body);
      } catch (e) {
        caught = e;
      }
      expect([JSON.stringify(body), caught instanceof BadPayload ? caught.fault : caught]).toEqual([
        JSON.stringify(body),
        "bad_payload",
      ]);
    }
  });
});

// ---------------------------------------------------------------------------------------------
// The processor's own decisions, with a context made here

/** A context whose OAuth client answers from `route`, with state in memory. */
function fakeContext(
  settings: Partial<GmailSettings>,
  route: (method: string, url: URL, body: string) => unknown,
  hooks: Record<string, unknown> | null = null,
) {
  const state = new Map<string, unknown>();
  const lines: string[] = [];
  const answer = (status: number, v: unknown): HttpAnswer => ({
    status,
    headers: { "content-type": "application/json" },
    text: JSON.stringify(v),
  });
  const api: OAuthClient = {
    accessToken: async () => "kit-test-access-token",
    async request(method, url, opts) {
      const v = route(method, new URL(url), typeof opts?.body === "string" ? opts.body : "");
      return v === 404 ? answer(404, { error: { code: 404 } }) : answer(200, v);
    },
    async getJson() {
      throw new Error("not used");
    },
  };
  const ctx = {
    settings: {
      owner: OWNER,
      api_base_url: "http://127.0.0.1:9",
      calendar_id: "primary",
      hooks: "",
      rule_packs: ["appointments"],
      ...settings,
    } as GmailSettings,
    secret: async () => "",
    http: {} as Context["http"],
    oauth: () => api,
    loadState: <T>(name: string, fallback: T): T => (state.has(name) ? (state.get(name) as T) : fallback),
    saveState: (name: string, value: unknown) => void state.set(name, JSON.parse(JSON.stringify(value))),
    hooks,
    log: (l: string) => void lines.push(l),
    now: () => NOW,
    failPermanent(reason: string): never {
      throw new Permanent(reason);
    },
    pace: () => ({ wait: async () => {} }),
  } satisfies Context<GmailSettings>;
  return { ctx, state, lines };
}

const batchFor = (key: string): Batch => ({ id: 1, deliveryId: "d", source: "gmail", key, events: [{}], doc: {} });

/** A mailbox with one stored history id and three new messages. */
function mailbox(subjects: Record<string, { subject: string; labelIds?: string[] }>) {
  return (method: string, url: URL, body: string): unknown => {
    const p = url.pathname;
    if (p.endsWith("/history"))
      return {
        history: [{ id: "2", messagesAdded: Object.keys(subjects).map((id) => ({ message: { id } })) }],
        historyId: "20",
      };
    if (method === "POST" && p.endsWith("/freeBusy") && body.includes("primary"))
      return { calendars: { primary: { busy: [] } } };
    const id = p.split("/").pop() ?? "";
    const m = subjects[id];
    if (!m) return 404;
    return {
      id,
      threadId: id,
      labelIds: m.labelIds ?? ["INBOX"],
      payload: {
        headers: [
          { name: "From", value: "A <a@mail.example>" },
          { name: "Subject", value: m.subject },
        ],
      },
    };
  };
}

describe("the processor", () => {
  test("a hooks module's classify decides in place of the rule packs", async () => {
    const asked: string[] = [];
    const hooks = {
      classify(m: { subject: string }, owner: string) {
        asked.push(`${owner}: ${m.subject}`);
        if (m.subject.includes("coffee")) return { output: "scheduling", values: { with: "Sam", n: 2 } };
        if (m.subject.includes("school")) return { output: "school-note", rule: "school", values: { note: "trip" } };
        return null;
      },
    };
    const { ctx, state } = fakeContext(
      {},
      mailbox({
        a: { subject: "coffee on Thursday?" },
        b: { subject: "Can we meet next week?" },
        c: { subject: "school trip form" },
      }),
      hooks,
    );
    state.set("mailboxes", { [OWNER]: { historyId: "10", seen: [] } });
    const items = (await processor.process(batchFor(OWNER), ctx)) as Item[];
    // "Can we meet" would be scheduling by the rules: the hooks said no.
    expect(items.map((i) => [i.event_type, i.id, i.rule, i.values])).toEqual([
      ["scheduling", "a", "hooks", { with: "Sam", n: "2" }],
      ["agent-mail", "c", "school", { note: "trip" }],
    ]);
    expect(asked).toEqual([
      `${OWNER}: coffee on Thursday?`,
      `${OWNER}: Can we meet next week?`,
      `${OWNER}: school trip form`,
    ]);
    expect(state.get("mailboxes")).toEqual({ [OWNER]: { historyId: "20", seen: ["a", "b", "c"] } });
  });

  test("a hooks answer that is neither null nor { output, values } ends the batch", async () => {
    const { ctx, state } = fakeContext({}, mailbox({ a: { subject: "x" } }), { classify: () => "scheduling" });
    state.set("mailboxes", { [OWNER]: { historyId: "10", seen: [] } });
    await expect(processor.process(batchFor(OWNER), ctx)).rejects.toThrow(/neither null nor/);
    expect(hookVerdict({ output: "" })).toBeTypeOf("string");
    expect(hookVerdict(undefined)).toBeNull();
  });

  test(
    "drafts, spam, trash and the owner's own sent mail are skipped; a message seen before is not " + "read again",
    async () => {
      const subjects = {
        d: { subject: "Can we meet? (draft)", labelIds: ["DRAFT"] },
        s: { subject: "Can we meet? spam", labelIds: ["SPAM", "UNREAD"] },
        o: { subject: "Can we meet?", labelIds: ["SENT"] },
        self: { subject: "Can we meet? (to myself)", labelIds: ["SENT", "INBOX"] },
        old: { subject: "Can we meet? (seen)" },
      };
      const { ctx, state } = fakeContext({}, mailbox(subjects));
      state.set("mailboxes", { [OWNER]: { historyId: "10", seen: ["old"] } });
      const items = (await processor.process(batchFor(OWNER), ctx)) as Item[];
      expect(items.map((i) => i.id)).toEqual(["self"]);
      expect(isIncoming(["INBOX", "SENT"])).toBe(true);
      expect(isIncoming(["TRASH", "INBOX"])).toBe(false);
    },
  );

  test("a batch for another mailbox is skipped without a call", async () => {
    const { ctx, lines } = fakeContext({}, () => {
      throw new Error("no call expected");
    });
    expect(await processor.process(batchFor("someone@example.org"), ctx)).toEqual([]);
    expect(lines.join("\n")).toContain("another mailbox");
  });

  test(
    "settings: api_base_url is https or loopback http; a pack the bobbin does not ship, or a bad " +
      "owner, ends the batch",
    async () => {
      for (const ok of [
        "",
        "https://gmail-proxy.example.com/gmail/v1/",
        "http://127.0.0.1:8080",
        "http://localhost:9/x",
      ])
        expect(baseOf(ok)).not.toBeNull();
      for (const bad of [
        "http://gmail.example.com",
        "http://10.0.0.5",
        "ftp://127.0.0.1/",
        "gmail.googleapis.com",
        "https://u:p@gmail.example.com",
        "https://gmail.example.com/?q=1",
      ])
        expect(baseOf(bad)).toBeNull();
      expect(baseOf("https://gmail-proxy.example.com/gmail/v1/")).toBe("https://gmail-proxy.example.com/gmail/v1");
      const never = () => {
        throw new Error("no call expected");
      };
      await expect(
        processor.process(batchFor(OWNER), fakeContext({ api_base_url: "http://gmail.example.com" }, never).ctx),
      ).rejects.toThrow(/api_base_url must be https/);
      await expect(
        processor.process(batchFor(OWNER), fakeContext({ rule_packs: ["appointments", "invoices"] }, never).ctx),
      ).rejects.toThrow(/does not ship/);
      await expect(
        processor.process(batchFor(OWNER), fakeContext({ owner: "not an address" }, never).ctx),
      ).rejects.toThrow(/owner/);
      expect(packsOf([])).toEqual([]);
      expect(typeof packsOf(["appointments"])).toBe("object");
    },
  );
});
