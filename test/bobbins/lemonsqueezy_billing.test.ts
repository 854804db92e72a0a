// lemonsqueezy.billing: a Lemon Squeezy store's webhooks (X-Signature, the hex HMAC-SHA256 of the
// body under the signing secret), through a real `hookspool run`, and against an intake for what is
// Lemon Squeezy's own: one batch per customer, meta.event_name as event type, and, with no id to
// dedup on, the body's SHA-256, so that a retry of the same body is a duplicate.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHash, createHmac } from "node:crypto";
import type { TestIntake } from "../helpers/intake.ts";
import { bobbinTest, builtin, capturedRequest, eventsByPayload, kitIntake, kitOf } from "./catalogue.ts";

const bobbin = builtin("lemonsqueezy.billing");
const kit = kitOf(bobbin);
const SECRET = kit.secrets.secret;
const { body: BODY, headers: HEADERS } = capturedRequest(bobbin);
const signed = (body: string, event: string) => ({
  "Content-Type": "application/json",
  "X-Event-Name": event,
  "X-Signature": createHmac("sha256", SECRET).update(body).digest("hex"),
});
const sha256 = (s: string) => createHash("sha256").update(s).digest("hex");

bobbinTest("lemonsqueezy.billing", "an order is queued and delivered, a bad signature is 401", {
  answers: {
    "captures/accepted.http": 202,
    "captures/rejected.http": { status: 401, body: "" },
  },
});

describe("against an intake", () => {
  let t: TestIntake;
  beforeAll(async () => {
    t = await kitIntake("lemonsqueezy.billing");
  });
  afterAll(() => t.stop());

  const rowOf = (body: string) =>
    eventsByPayload<{ key: string; event_type: string; dedup_id: string }>(t, "b.key, e.event_type, e.dedup_id", body);
  const batchOf = (body: string) => eventsByPayload<{ batch_id: number }>(t, "e.batch_id", body)[0].batch_id;

  test(
    "the accepted capture is stored under the customer id, its event name and the body's SHA-256; " +
      "Lemon Squeezy's retry of it is a duplicate, answered 200",
    async () => {
      const first = await t.post("/hooks/lemonsqueezy", BODY, HEADERS);
      expect([first.status, await first.text()]).toEqual([202, '{"status":"queued"}']);
      expect(rowOf(BODY)).toEqual([{ key: "3141592", event_type: "order_created", dedup_id: sha256(BODY) }]);
      // A 202 is "anything else" to a sender that wants 200: the retry 5 s later gets its 200 here.
      const retry = await t.post("/hooks/lemonsqueezy", BODY, HEADERS);
      expect([retry.status, await retry.text()]).toEqual([200, '{"status":"duplicate"}']);
      expect(rowOf(BODY)).toHaveLength(1);
    },
  );

  test(
    "the subscription the order started joins the customer's batch; the event type is the signed " +
      "meta.event_name, not the header",
    async () => {
      const subscription = JSON.stringify({
        meta: { test_mode: true, event_name: "subscription_created", custom_data: { account_id: "acct-1042" } },
        data: {
          type: "subscriptions",
          id: "1618033",
          attributes: {
            store_id: 90210,
            customer_id: 3141592,
            order_id: 4815162,
            product_id: 271828,
            variant_id: 314159,
            status: "active",
            renews_at: "2026-07-02T16:45:07.000000Z",
            test_mode: true,
          },
        },
      });
      const res = await t.post("/hooks/lemonsqueezy", subscription, {
        ...signed(subscription, "subscription_created"),
        "X-Event-Name": "order_refunded",
      });
      expect([res.status, await res.text()]).toEqual([202, '{"status":"queued"}']);
      expect(rowOf(subscription)).toEqual([
        { key: "3141592", event_type: "subscription_created", dedup_id: sha256(subscription) },
      ]);
      expect(batchOf(subscription)).toBe(batchOf(BODY));
    },
  );

  test("a customer_updated event, whose data is the customer, is keyed by the customer's own id", async () => {
    const customer = JSON.stringify({
      meta: { test_mode: true, event_name: "customer_updated" },
      data: {
        type: "customers",
        id: "3141592",
        attributes: {
          store_id: 90210,
          name: "Example Customer",
          email: "customer@example.com",
          status: "subscribed",
          test_mode: true,
        },
      },
    });
    const res = await t.post("/hooks/lemonsqueezy", customer, signed(customer, "customer_updated"));
    expect([res.status, await res.text()]).toEqual([202, '{"status":"queued"}']);
    expect(rowOf(customer)).toEqual([{ key: "3141592", event_type: "customer_updated", dedup_id: sha256(customer) }]);
  });

  test("a signature of another body is 401 and nothing is stored", async () => {
    const events = t.count("events");
    const refunded = BODY.replace('"refunded":false', '"refunded":true');
    const res = await t.post("/hooks/lemonsqueezy", refunded, HEADERS);
    expect([res.status, await res.text()]).toEqual([401, ""]);
    expect(t.count("events")).toBe(events);
  });
});
