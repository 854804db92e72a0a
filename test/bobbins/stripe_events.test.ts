// stripe.events: a Stripe webhook endpoint (Stripe-Signature t=<unix>,v1=<hex HMAC-SHA256 of
// "<t>.<body>">, the whsec_ secret used as written), through a real `hookspool run`, and against
// an intake on the kit's clock for what is Stripe's own: the key's fallbacks, the event id as the
// dedup id across Stripe's re-signed retries, the three-day window and the ping. stripe-node, Stripe's
// own SDK, signs the captures' bodies to their v1= and verifies them, and an event it signs is queued.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHmac } from "node:crypto";
import Stripe from "stripe";
import { capturesOf } from "../../src/bobbin/captures.ts";
import type { TestIntake } from "../helpers/intake.ts";
import { bobbinTest, builtin, eventByPayload, kitIntake, kitOf } from "./catalogue.ts";

const bobbin = builtin("stripe.events");
const kit = kitOf(bobbin);
const SECRET = kit.secrets.secret;
const NOW = kit.now ?? 0;
const v1 = (key: string, t: number, body: string) => createHmac("sha256", key).update(`${t}.${body}`).digest("hex");
/**
 * stripe-node's webhooks helper. Under Bun the package loads its worker build, whose crypto is
 * SubtleCrypto, so the helper's async forms are the ones that run (Stripe's advice for such runtimes).
 */
const stripe = new Stripe("sk_test_kit-test-stripe-unused");
const webhooks = stripe.webhooks;
const capture = (file: string) => {
  const c = capturesOf(bobbin.files()).find((x) => x.file === `captures/${file}`);
  if (!c) throw new Error(`no capture ${file}`);
  const signature = c.request.headers.find(([k]) => k.toLowerCase() === "stripe-signature")?.[1] ?? "";
  return { body: new TextDecoder().decode(c.request.body), signature };
};

describe("stripe-node", () => {
  test("generateTestHeaderStringAsync of each signed capture's body is its Stripe-Signature, less v0=", async () => {
    for (const file of ["accepted.http", "ping.http"]) {
      const { body, signature } = capture(file);
      const header = await webhooks.generateTestHeaderStringAsync({ payload: body, secret: SECRET, timestamp: NOW });
      expect(header).toBe(signature.replace(/,v0=[0-9a-f]+$/, ""));
    }
  });

  test("constructEventAsync and, for the thin ping, parseEventNotificationAsync verify the captures", async () => {
    const accepted = capture("accepted.http");
    const event = await webhooks.constructEventAsync(
      accepted.body,
      accepted.signature,
      SECRET,
      300,
      undefined,
      NOW * 1000,
    );
    expect(event.id).toBe("evt_1RxExampleInvoicePaid01");
    const ping = capture("ping.http");
    const notice = await stripe.parseEventNotificationAsync(
      ping.body,
      ping.signature,
      SECRET,
      300,
      undefined,
      NOW * 1000,
    );
    expect(notice.type).toBe("v2.core.event_destination.ping");
    const rejected = capture("rejected.http");
    const refused = webhooks.constructEventAsync(rejected.body, rejected.signature, SECRET, 300, undefined, NOW * 1000);
    await expect(refused).rejects.toThrow(Stripe.errors.StripeSignatureVerificationError);
  });
});

bobbinTest(
  "stripe.events",
  "an invoice event is queued and delivered, the destination ping is acked and ignored, a bad signature is 401",
  {
    answers: {
      "captures/accepted.http": 202,
      "captures/ping.http": 200,
      "captures/rejected.http": { status: 401, body: "" },
    },
  },
);

