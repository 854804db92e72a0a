// A signed request sent twice within its timestamp tolerance (the same id, timestamp, signature
// and body: a replay, or a sender's retry of one delivery) is queued once. Schemes that carry a
// message id dedup on it by default; the t=,v1= scheme, which has none, dedups on its signature.
// On both backends, each case with an intake of its own.
import { afterEach, describe, expect, setDefaultTimeout, test } from "bun:test";
import { createHmac } from "node:crypto";
import { startIntakeOn, type WorldIntake } from "../helpers/intake-world.ts";
import { onBothWorlds, type OpenWorld } from "../helpers/world.ts";

setDefaultTimeout(30_000);

const SW = `whsec_${Buffer.from("replay-test-key-bytes").toString("base64")}`;
const TS = "replay-test-ts-secret";

let t: WorldIntake;

afterEach(async () => {
  await t?.stop();
});

async function start(open: OpenWorld): Promise<void> {
  t = await startIntakeOn(
    open,
    `[sources.sw]
template = { scheme = "standard-webhooks", key = "k" }
secrets.secret = { file = "{{secret:sw}}" }
action = "hermes:x"

[sources.ts]
template = { scheme = "timestamped", header = "Stripe-Signature", key = "k" }
secrets.secret = { file = "{{secret:ts}}" }
action = "hermes:x"

[sources.tsoff]
template = { scheme = "timestamped", header = "Stripe-Signature", key = "k", dedup = "none" }
secrets.secret = { file = "{{secret:ts}}" }
action = "hermes:x"

[sources.tsid]
template = { scheme = "timestamped", header = "Stripe-Signature", key = "k", dedup = "id" }
secrets.secret = { file = "{{secret:ts}}" }
action = "hermes:x"
`,
    { secrets: { sw: SW, ts: TS } },
  );
}

function swHeaders(id: string, body: string, ts = Math.floor(t.clock.now())): Record<string, string> {
  const key = Buffer.from(SW.slice(6), "base64");
  return {
    "webhook-id": id,
    "webhook-timestamp": String(ts),
    "webhook-signature": `v1,${createHmac("sha256", key).update(`${id}.${ts}.${body}`).digest("base64")}`,
  };
}

function tsHeaders(body: string, ts = Math.floor(t.clock.now())): Record<string, string> {
  return { "Stripe-Signature": `t=${ts},v1=${createHmac("sha256", TS).update(`${ts}.${body}`).digest("hex")}` };
}

async function twice(path: string, body: string, headers: Record<string, string>): Promise<[number, unknown][]> {
  const out: [number, unknown][] = [];
  for (let i = 0; i < 2; i++) {
    const r = await t.post(path, body, headers);
    out.push([r.status, await r.json()]);
  }
  return out;
}

onBothWorlds((open) => {
  describe("replays within the tolerance are duplicates by default", () => {
    test("Standard Webhooks: dedup on webhook-id", async () => {
      await start(open);
      const body = JSON.stringify({ k: "a", n: 1 });
      expect(await twice("/hooks/sw", body, swHeaders("msg_1", body))).toEqual([
        [202, { status: "queued" }],
        [200, { status: "duplicate" }],
      ]);
      // Another message id is another event, whatever the body.
      expect((await t.post("/hooks/sw", body, swHeaders("msg_2", body))).status).toBe(202);
      expect(await t.count("events", "source = 'sw'")).toBe(2);
      expect(await t.count("dedup", "source = 'sw' AND dedup_id = 'msg_1'")).toBe(1);
    });

    test("t=,v1=: dedup on the signature, stored only as its hash", async () => {
      await start(open);
      const body = JSON.stringify({ k: "a", n: 2 });
      const headers = tsHeaders(body);
      expect(await twice("/hooks/ts", body, headers)).toEqual([
        [202, { status: "queued" }],
        [200, { status: "duplicate" }],
      ]);
      const row = (await t.world.rows.get("SELECT dedup_id FROM dedup WHERE source = 'ts'")) as { dedup_id: string };
      expect(row.dedup_id).toMatch(/^sig:[0-9a-f]{64}$/);
      expect(row.dedup_id).not.toContain(headers["Stripe-Signature"].split("v1=")[1]);
      // The sender signing the same body again (a new timestamp) is a new delivery.
      t.clock.advance(2);
      expect((await t.post("/hooks/ts", body, tsHeaders(body))).status).toBe(202);
    });

    test('dedup = "none" turns the default off; an explicit selector replaces it', async () => {
      await start(open);
      const body = JSON.stringify({ k: "a", id: "evt_1" });
      expect((await twice("/hooks/tsoff", body, tsHeaders(body))).map(([s]) => s)).toEqual([202, 202]);
      expect(await t.count("dedup", "source = 'tsoff'")).toBe(0);
      expect((await twice("/hooks/tsid", body, tsHeaders(body))).map(([s]) => s)).toEqual([202, 200]);
      expect(await t.world.rows.get("SELECT dedup_id FROM dedup WHERE source = 'tsid'")).toEqual({ dedup_id: "evt_1" });
    });

    test("a redelivery of a dropped batch's event is queued anew: 200 queued", async () => {
      await start(open);
      const body = JSON.stringify({ k: "drop", n: 3 });
      const headers = swHeaders("msg_drop", body);
      expect((await t.post("/hooks/sw", body, headers)).status).toBe(202);
      const { batch_id } = (await t.world.rows.get("SELECT batch_id FROM events WHERE dedup_id = 'msg_drop'")) as {
        batch_id: number;
      };
      await t.world.operator.dropBatches([batch_id], t.clock.now());
      const again = await t.post("/hooks/sw", body, headers);
      expect([again.status, await again.json()]).toEqual([200, { status: "queued" }]);
      expect(await t.count("events", "dedup_id = 'msg_drop'")).toBe(2);
    });
  });
});
