// razorpay.webhooks: Razorpay webhooks (X-Razorpay-Signature, the hex HMAC-SHA256 of the body
// under the webhook secret), through a real `hookspool run`, and against an intake for what is
// Razorpay's own: one batch per order, a refund with its payment, and a retry (the same
// x-razorpay-event-id) answered as a duplicate. razorpay-node, Razorpay's own SDK, which verifies
// and never signs, accepts the signed capture and what this test signs, and refuses the rejected one.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHmac } from "node:crypto";
import Razorpay from "razorpay";
import { capturesOf } from "../../src/bobbin/captures.ts";
import type { TestIntake } from "../helpers/intake.ts";
import { bobbinTest, builtin, capturedRequest, eventsByPayload, kitIntake, kitOf } from "./catalogue.ts";

const bobbin = builtin("razorpay.webhooks");
const kit = kitOf(bobbin);
const SECRET = kit.secrets.secret;
const captures = capturesOf(bobbin.files());
const { body: BODY, headers: HEADERS } = capturedRequest(bobbin);
const signed = (body: string, id: string) => ({
  "Content-Type": "application/json",
  "x-razorpay-event-id": id,
  "X-Razorpay-Signature": createHmac("sha256", SECRET).update(body).digest("hex"),
});

bobbinTest("razorpay.webhooks", "a captured payment is queued and delivered, a bad signature is 401", {
  answers: {
    "captures/accepted.http": 202,
    "captures/rejected.http": { status: 401, body: "" },
  },
});

describe("razorpay-node", () => {
  test("validateWebhookSignature accepts the accepted capture under the kit's secret, not the rejected one", () => {
    const signature = (file: string) => {
      const c = captures.find((x) => x.file === `captures/${file}`);
      const header = c?.request.headers.find(([k]) => k.toLowerCase() === "x-razorpay-signature");
      if (!c || !header) throw new Error(`no signed capture ${file}`);
      return [new TextDecoder().decode(c.request.body), header[1]] as const;
    };
    const [body, good] = signature("accepted.http");
    expect(Razorpay.validateWebhookSignature(body, good, SECRET)).toBe(true);
    const [other, bad] = signature("rejected.http");
    expect(Razorpay.validateWebhookSignature(other, bad, SECRET)).toBe(false);
  });
});

describe("against an intake", () => {
  let t: TestIntake;
  beforeAll(async () => {
    t = await kitIntake("razorpay.webhooks");
  });
  afterAll(() => t.stop());

  const rows = (body: string) => eventsByPayload<{ key: string; event_type: string }>(t, "b.key, e.event_type", body);

  test("the capture is stored under its order; Razorpay's retry of the event is a duplicate", async () => {
    const first = await t.post("/hooks/razorpay", BODY, HEADERS);
    expect([first.status, await first.text()]).toEqual([202, '{"status":"queued"}']);
    expect(rows(BODY)).toEqual([{ key: "order_ExampleOrd042", event_type: "payment.captured" }]);
    const retry = await t.post("/hooks/razorpay", BODY, HEADERS);
    expect([retry.status, await retry.text()]).toEqual([200, '{"status":"duplicate"}']);
  });

  test("a refund razorpay-node verifies is keyed by its payment; a payment without an order by itself", async () => {
    const refund = JSON.stringify({
      entity: "event",
      account_id: "acc_ExampleAcct01",
      event: "refund.processed",
      contains: ["refund"],
      payload: { refund: { entity: { id: "rfnd_Example01", payment_id: "pay_ExamplePay050", amount: 100 } } },
      created_at: 1735689700,
    });
    const headers = signed(refund, "NkXa2Ljs6dqP9Z");
    expect(Razorpay.validateWebhookSignature(refund, headers["X-Razorpay-Signature"], SECRET)).toBe(true);
    const r = await t.post("/hooks/razorpay", refund, headers);
    expect([r.status, await r.text()]).toEqual([202, '{"status":"queued"}']);
    expect(rows(refund)).toEqual([{ key: "pay_ExamplePay050", event_type: "refund.processed" }]);
    const lone = JSON.stringify({
      entity: "event",
      account_id: "acc_ExampleAcct01",
      event: "payment.failed",
      contains: ["payment"],
      payload: { payment: { entity: { id: "pay_ExamplePay051", order_id: null, status: "failed" } } },
      created_at: 1735689800,
    });
    const l = await t.post("/hooks/razorpay", lone, signed(lone, "NkXa2Ljs6dqP8Y"));
    expect([l.status, await l.text()]).toEqual([202, '{"status":"queued"}']);
    expect(rows(lone)).toEqual([{ key: "pay_ExamplePay051", event_type: "payment.failed" }]);
  });

  test("a tampered body is 401", async () => {
    const tampered = BODY.replace("50000", "5000");
    const res = await t.post("/hooks/razorpay", tampered, HEADERS);
    expect([res.status, await res.text()]).toEqual([401, ""]);
  });
});
