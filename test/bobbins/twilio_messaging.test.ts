// twilio.messaging: Twilio Messaging webhooks (X-Twilio-Signature, base64 HMAC-SHA1 under the Auth
// Token of the public URL with its query, then each form parameter's name and value, sorted),
// through a real `hookspool run`, and against an intake as a deployment runs it (only public_url
// set) for what is Twilio's own: the empty TwiML answer, the form body queued as an object, the
// sender as the key, the status as the event type, I-Twilio-Idempotency-Token as the dedup id (so
// a message's successive status callbacks are not duplicates), and Twilio's documented example.
//
// The catalogue's runner finds a capture's event by its payload, which a form body does not keep
// (the payload is the form as a JSON object), so this file makes the same proof itself on the
// shared run: every capture sent over loopback, each queued one delivered.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHmac } from "node:crypto";
import { type Capture, capturesOf } from "../../src/bobbin/captures.ts";
import type { TestIntake } from "../helpers/intake.ts";
import { waitFor } from "../helpers/proc.ts";
import {
  builtin,
  type CaptureResult,
  expectAnswers,
  expectAsCaptured,
  kitIntake,
  kitOf,
  sharedRun,
} from "./catalogue.ts";

const bobbin = builtin("twilio.messaging");
const kit = kitOf(bobbin);
const TOKEN = kit.secrets.secret;
const PUBLIC_URL = String(kit.instance.settings.public_url);
const captures = capturesOf(bobbin.files());
const captured = (file: string): Capture => {
  const c = captures.find((x) => x.file === file);
  if (!c) throw new Error(`no ${file}`);
  return c;
};
const headersOf = (c: Capture) =>
  Object.fromEntries(c.request.headers.filter(([k]) => !["host", "content-length"].includes(k.toLowerCase())));
const fieldsOf = (c: Capture) => Object.fromEntries(new URLSearchParams(new TextDecoder().decode(c.request.body)));
/** What Twilio signs: the URL as called, then each parameter's name and value, sorted by name. */
const signature = (token: string, url: string, body: string) =>
  createHmac("sha1", token)
    .update(
      url +
        [...new URLSearchParams(body)]
          .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
          .map(([k, v]) => k + v)
          .join(""),
    )
    .digest("base64");

test("every capture gets what it says; each queued one is delivered under its sender and status", async () => {
  // The kit's instance, and one per capture's own `# settings:`.
  const run = await sharedRun(bobbin);
  const results = await run.results(bobbin);
  expectAsCaptured(results);
  expectAnswers(results, {
    "captures/accepted.http": 200,
    "captures/rejected.http": { status: 401, body: "" },
    "captures/status-callback.http": 200,
    "captures/twiml.http": 200,
    "captures/whatsapp.http": 200,
  });
  const typeOf = (r: CaptureResult) => r.headers?.["content-type"] ?? null;
  // The instance as a deployment runs it answers with empty TwiML, which Twilio reads.
  const twiml = results.find((r) => r.capture.file === "captures/twiml.http");
  expect([twiml && typeOf(twiml), twiml?.body]).toEqual(["text/xml", "<Response/>"]);
  // Every verified message is queued, each answered with the TwiML (the word in its header).
  const queued = results.filter((r) => r.word === "queued");
  expect(queued.map((r) => [typeOf(r), r.body])).toEqual(queued.map(() => ["text/xml", "<Response/>"]));
  // A form body's event keeps the request's bytes as its raw body.
  const row = (r: CaptureResult) =>
    run
      .events(bobbin)
      .find(
        (e) =>
          e.source === r.instance && e.raw !== null && Buffer.from(e.raw).equals(Buffer.from(r.capture.request.body)),
      );
  await waitFor(`${queued.length} batches delivered`, () => queued.every((r) => row(r)?.state === "delivered"));
  for (const r of queued) {
    const got = row(r);
    expect({ file: r.capture.file, key: got?.key, type: got?.event_type }).toEqual({
      file: r.capture.file,
      key: r.capture.expect.key ?? fieldsOf(r.capture).From,
      type: r.capture.expect.eventType ?? "received",
    });
    expect(JSON.parse(got?.payload ?? "null")).toEqual(fieldsOf(r.capture));
  }
  const got = await run.deliveries<{ key: string; events: Record<string, string>[] }>(bobbin);
  const delivered = got.accepted.flatMap((d) => d.doc.events.map((e) => e.MessageSid));
  expect(delivered.sort()).toEqual(queued.map((r) => fieldsOf(r.capture).MessageSid).sort());
  expect(got.unverified).toEqual([]);
  expect(await run.stderr()).not.toContain(TOKEN);
});

