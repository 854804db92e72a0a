// segment.webhooks: Segment's Webhooks destinations (X-Signature, the hex HMAC-SHA1 of the body
// under the shared secret), through a real `hookspool run`, and against an intake for what is
// Segment's own: one batch per user (userId, else anonymousId), messageId as the dedup id, the
// call's type as the event type, and a batched request (whose X-Signature covers only its first
// call) refused.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHmac } from "node:crypto";
import type { TestIntake } from "../helpers/intake.ts";
import { bobbinTest, builtin, capturedRequest, eventsByPayload, kitIntake, kitOf } from "./catalogue.ts";

const bobbin = builtin("segment.webhooks");
const kit = kitOf(bobbin);
const SECRET = kit.secrets.secret;
const { body: BODY, headers: HEADERS } = capturedRequest(bobbin);
/** What Segment's destination computes: the hex HMAC-SHA1 of the JSON it sends. */
const sign = (text: string) => createHmac("sha1", SECRET).update(text, "utf8").digest("hex");
const signed = (body: string) => ({ "Content-Type": "application/json", "X-Signature": sign(body) });

bobbinTest("segment.webhooks", "a track call is queued and delivered, a bad signature is 401", {
  answers: {
    "captures/accepted.http": 202,
    "captures/rejected.http": { status: 401, body: "" },
  },
});

describe("against an intake", () => {
  let t: TestIntake;
  beforeAll(async () => {
    t = await kitIntake("segment.webhooks");
  });
  afterAll(() => t.stop());

  const rowOf = (body: string) =>
    eventsByPayload<{ key: string; event_type: string; dedup_id: string }>(t, "b.key, e.event_type, e.dedup_id", body);

  test(
    "the accepted capture is stored under the user, its type and messageId; Segment's retry of it " + "is a duplicate",
    async () => {
      const first = await t.post("/hooks/segment", BODY, HEADERS);
      expect([first.status, await first.text()]).toEqual([202, '{"status":"queued"}']);
      expect(rowOf(BODY)).toEqual([
        {
          key: "user_01JEXAMPLE0042",
          event_type: "track",
          dedup_id: "ajs-next-1764003600123-0e1f2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b",
        },
      ]);
      const again = await t.post("/hooks/segment", BODY, HEADERS);
      expect([again.status, await again.text()]).toEqual([200, '{"status":"duplicate"}']);
      expect(rowOf(BODY)).toHaveLength(1);
    },
  );

  test("an anonymous visitor's page call is keyed by its anonymousId", async () => {
    const page = JSON.stringify({
      type: "page",
      name: "Pricing",
      anonymousId: "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d",
      messageId: "ajs-next-1764003700000-9a8b7c6d",
      properties: { path: "/pricing", url: "https://shop.example.com/pricing" },
      timestamp: "2026-11-24T17:01:40.000Z",
    });
    const res = await t.post("/hooks/segment", page, signed(page));
    expect([res.status, await res.text()]).toEqual([202, '{"status":"queued"}']);
    expect(rowOf(page)).toEqual([
      { key: "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d", event_type: "page", dedup_id: "ajs-next-1764003700000-9a8b7c6d" },
    ]);
  });

  test("a batch signed as Webhooks (Actions) signs it, over its first call only, is 401", async () => {
    const calls = [JSON.parse(BODY), { ...JSON.parse(BODY), messageId: "ajs-next-2", event: "Order Refunded" }];
    const res = await t.post("/hooks/segment", JSON.stringify(calls), {
      "Content-Type": "application/json",
      "X-Signature": sign(JSON.stringify(calls[0])),
    });
    expect([res.status, await res.text()]).toEqual([401, ""]);
  });
});
