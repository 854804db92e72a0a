// paddle.billing: a Paddle Billing notification destination (Paddle-Signature ts=<unix>;h1=<hex
// HMAC-SHA256 of "<ts>:<body>">, the pdl_ntfset_ secret used as written), through a real
// `hookspool run`, and against an intake on the kit's clock with no settings, as a deployment runs
// it, for what is Paddle's own: the 5 s window either side, the customer as the key with the
// entity's own id as its fallback, event_id as the dedup id across Paddle's re-signed retries for
// all of four days, and any h1 matching.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHmac } from "node:crypto";
import type { TestIntake } from "../helpers/intake.ts";
import { bobbinTest, builtin, capturedRequest, eventByPayload, kitIntake, kitOf } from "./catalogue.ts";

const bobbin = builtin("paddle.billing");
const kit = kitOf(bobbin);
const SECRET = kit.secrets.secret;
const NOW = kit.now ?? 0;
const h1 = (key: string, ts: number, body: string) => createHmac("sha256", key).update(`${ts}:${body}`).digest("hex");

bobbinTest(
  "paddle.billing",
  "subscription and customer events are queued and delivered, a bad or stale signature is 401",
  {
    answers: {
      "captures/accepted.http": 202,
      "captures/customer.http": 202,
      "captures/default-stale.http": { status: 401, body: "" },
      "captures/default-window.http": 202,
      "captures/rejected.http": { status: 401, body: "" },
    },
  },
);

test("the window is Paddle's 5 s, the kit's instance included", () => {
  expect(bobbin.manifest.settings.tolerance_s).toMatchObject({ type: "int", required: false, default: 5 });
  expect(kit.instance.settings).toEqual({});
});

describe("against an intake on the kit's clock, with no settings", () => {
  let t: TestIntake;
  beforeAll(async () => {
    t = await kitIntake("paddle.billing");
  });
  afterAll(() => t.stop());

  const post = (body: string, ts: number, signature = `ts=${ts};h1=${h1(SECRET, ts, body)}`) =>
    t.post("/hooks/paddle", body, { "Content-Type": "application/json", "Paddle-Signature": signature });
  const stored = (body: string) =>
    eventByPayload<{ key: string; event_type: string; dedup_id: string }>(t, "b.key, e.event_type, e.dedup_id", body);

  test("the accepted capture is stored under its customer, its event_type and its event_id", async () => {
    const body = capturedRequest(bobbin).body;
    const res = await post(body, NOW);
    expect([res.status, await res.text()]).toEqual([202, '{"status":"queued"}']);
    expect(stored(body)).toEqual({
      key: "ctm_01k3exmp1ecust0mer000001",
      event_type: "subscription.created",
      dedup_id: "evt_01k3exmp1esubcreated00001",
    });
  });

  test("ts is accepted up to 5 s either side of the clock and refused beyond", async () => {
    const event = (n: number) =>
      JSON.stringify({
        data: { id: `sub_01k3exmp1ewindow00000000${n}`, status: "active", customer_id: "ctm_01k3exmp1ecust0mer000002" },
        event_id: `evt_01k3exmp1ewindow00000000${n}`,
        event_type: "subscription.updated",
        occurred_at: "2026-09-01T12:00:00.000000Z",
        notification_id: `ntf_01k3exmp1ewindow00000000${n}`,
      });
    const answers: [number, number][] = [];
    for (const [n, offset] of [
      [1, -6],
      [2, 6],
      [3, -5],
      [4, 5],
    ] as const)
      answers.push([offset, (await post(event(n), NOW + offset)).status]);
    expect(answers).toEqual([
      [-6, 401],
      [6, 401],
      [-5, 202],
      [5, 202],
    ]);
  });

  test("Paddle's retry (signed afresh, later) is a duplicate, for all of its three days", async () => {
    const body = JSON.stringify({
      data: {
        id: "txn_01k3exmp1eretried00000001",
        status: "completed",
        customer_id: "ctm_01k3exmp1ecust0mer000003",
        origin: "web",
      },
      event_id: "evt_01k3exmp1eretried00000001",
      event_type: "transaction.completed",
      occurred_at: "2026-09-01T11:59:59.000000Z",
      notification_id: "ntf_01k3exmp1eretried00000001",
    });
    expect((await post(body, NOW)).status).toBe(202);
    for (const later of [30, 86_400 + 60, 3 * 86_400]) {
      t.clock.set(NOW + later);
      const retry = await post(body, NOW + later);
      expect([later, retry.status, await retry.text()]).toEqual([later, 200, '{"status":"duplicate"}']);
    }
    t.clock.set(NOW);
    expect(t.count("events", "dedup_id = 'evt_01k3exmp1eretried00000001'")).toBe(1);
  });

  test(
    "an entity with no customer_id (a customer's own event, an early transaction) is keyed by its " + "own id",
    async () => {
      const customer = capturedRequest(bobbin, "captures/customer.http").body;
      const early = JSON.stringify({
        data: { id: "txn_01k3exmp1eear1ytransact01", status: "draft", customer_id: null, origin: "web" },
        event_id: "evt_01k3exmp1eear1ytransact01",
        event_type: "transaction.created",
        occurred_at: "2026-09-01T11:59:30.000000Z",
        notification_id: "ntf_01k3exmp1eear1ytransact01",
      });
      for (const body of [customer, early]) expect((await post(body, NOW)).status).toBe(202);
      expect(stored(customer)?.key).toBe("ctm_01k3exmp1ecust0mer000001");
      expect(stored(early)?.key).toBe("txn_01k3exmp1eear1ytransact01");
    },
  );

  test("any h1 may match; the key is the whole pdl_ntfset_ string, not what follows the prefix", async () => {
    const body = JSON.stringify({
      data: { id: "sub_01k3exmp1etwosignatures01", status: "paused", customer_id: "ctm_01k3exmp1ecust0mer000004" },
      event_id: "evt_01k3exmp1etwosignatures01",
      event_type: "subscription.paused",
      occurred_at: "2026-09-01T12:00:00.000000Z",
      notification_id: "ntf_01k3exmp1etwosignatures01",
    });
    const other = h1("pdl_ntfset_kit-test-old-secret-paddle", NOW, body);
    const two = await post(body, NOW, `ts=${NOW};h1=${other};h1=${h1(SECRET, NOW, body)}`);
    expect(two.status).toBe(202);
    const bare = JSON.stringify({ ...JSON.parse(body), event_id: "evt_01k3exmp1ebaresecret00001" });
    const refused = await post(bare, NOW, `ts=${NOW};h1=${h1(SECRET.slice("pdl_ntfset_".length), NOW, bare)}`);
    expect([refused.status, await refused.text()]).toEqual([401, ""]);
    // A header without its ts cannot be checked against the window: refused too.
    const noTs = await post(bare, NOW, `h1=${h1(SECRET, NOW, bare)}`);
    expect(noTs.status).toBe(401);
  });
});