describe("against an intake on the kit's clock", () => {
  let t: TestIntake;
  beforeAll(async () => {
    t = await kitIntake("stripe.events");
  });
  afterAll(() => t.stop());

  const post = (body: string, ts: number, signature = `t=${ts},v1=${v1(SECRET, ts, body)}`) =>
    t.post("/hooks/stripe", body, { "Content-Type": "application/json; charset=utf-8", "Stripe-Signature": signature });
  const stored = (body: string) =>
    eventByPayload<{ key: string; event_type: string; dedup_id: string }>(t, "b.key, e.event_type, e.dedup_id", body);
  const accepted = () => {
    const c = bobbin.files().get("captures/accepted.http") ?? "";
    return c.slice(c.indexOf("\n\n") + 2).replace(/\n$/, "");
  };

  test("the accepted capture is stored under its customer, its type and its event id", async () => {
    const body = accepted();
    const res = await post(body, NOW);
    expect([res.status, await res.text()]).toEqual([202, '{"status":"queued"}']);
    expect(stored(body)).toEqual({
      key: "cus_ExampleCustomer01",
      event_type: "invoice.paid",
      dedup_id: "evt_1RxExampleInvoicePaid01",
    });
  });

  test(
    "Stripe's retry (a new t=, a new signature, pending_webhooks changed) is a duplicate, for all " + "of three days",
    async () => {
      const event = (pending: number) =>
        JSON.stringify({
          id: "evt_1RxExampleRetried000001",
          object: "event",
          created: NOW,
          data: {
            object: { id: "pi_ExampleIntent00001", object: "payment_intent", customer: "cus_ExampleCustomer02" },
          },
          livemode: true,
          pending_webhooks: pending,
          type: "payment_intent.succeeded",
        });
      const first = await post(event(2), NOW);
      expect([first.status, await first.text()]).toEqual([202, '{"status":"queued"}']);
      for (const later of [3600, 2 * 86400 + 3600]) {
        t.clock.set(NOW + later);
        const retry = await post(event(1), NOW + later);
        expect([later, retry.status, await retry.text()]).toEqual([later, 200, '{"status":"duplicate"}']);
      }
      t.clock.set(NOW);
      expect(t.count("events", "dedup_id = 'evt_1RxExampleRetried000001'")).toBe(1);
    },
  );

  test(
    "the key falls back to the object's id (a customer's own events), then to a thin event's " + "related object",
    async () => {
      const customer = JSON.stringify({
        id: "evt_1RxExampleCustomer00001",
        object: "event",
        created: NOW,
        data: { object: { id: "cus_ExampleCustomer03", object: "customer", email: "customer@example.com" } },
        livemode: false,
        type: "customer.created",
      });
      const thin = JSON.stringify({
        id: "evt_test_65RxExampleThin000000000000000",
        object: "v2.core.event",
        context: null,
        created: "2026-08-22T12:00:00.000Z",
        livemode: false,
        related_object: {
          id: "mtr_test_61RxExampleMeter0000",
          type: "billing.meter",
          url: "/v1/billing/meters/mtr_test_61RxExampleMeter0000",
        },
        type: "v1.billing.meter.no_meter_found",
      });
      for (const body of [customer, thin]) {
        const res = await post(body, NOW);
        expect(res.status).toBe(202);
      }
      expect(stored(customer)?.key).toBe("cus_ExampleCustomer03");
      expect(stored(thin)).toEqual({
        key: "mtr_test_61RxExampleMeter0000",
        event_type: "v1.billing.meter.no_meter_found",
        dedup_id: "evt_test_65RxExampleThin000000000000000",
      });
    },
  );

  test("during a secret roll any v1= may match; the secret is the whole whsec_ string, not its decoding", async () => {
    const body = JSON.stringify({
      id: "evt_1RxExampleRolled0000001",
      object: "event",
      created: NOW,
      data: { object: { id: "ch_ExampleCharge00001", object: "charge", customer: "cus_ExampleCustomer01" } },
      livemode: false,
      type: "charge.succeeded",
    });
    const old = v1("whsec_kit-test-expiring-secret", NOW, body);
    const rolled = await post(body, NOW, `t=${NOW},v1=${old},v1=${v1(SECRET, NOW, body)}`);
    expect(rolled.status).toBe(202);
    // The same event signed with the secret less its prefix is not Stripe's signature.
    const other = JSON.stringify({ ...JSON.parse(body), id: "evt_1RxExampleNoPrefix00001" });
    const bare = await post(other, NOW, `t=${NOW},v1=${v1(SECRET.slice("whsec_".length), NOW, other)}`);
    expect([bare.status, await bare.text()]).toEqual([401, ""]);
  });

  test("an event stripe-node signs is queued under its customer", async () => {
    const body = JSON.stringify({
      id: "evt_1RxExampleSdkSigned00001",
      object: "event",
      created: NOW,
      data: { object: { id: "in_ExampleInvoice0002", object: "invoice", customer: "cus_ExampleCustomer04" } },
      livemode: false,
      type: "invoice.paid",
    });
    const header = await webhooks.generateTestHeaderStringAsync({ payload: body, secret: SECRET, timestamp: NOW });
    const res = await post(body, NOW, header);
    expect([res.status, await res.text()]).toEqual([202, '{"status":"queued"}']);
    expect(stored(body)).toEqual({
      key: "cus_ExampleCustomer04",
      event_type: "invoice.paid",
      dedup_id: "evt_1RxExampleSdkSigned00001",
    });
  });

  test("a ping signed with another secret is refused like any event", async () => {
    const ping = JSON.stringify({
      id: "evt_test_65RxExamplePing0000000000000001",
      object: "v2.core.event",
      created: "2026-08-22T12:00:00.000Z",
      livemode: false,
      related_object: {
        id: "ed_test_61RxExampleDestination00000",
        type: "v2.core.event_destination",
        url: "/v2/core/event_destinations/ed_test_61RxExampleDestination00000",
      },
      type: "v2.core.event_destination.ping",
    });
    const events = t.count("events");
    const bad = await post(ping, NOW, `t=${NOW},v1=${v1("whsec_kit-test-other-secret", NOW, ping)}`);
    expect([bad.status, await bad.text()]).toEqual([401, ""]);
    const good = await post(ping, NOW);
    expect([good.status, await good.text()]).toEqual([200, '{"status":"ignored"}']);
    expect(t.count("events")).toBe(events);
  });
});
