// sendgrid.events: SendGrid's Signed Event Webhook (X-Twilio-Email-Event-Webhook-Signature, base64
// DER ECDSA P-256 / SHA-256 of the timestamp header's value and the body, under the public key as
// the secret), through a real `hookspool run`, and against an intake for what is SendGrid's own:
// each element of the posted array its own event (key sg_message_id, type `event`, dedup
// sg_event_id), a resent batch deduplicated per element, one unkeyed element quarantining the
// post, and the SDK's own multi-event vector with its CRLF framing.
//
// The catalogue's runner finds a capture's event by its payload, which a split request does not
// keep whole (each event's payload is its element), so this file makes the same proof itself on
// the shared run: every capture sent over loopback, each queued element delivered.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { generateKeyPairSync, type KeyObject, sign } from "node:crypto";
import { type Capture, capturesOf } from "../../src/bobbin/captures.ts";
import type { TestIntake } from "../helpers/intake.ts";
import { waitFor } from "../helpers/proc.ts";
import { builtin, expectAnswers, expectAsCaptured, kitIntake, kitOf, sharedRun } from "./catalogue.ts";

const bobbin = builtin("sendgrid.events");
const kit = kitOf(bobbin);
const NOW = kit.now ?? 0;
const SIG = "X-Twilio-Email-Event-Webhook-Signature";
const TS = "X-Twilio-Email-Event-Webhook-Timestamp";
const captures = capturesOf(bobbin.files());
const captured = (file: string): Capture => {
  const c = captures.find((x) => x.file === file);
  if (!c) throw new Error(`no ${file}`);
  return c;
};
const textOf = (c: Capture) => new TextDecoder().decode(c.request.body);
const headersOf = (c: Capture) =>
  Object.fromEntries(c.request.headers.filter(([k]) => !["host", "content-length"].includes(k.toLowerCase())));
type Element = { sg_event_id: string; sg_message_id?: string; event: string };
const elementsOf = (c: Capture) => JSON.parse(textOf(c)) as Element[];

test(
  "every capture gets what it says; each element of a queued post is its own event, delivered " + "under its message",
  async () => {
    const run = await sharedRun(bobbin);
    const results = await run.results(bobbin);
    expectAsCaptured(results);
    expectAnswers(results, {
      "captures/accepted.http": 202,
      "captures/batch.http": 202,
      "captures/rejected.http": 401,
      "captures/unclassifiable.http": 202,
    });
    const queued = results.filter((r) => r.capture.expect.word === "queued").flatMap((r) => elementsOf(r.capture));
    expect(queued.map((e) => e.event)).toEqual(["delivered", "processed", "delivered", "open"]);
    const row = (e: Element) => run.events(bobbin).find((r) => r.dedup_id === e.sg_event_id);
    await waitFor(`${queued.length} events delivered`, () => queued.every((e) => row(e)?.state === "delivered"));
    for (const e of queued)
      expect({ id: e.sg_event_id, key: row(e)?.key, type: row(e)?.event_type }).toEqual({
        id: e.sg_event_id,
        key: e.sg_message_id,
        type: e.event,
      });
    // The unkeyed element's post was quarantined whole: its keyed element is not queued alone.
    const [keyed] = elementsOf(captured("captures/unclassifiable.http"));
    expect(run.events(bobbin).filter((r) => r.dedup_id === keyed.sg_event_id)).toEqual([]);
    const got = await run.deliveries<{ key: string; events: Element[] }>(bobbin);
    const delivered = got.accepted.flatMap((d) => d.doc.events.map((e) => e.sg_event_id));
    expect(delivered.sort()).toEqual(queued.map((e) => e.sg_event_id).sort());
    expect(got.unverified).toEqual([]);
  },
);

