// postmark.messages: Postmark's inbound and outbound webhooks, which are not signed: the only
// credential is basic auth (Authorization: Basic <base64 of user:password>), one batch per
// MessageID, deduplicated on the body's SHA-256.
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { createHash } from "node:crypto";
import { capturesOf } from "../../src/bobbin/captures.ts";
import type { TestIntake } from "../helpers/intake.ts";
import {
  bobbinTest,
  builtin,
  capturedRequest,
  eventByPayload,
  eventsByPayload,
  kitIntake,
  kitOf,
} from "./catalogue.ts";

// Real hookspool processes on a shared 2-core machine: seconds, not the 5 s default.
setDefaultTimeout(30_000);

const bobbin = builtin("postmark.messages");
const kit = kitOf(bobbin);
const SECRET = kit.secrets.secret;
const sha256 = (s: string) => createHash("sha256").update(s).digest("hex");
const basic = (pair: string) => `Basic ${Buffer.from(pair).toString("base64")}`;

bobbinTest(
  "postmark.messages",
  "an inbound email and a Delivery event are queued under their MessageID and delivered, other credentials are 401",
  {
    answers: {
      "captures/accepted.http": 202,
      "captures/delivery.http": 202,
      "captures/rejected.http": { status: 401, body: "" },
    },
  },
);

test("the kit's secret is the base64 of the user:password pair Postmark puts after Basic", () => {
  expect(Buffer.from(SECRET, "base64").toString()).toBe("hookspool:kit-test-postmark-aEjA");
  const accepted = capturesOf(bobbin.files()).find((c) => c.file === "captures/accepted.http");
  expect(accepted?.request.headers.find(([k]) => k.toLowerCase() === "authorization")?.[1]).toBe(
    basic("hookspool:kit-test-postmark-aEjA"),
  );
});