test("public_url is a setting each instance must give; the TwiML ack is the default", () => {
  expect(bobbin.manifest.settings.public_url).toMatchObject({ type: "string", required: true });
  expect(bobbin.manifest.settings.ack).toMatchObject({ type: "string", default: "<Response/>" });
  expect(bobbin.manifest.settings.ack_type).toMatchObject({ type: "string", default: "text/xml" });
});

describe("against an intake, as a deployment runs it", () => {
  let t: TestIntake;
  beforeAll(async () => {
    t = await kitIntake("twilio.messaging", {
      config:
        `[bobbins.reply]
bobbin = "twilio.messaging"
secrets.secret = { file = "{{secret:twilio-secret}}" }
settings = { public_url = "https://hooks.example.com/reply", ack = "<Response><Message>Thanks, a ` +
        `person will answer soon.</Message></Response>" }
outputs = { "*" = "kit" }

# Twilio's documented example: token 12345, https://mycompany.com/myapp.php?foo=1&bar=2.
[bobbins.doc]
bobbin = "twilio.messaging"
secrets.secret = { file = "{{secret:doc}}" }
settings = { public_url = "https://mycompany.com/myapp.php" }
outputs = { "*" = "kit" }
`,
      secrets: { doc: "12345" },
    });
  });
  afterAll(() => t.stop());

  const post = (path: string, body: string, headers: Record<string, string>) =>
    t.post(path, body, { "Content-Type": "application/x-www-form-urlencoded", ...headers });
  const answer = async (r: Response) => [r.status, r.headers.get("content-type"), await r.text()];
  const rows = (source: string) =>
    t.db.db
      .query(
        "SELECT b.key, e.event_type, e.dedup_id, e.payload FROM events e JOIN batches b ON b.id = " +
          "e.batch_id WHERE e.source = ? ORDER BY e.id",
      )
      .all(source) as { key: string; event_type: string; dedup_id: string | null; payload: string }[];

  test(
    "an incoming SMS is answered with empty TwiML and stored as its fields under the sender; " +
      "Twilio's retry is a duplicate",
    async () => {
      const c = captured("captures/accepted.http");
      expect(await answer(await post("/hooks/twilio", new TextDecoder().decode(c.request.body), headersOf(c)))).toEqual(
        [200, "text/xml", "<Response/>"],
      );
      const [row] = rows("twilio");
      expect({ key: row?.key, type: row?.event_type, dedup: row?.dedup_id }).toEqual({
        key: "+14155550123",
        type: "received",
        dedup: headersOf(c)["I-Twilio-Idempotency-Token"],
      });
      expect(JSON.parse(row?.payload ?? "null")).toMatchObject({
        From: "+14155550123",
        To: "+14155550100",
        Body: "Hi, is my order 1042 shipped yet?",
        SmsStatus: "received",
        NumMedia: "0",
      });
      // Twilio's retry inside the request repeats the token: answered the same, stored once.
      expect(await answer(await post("/hooks/twilio", new TextDecoder().decode(c.request.body), headersOf(c)))).toEqual(
        [200, "text/xml", "<Response/>"],
      );
      expect(rows("twilio")).toHaveLength(1);
    },
  );

  test(
    "a message's successive status callbacks share its MessageSid and are each queued, typed by " + "MessageStatus",
    async () => {
      const callback = (status: string) =>
        new URLSearchParams({
          SmsSid: "SM0000000000000000000000000e0a0009",
          SmsStatus: status,
          MessageStatus: status,
          To: "+14155550123",
          MessageSid: "SM0000000000000000000000000e0a0009",
          AccountSid: "AC0000000000000000000000000000e0a1",
          From: "+14155550100",
          ApiVersion: "2010-04-01",
        }).toString();
      const before = rows("twilio").length;
      for (const [status, token] of [
        ["sent", "0c1d2e3f-4a5b-4c6d-8e7f-9a0b1c2d3e01"],
        ["delivered", "0c1d2e3f-4a5b-4c6d-8e7f-9a0b1c2d3e02"],
      ]) {
        const body = callback(status);
        const url = `${PUBLIC_URL}?kind=status`;
        const res = await post("/hooks/twilio?kind=status", body, {
          "X-Twilio-Signature": signature(TOKEN, url, body),
          "I-Twilio-Idempotency-Token": token,
        });
        expect(res.status).toBe(200);
      }
      expect(
        rows("twilio")
          .slice(before)
          .map((r) => [r.key, r.event_type]),
      ).toEqual([
        ["+14155550100", "sent"],
        ["+14155550100", "delivered"],
      ]);
    },
  );

  test("the signature covers the query string, the public URL, every parameter and the token", async () => {
    const c = captured("captures/status-callback.http");
    const body = new TextDecoder().decode(c.request.body);
    const headers = headersOf(c);
    // As captured: signed for public_url + ?kind=status.
    expect(
      (
        await post("/hooks/twilio?kind=status", body, {
          ...headers,
          "I-Twilio-Idempotency-Token": "1a1a1a1a-0000-4000-8000-000000000001",
        })
      ).status,
    ).toBe(200);
    for (const [path, b, sig] of [
      ["/hooks/twilio", body, headers["X-Twilio-Signature"]],
      ["/hooks/twilio?kind=other", body, headers["X-Twilio-Signature"]],
      [
        "/hooks/twilio?kind=status",
        body.replace("MessageStatus=delivered", "MessageStatus=failed"),
        headers["X-Twilio-Signature"],
      ],
      ["/hooks/twilio?kind=status", body, signature(TOKEN, "https://hooks.example.com/other?kind=status", body)],
      [
        "/hooks/twilio?kind=status",
        body,
        signature("kit-test-other-auth-token-twilio", `${PUBLIC_URL}?kind=status`, body),
      ],
    ] as const) {
      expect([path, b === body, await answer(await post(path, b, { ...headers, "X-Twilio-Signature": sig }))]).toEqual([
        path,
        b === body,
        [401, null, ""],
      ]);
    }
  });

  test("an ack with TwiML in it is the answer: Twilio sends that reply", async () => {
    const body = new URLSearchParams({
      MessageSid: "SM0000000000000000000000000e0a0010",
      SmsStatus: "received",
      From: "+14155550123",
      To: "+14155550100",
      Body: "Hello",
    }).toString();
    const res = await post("/hooks/reply", body, {
      "X-Twilio-Signature": signature(TOKEN, "https://hooks.example.com/reply", body),
      "I-Twilio-Idempotency-Token": "2b2b2b2b-0000-4000-8000-000000000002",
    });
    expect(await answer(res)).toEqual([
      200,
      "text/xml",
      "<Response><Message>Thanks, a person will answer soon.</Message></Response>",
    ]);
  });

  test("Twilio's documented example verifies, its query string taken as received", async () => {
    const body = "To=%2B18005551212&From=%2B12349013030&Digits=1234&Caller=%2B12349013030&CallSid=CA1234567890ABCDE";
    const headers = { "X-Twilio-Signature": "0/KCTR6DLpKmkAf8muzZqo1nDgQ=" };
    expect(await answer(await post("/hooks/doc?foo=1&bar=2", body, headers))).toEqual([200, "text/xml", "<Response/>"]);
    expect(rows("doc").map((r) => [r.key, r.event_type, r.dedup_id])).toEqual([["+12349013030", "received", null]]);
    expect((await post("/hooks/doc?bar=2&foo=1", body, headers)).status).toBe(401);
  });
});