describe("against an intake", () => {
  // A key pair of the test's own, for posts the captures do not hold; the kit's private half is gone.
  const own = generateKeyPairSync("ec", { namedCurve: "prime256v1" });
  const ownPublic = own.publicKey.export({ format: "der", type: "spki" }).toString("base64");
  const signed = (body: string, ts: number, key: KeyObject = own.privateKey) => ({
    [SIG]: sign("sha256", Buffer.from(`${ts}${body}`), { key, dsaEncoding: "der" }).toString("base64"),
    [TS]: String(ts),
    "Content-Type": "application/json; charset=utf-8",
  });
  // sendgrid-nodejs packages/eventwebhook/src/eventwebhook.spec.js: the multi-event vector, CRLF after each event.
  const SDK_KEY =
    "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEQ4LIFtWztlsF7skFqOncjD1lun4H5w8XOhyOArHW9RcIx/FfEzx6cikC/yPfU" +
    "vwaX/JScE7Fc9CJD2afQ9Ok3Q==";
  const SDK_SIGNATURE =
    "MEYCIQC/I4o6vCgqRYrTljjoVWB/GRWNtxeePlLMHr3x9ETeRQIhAIpV+03nREPTTHWSW0wIOA0EoMPdcNgXa70yCaqDJlu5";
  const SDK_TS = 1619651159;
  const SDK_EVENTS = [
    {
      email: "invalid@gmail.com",
      event: "processed",
      send_at: 0,
      sg_event_id: "cHJvY2Vzc2VkLTE5OTQyMTEyLXFOd0JMZ1BRUWpXNkRKdktRd1NBYnctMA",
      sg_message_id: "qNwBLgPQQjW6DJvKQwSAbw.filterdrecv-canary-547b64655b-cw6zx-1-6089EA4A-56.0",
      "smtp-id": "<qNwBLgPQQjW6DJvKQwSAbw@ismtpd0178p1mdw1.sendgrid.net>",
      timestamp: 1619651146,
    },
    {
      email: "invalid@gmail.com",
      event: "bounce",
      ip: "167.89.101.76",
      reason:
        "552 5.2.2 The email account that you tried to reach is over quota and inactive. Please " +
        "direct the recipient to https://support.google.com/mail/?p=OverQuotaPerm c17si1130468pgv.34 - " +
        "gsmtp",
      sg_event_id: "Ym91bmNlLTAtMTk5NDIxMTItcU53QkxnUFFRalc2REp2S1F3U0Fidy0w",
      sg_message_id: "qNwBLgPQQjW6DJvKQwSAbw.filterdrecv-canary-547b64655b-cw6zx-1-6089EA4A-56.0",
      "smtp-id": "<qNwBLgPQQjW6DJvKQwSAbw@ismtpd0178p1mdw1.sendgrid.net>",
      status: "5.2.2",
      timestamp: 1619651147,
      tls: 1,
      type: "blocked",
    },
  ];
  const SDK_PAYLOAD = `${JSON.stringify(SDK_EVENTS).split("},{").join("},\r\n{")}\r\n`;

  let t: TestIntake;
  beforeAll(async () => {
    const instance = (name: string) => `[bobbins.${name}]
bobbin = "sendgrid.events"
secrets.secret = { file = "{{secret:${name}}}" }
outputs = { "*" = "kit" }
`;
    t = await kitIntake("sendgrid.events", {
      config: `${instance("own")}\n${instance("sdk")}`,
      secrets: { own: ownPublic, sdk: SDK_KEY },
    });
  });
  afterAll(() => t.stop());

  const rows = (source: string) =>
    t.db.db
      .query(
        "SELECT b.key, e.event_type, e.dedup_id, length(e.raw) AS raw FROM events e JOIN batches b ON " +
          "b.id = e.batch_id WHERE e.source = ? ORDER BY e.id",
      )
      .all(source) as { key: string; event_type: string; dedup_id: string; raw: number | null }[];

  test(
    "the batch capture is three events, each with its message's key, its type and its own id; the " +
      "raw body is kept once",
    async () => {
      const c = captured("captures/batch.http");
      const res = await t.post("/hooks/sendgrid", c.request.body, headersOf(c));
      expect([res.status, await res.text()]).toEqual([202, '{"status":"queued"}']);
      const [processed, delivered, open] = elementsOf(c);
      expect(rows("sendgrid")).toEqual([
        {
          key: processed.sg_message_id ?? "",
          event_type: "processed",
          dedup_id: processed.sg_event_id,
          raw: c.request.body.length,
        },
        { key: delivered.sg_message_id ?? "", event_type: "delivered", dedup_id: delivered.sg_event_id, raw: 0 },
        { key: open.sg_message_id ?? "", event_type: "open", dedup_id: open.sg_event_id, raw: 0 },
      ]);
      // SendGrid's retry of the same post (same signature, within the window) queues nothing again.
      const again = await t.post("/hooks/sendgrid", c.request.body, headersOf(c));
      expect([again.status, await again.text()]).toEqual([200, '{"status":"duplicate"}']);
      expect(rows("sendgrid")).toHaveLength(3);
    },
  );

  test(
    "a resent batch that mixes seen and new events queues only the new ones, each deduplicated on " +
      "its own sg_event_id",
    async () => {
      const ev = (id: string, event: string, message: string) => ({
        email: "customer@example.com",
        event,
        sg_event_id: id,
        sg_message_id: message,
        timestamp: NOW - 10,
      });
      const first = JSON.stringify([
        ev("ZXhhbXBsZS1tMS1wcm9jZXNzZWQ", "processed", "m1.recvd-0"),
        ev("ZXhhbXBsZS1tMS1kZWxpdmVyZWQ", "delivered", "m1.recvd-0"),
      ]);
      expect((await t.post("/hooks/own", first, signed(first, NOW))).status).toBe(202);
      // Signed afresh 40 s later, with one event added: only that one is new.
      t.clock.set(NOW + 40);
      const resent = JSON.stringify([
        ev("ZXhhbXBsZS1tMS1wcm9jZXNzZWQ", "processed", "m1.recvd-0"),
        ev("ZXhhbXBsZS1tMS1kZWxpdmVyZWQ", "delivered", "m1.recvd-0"),
        ev("ZXhhbXBsZS1tMS1vcGVu", "open", "m1.recvd-0"),
      ]);
      const res = await t.post("/hooks/own", resent, signed(resent, NOW + 40));
      expect([res.status, await res.text()]).toEqual([202, '{"status":"queued"}']);
      t.clock.set(NOW);
      expect(rows("own").map((r) => [r.dedup_id, r.event_type])).toEqual([
        ["ZXhhbXBsZS1tMS1wcm9jZXNzZWQ", "processed"],
        ["ZXhhbXBsZS1tMS1kZWxpdmVyZWQ", "delivered"],
        ["ZXhhbXBsZS1tMS1vcGVu", "open"],
      ]);
      // All three are events of one message: one key.
      expect(new Set(rows("own").map((r) => r.key))).toEqual(new Set(["m1.recvd-0"]));
    },
  );

  test("the timestamp is signed and must be within 300 s; another key does not verify", async () => {
    const body = JSON.stringify([
      {
        email: "customer@example.com",
        event: "click",
        url: "https://www.example.com/pricing",
        sg_event_id: "ZXhhbXBsZS1jbGljay0wMDE",
        sg_message_id: "m2.recvd-0",
        timestamp: NOW,
      },
    ]);
    const headers = signed(body, NOW);
    expect((await t.post("/hooks/own", body, { ...headers, [TS]: String(NOW + 1) })).status).toBe(401);
    t.clock.set(NOW + 301);
    expect((await t.post("/hooks/own", body, headers)).status).toBe(401);
    t.clock.set(NOW - 301);
    expect((await t.post("/hooks/own", body, headers)).status).toBe(401);
    t.clock.set(NOW);
    const other = generateKeyPairSync("ec", { namedCurve: "prime256v1" }).privateKey;
    expect((await t.post("/hooks/own", body, signed(body, NOW, other))).status).toBe(401);
    expect((await t.post("/hooks/own", body, headers)).status).toBe(202);
  });

  test("an element without sg_message_id quarantines the whole post: none of its events is queued alone", async () => {
    const c = captured("captures/unclassifiable.http");
    const before = t.count("events", "batch_id IN (SELECT id FROM batches WHERE destination <> 'quarantine')");
    const res = await t.post("/hooks/sendgrid", c.request.body, headersOf(c));
    expect([res.status, await res.text()]).toEqual([202, '{"status":"quarantined"}']);
    expect(t.count("events", "batch_id IN (SELECT id FROM batches WHERE destination <> 'quarantine')")).toBe(before);
    const q = t.db.db
      .query(
        "SELECT b.last_error FROM events e JOIN batches b ON b.id = e.batch_id WHERE b.destination = " +
          "'quarantine' ORDER BY e.id DESC LIMIT 1",
      )
      .get() as { last_error: string } | null;
    expect(q?.last_error).toBe("key_missing");
  });

  test(
    "the SDK's multi-event vector (CRLF after each event) verifies under its key and splits into " + "its two events",
    async () => {
      t.clock.set(SDK_TS);
      const res = await t.post("/hooks/sdk", SDK_PAYLOAD, {
        [SIG]: SDK_SIGNATURE,
        [TS]: String(SDK_TS),
        "Content-Type": "application/json",
      });
      t.clock.set(NOW);
      expect([res.status, await res.text()]).toEqual([202, '{"status":"queued"}']);
      expect(rows("sdk").map(({ key, event_type, dedup_id }) => ({ key, event_type, dedup_id }))).toEqual(
        SDK_EVENTS.map((e) => ({ key: e.sg_message_id, event_type: e.event, dedup_id: e.sg_event_id })),
      );
      // The same bytes without the CRLFs are another body: the signature covers them.
      t.clock.set(SDK_TS);
      const bare = await t.post("/hooks/sdk", JSON.stringify(SDK_EVENTS), {
        [SIG]: SDK_SIGNATURE,
        [TS]: String(SDK_TS),
      });
      t.clock.set(NOW);
      expect(bare.status).toBe(401);
    },
  );
});