describe("against an intake", () => {
  let t: TestIntake;
  beforeAll(async () => {
    t = await kitIntake("postmark.messages", {
      config: `# Broadcast-stream events go elsewhere, by the stream attribute.
[[routes]]
name = "postmark-broadcast"
source = "postmark"
match = { stream = "broadcast" }
destination = "lists"

[destinations.lists]
type = "http"
url = "http://127.0.0.1:9/lists"
allow_insecure = true
unsigned = true
`,
    });
  });
  afterAll(() => t.stop());

  const stored = (body: string) =>
    eventByPayload<{ key: string; event_type: string; dedup_id: string; headers: string }>(
      t,
      "b.key, e.event_type, e.dedup_id, e.headers",
      body,
    );
  const post = async (body: string, authorization?: string) => {
    const res = await t.post("/hooks/postmark", body, {
      "Content-Type": "application/json",
      ...(authorization ? { Authorization: authorization } : {}),
    });
    return [res.status, await res.text()];
  };
  const AUTH = `Basic ${SECRET}`;

  test(
    "the inbound capture: event type Inbound, key its MessageID, dedup id the body's SHA-256, no " +
      "Authorization kept",
    async () => {
      const { body } = capturedRequest(bobbin);
      expect(await post(body, AUTH)).toEqual([202, '{"status":"queued"}']);
      const row = stored(body);
      expect({ key: row?.key, event_type: row?.event_type, dedup_id: row?.dedup_id }).toEqual({
        key: "5d2e8c41-0b7a-4f3e-9c1d-00000000b042",
        event_type: "Inbound",
        dedup_id: sha256(body),
      });
      expect((row?.headers ?? "").toLowerCase()).not.toContain("authorization");
      expect(row?.headers ?? "").not.toContain(SECRET);
      // Postmark's retry of the same inbound email posts the same JSON: a duplicate.
      expect(await post(body, AUTH)).toEqual([200, '{"status":"duplicate"}']);
    },
  );

  test(
    "the events of one sent email share its MessageID's batch; each event's own time keeps its " + "dedup id apart",
    async () => {
      const id = "9b7a3e10-5c4d-4e2f-8a61-00000000d043";
      const events = [
        {
          RecordType: "Delivery",
          ServerID: 23,
          MessageStream: "outbound",
          MessageID: id,
          Recipient: "customer@example.com",
          Tag: "shipping",
          DeliveredAt: "2026-11-12T14:29:41.1520000Z",
          Details: "smtp;250 2.0.0 OK",
          Metadata: {},
        },
        {
          RecordType: "Open",
          FirstOpen: true,
          ServerID: 23,
          MessageStream: "outbound",
          MessageID: id,
          Recipient: "customer@example.com",
          Tag: "shipping",
          ReceivedAt: "2026-11-12T14:35:02.1000000Z",
          Platform: "WebMail",
          ReadSeconds: 4,
          Metadata: {},
        },
        {
          RecordType: "Open",
          FirstOpen: false,
          ServerID: 23,
          MessageStream: "outbound",
          MessageID: id,
          Recipient: "customer@example.com",
          Tag: "shipping",
          ReceivedAt: "2026-11-12T16:02:48.9000000Z",
          Platform: "WebMail",
          ReadSeconds: 9,
          Metadata: {},
        },
        {
          RecordType: "Click",
          ClickLocation: "HTML",
          ServerID: 23,
          MessageStream: "outbound",
          MessageID: id,
          Recipient: "customer@example.com",
          Tag: "shipping",
          OriginalLink: "https://shop.example.com/track/1042",
          ReceivedAt: "2026-11-12T16:03:10.4000000Z",
          Platform: "WebMail",
          Metadata: {},
        },
      ].map((e) => JSON.stringify(e));
      for (const body of events) expect(await post(body, AUTH)).toEqual([202, '{"status":"queued"}']);
      const rows = events.map(stored);
      expect(rows.map((r) => [r?.key, r?.event_type])).toEqual([
        [id, "Delivery"],
        [id, "Open"],
        [id, "Open"],
        [id, "Click"],
      ]);
      // Two opens of the same email are two events, not a duplicate.
      expect(new Set(rows.map((r) => r?.dedup_id)).size).toBe(4);
    },
  );

  test(
    "an event without a MessageID is keyed by its Recipient; MessageStream is the stream attribute " +
      "a route can match",
    async () => {
      const body = JSON.stringify({
        RecordType: "SubscriptionChange",
        ServerID: 23,
        MessageStream: "broadcast",
        MessageID: null,
        Recipient: "reader@example.com",
        ChangedAt: "2026-11-12T14:40:00.0000000Z",
        Origin: "Customer",
        SuppressSending: true,
        SuppressionReason: "ManualSuppression",
        Tag: null,
        Metadata: {},
      });
      expect(await post(body, AUTH)).toEqual([202, '{"status":"queued"}']);
      expect(stored(body)?.key).toBe("reader@example.com");
      expect(stored(body)?.event_type).toBe("SubscriptionChange");
      const destination = (b: string) =>
        eventsByPayload<{ destination: string }>(t, "b.destination", b)[0]?.destination;
      const outbound = JSON.stringify({
        RecordType: "Delivery",
        ServerID: 23,
        MessageStream: "outbound",
        MessageID: "9b7a3e10-5c4d-4e2f-8a61-00000000d045",
        Recipient: "customer@example.com",
        DeliveredAt: "2026-11-12T14:40:01.0000000Z",
        Details: "smtp;250 2.0.0 OK",
        Metadata: {},
      });
      expect(await post(outbound, AUTH)).toEqual([202, '{"status":"queued"}']);
      expect([destination(body), destination(outbound)]).toEqual(["lists", "kit"]);
    },
  );

  test(
    "refused with 401, an empty body, nothing stored: no credentials, another password, Bearer, " +
      "the pair not encoded",
    async () => {
      const body = JSON.stringify({
        RecordType: "Bounce",
        ID: 42,
        Type: "HardBounce",
        TypeCode: 1,
        MessageStream: "outbound",
        MessageID: "9b7a3e10-5c4d-4e2f-8a61-00000000d044",
        Email: "gone@example.com",
        BouncedAt: "2026-11-12T14:41:00.0000000Z",
      });
      const events = t.count("events");
      for (const [name, auth] of [
        ["no Authorization", undefined],
        ["another password", basic("hookspool:not-the-kit-password")],
        ["another user", basic("postmark:kit-test-postmark-aEjA")],
        ["Bearer with the secret", `Bearer ${SECRET}`],
        ["the pair, not base64", "Basic hookspool:kit-test-postmark-aEjA"],
        ["lower-case basic", `basic ${SECRET}`],
      ] as const) {
        expect([name, ...(await post(body, auth))]).toEqual([name, 401, ""]);
      }
      expect(t.count("events")).toBe(events);
      // No timestamp: the same request is accepted whenever it comes (README.md says why that matters).
      t.clock.set(t.clock.now() + 30 * 86_400);
      expect(await post(body, AUTH)).toEqual([202, '{"status":"queued"}']);
    },
  );
});
