// zendesk.webhooks: Zendesk webhooks (X-Zendesk-Webhook-Signature, the base64 HMAC-SHA256 of the
// ISO 8601 X-Zendesk-Webhook-Signature-Timestamp then the body), through a real `hookspool run`,
// and against an intake for what is Zendesk's own: one batch per subject, a repeat invocation of
// an event a duplicate, and the timestamp held to 300 s.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHmac } from "node:crypto";
import { capturesOf } from "../../src/bobbin/captures.ts";
import type { TestIntake } from "../helpers/intake.ts";
import { bobbinTest, builtin, eventsByPayload, kitIntake, kitOf } from "./catalogue.ts";

const bobbin = builtin("zendesk.webhooks");
const kit = kitOf(bobbin);
const SECRET = kit.secrets.secret;
const accepted = capturesOf(bobbin.files()).find((c) => c.file === "captures/accepted.http");
if (!accepted) throw new Error("no accepted capture");
const BODY = new TextDecoder().decode(accepted.request.body);
const signed = (body: string, ts: string, invocation: string) => ({
  "Content-Type": "application/json",
  "x-zendesk-webhook-invocation-id": invocation,
  "X-Zendesk-Webhook-Signature-Timestamp": ts,
  "X-Zendesk-Webhook-Signature": createHmac("sha256", SECRET)
    .update(ts + body)
    .digest("base64"),
});

bobbinTest("zendesk.webhooks", "a user event is queued and delivered, a bad signature is 401", {
  answers: {
    "captures/accepted.http": 202,
    "captures/rejected.http": { status: 401, body: "" },
  },
});

describe("against an intake", () => {
  let t: TestIntake;
  beforeAll(async () => {
    t = await kitIntake("zendesk.webhooks");
  });
  afterAll(() => t.stop());

  const rows = (body: string) => eventsByPayload<{ key: string; event_type: string }>(t, "b.key, e.event_type", body);

  test("stored under its subject; a second invocation of the same event is a duplicate", async () => {
    const first = await t.post("/hooks/zendesk", BODY, signed(BODY, "2025-01-01T00:00:00Z", "8350205590"));
    expect([first.status, await first.text()]).toEqual([202, '{"status":"queued"}']);
    expect(rows(BODY)).toEqual([{ key: "zen:user:20000042", event_type: "zen:event-type:user.created" }]);
    const again = await t.post("/hooks/zendesk", BODY, signed(BODY, "2025-01-01T00:01:00Z", "8350205591"));
    expect([again.status, await again.text()]).toEqual([200, '{"status":"duplicate"}']);
  });

  test("a trigger's own body with a subject is keyed by it, deduplicated by the invocation", async () => {
    const trigger = JSON.stringify({ subject: "zen:ticket:42", type: "ticket.solved", status: "solved" });
    const r = await t.post("/hooks/zendesk", trigger, signed(trigger, "2025-01-01T00:00:10Z", "8350205600"));
    expect([r.status, await r.text()]).toEqual([202, '{"status":"queued"}']);
    expect(rows(trigger)).toEqual([{ key: "zen:ticket:42", event_type: "ticket.solved" }]);
  });

  test("a timestamp beyond 300 s, or not RFC 3339, is 401", async () => {
    const body = BODY.replace("20000042", "20000044");
    const stale = await t.post("/hooks/zendesk", body, signed(body, "2024-12-31T23:54:59Z", "8350205610"));
    expect([stale.status, await stale.text()]).toEqual([401, ""]);
    const odd = await t.post("/hooks/zendesk", body, signed(body, "Wed, 01 Jan 2025 00:00:00 GMT", "8350205611"));
    expect(odd.status).toBe(401);
  });
});
