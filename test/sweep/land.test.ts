// What an enqueueing sweep does with what it listed (src/sweep/land.ts), on a real spool with a
// real intake: an event the intake takes after the sweep looked its id up (the narrowest race)
// is a duplicate in the sweep's own enqueue and is spooled once; the source's own steps decide
// what is ignored and what the intake would have quarantined; a listed id that is not the
// source's dedup id is refused rather than guessed.
import { afterAll, describe, expect, test } from "bun:test";
import { appendFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { FakeClock } from "../../src/clock.ts";
import { loadConfig } from "../../src/config/load.ts";
import { loadSources } from "../../src/config/sources.ts";
import { openStores } from "../../src/store/open.ts";
import { type ListedEvent, landSwept } from "../../src/sweep/land.ts";
import { cli } from "../helpers/cli.ts";
import { startIntakeIn, type TestIntake } from "../helpers/intake.ts";
import { stripeEvent, stripeSignature } from "../helpers/provider-apis.ts";
import { tempDir } from "../helpers/tmp.ts";

const WHSEC = "whsec_kit-test-secret-stripe-land";
const NOW = 1_787_400_000;
const EVENTS = [0, 1, 2].map((i) => stripeEvent(`evt_1Land${i}`, NOW, { ago: 60 * (i + 1), customer: `cus_${i}` }));

const intakes: TestIntake[] = [];
afterAll(async () => {
  for (const t of intakes) await t.stop();
});

async function rig() {
  const home = join(tempDir(), "home");
  expect((await cli(["--home", home, "init"])).code).toBe(0);
  writeFileSync(join(home, "stripe-secret"), WHSEC, { mode: 0o600 });
  appendFileSync(
    join(home, "config.toml"),
    `\n[intake]\nlisten = "127.0.0.1:0"\n\n[bobbins.stripe]\nbobbin = "stripe.events"\n` +
      `secrets.secret = { file = "${join(home, "stripe-secret")}" }\noutputs = { "*" = "script:demo-log" }\n`,
  );
  const clock = new FakeClock(NOW);
  const intake = await startIntakeIn(home, { clock });
  intakes.push(intake);
  const env = { PATH: process.env.PATH, HOME: process.env.HOME };
  const loaded = loadConfig({ home, env, cwd: home });
  const plugins = await loadSources(loaded.config, {
    configDir: dirname(loaded.paths.config ?? home),
    env,
    file: loaded.paths.config ?? "config.toml",
  });
  const stores = await openStores(loaded.config, {
    mode: "operator",
    paths: { spoolFile: loaded.paths.spoolFile, lock: loaded.paths.lock },
    env,
    clock,
  });
  const store = stores.operator();
  const deliver = async (e: Record<string, unknown>) => {
    const body = JSON.stringify(e, null, 2);
    return (
      await intake.post("/hooks/stripe", body, {
        "content-type": "application/json",
        "stripe-signature": stripeSignature(WHSEC, body, NOW),
      })
    ).status;
  };
  const rows = () =>
    intake.db.db.query("SELECT dedup_id, trace FROM events WHERE source = 'stripe' ORDER BY dedup_id").all() as {
      dedup_id: string;
      trace: string;
    }[];
  const source = plugins.get("stripe");
  if (!source) throw new Error("no stripe source");
  return { config: loaded.config, source, store, deliver, rows };
}

const listed = (e: Record<string, unknown>, id = String(e.id)): ListedEvent => ({ id, payload: e, headers: {} });

describe("landing swept events", () => {
  test("an event the intake takes after the sweep's lookup is a duplicate of the sweep's enqueue", async () => {
    const r = await rig();
    const answers: number[] = [];
    const report = await landSwept({
      config: r.config,
      source: r.source,
      kind: "stripe-events",
      events: EVENTS.map((e) => listed(e)),
      dryRun: false,
      now: NOW,
      async spooled(ids) {
        const held = await r.store.spooledDedupIds("stripe", ids);
        // Stripe's retries land now: after the lookup, before the sweep's enqueue.
        for (const e of EVENTS.slice(0, 2)) answers.push(await r.deliver(e));
        return held;
      },
      enqueue: (ev, at) => r.store.enqueue(ev, at),
    });
    expect(answers).toEqual([202, 202]);
    expect(report.spooled).toEqual([]);
    expect(report.duplicates).toEqual(["evt_1Land0", "evt_1Land1"]);
    expect(report.enqueued.map((x) => x.id)).toEqual(["evt_1Land2"]);
    const rows = r.rows();
    expect(rows.map((x) => x.dedup_id)).toEqual(["evt_1Land0", "evt_1Land1", "evt_1Land2"]);
    expect(rows.map((x) => JSON.parse(x.trace).stage)).toEqual(["implicit", "implicit", "sweep"]);
    expect(JSON.parse(rows[2].trace)).toMatchObject({ stage: "sweep", routed_as: "implicit", sweep: "stripe-events" });
    // Stripe's next retry of the swept one is a duplicate at the intake.
    expect(await r.deliver(EVENTS[2])).toBe(200);
    expect(r.rows()).toHaveLength(3);
    await r.store.close();
  });

  test("the source's own steps: a ping is ignored, an event without a key would be quarantined", async () => {
    const r = await rig();
    const ping = {
      id: "evt_1LandPing",
      object: "v2.core.event",
      type: "v2.core.event_destination.ping",
      created: "2026-08-22T12:00:00.000Z",
      livemode: false,
      related_object: { id: "ed_1", type: "v2.core.event_destination", url: "/v2/core/event_destinations/ed_1" },
    };
    const keyless = { id: "evt_1LandKeyless", object: "event", type: "balance.available", data: {} };
    const report = await landSwept({
      config: r.config,
      source: r.source,
      kind: "stripe-events",
      events: [listed(ping), listed(keyless), listed(EVENTS[0], "evt_other"), listed(EVENTS[1]), listed(EVENTS[1])],
      dryRun: false,
      now: NOW,
      spooled: (ids) => r.store.spooledDedupIds("stripe", ids),
      enqueue: (ev, at) => r.store.enqueue(ev, at),
    });
    expect(report.ignored).toEqual([{ id: "evt_1LandPing", reason: "v2.core.event_destination.ping" }]);
    expect(report.failed).toEqual([
      { id: "evt_1LandKeyless", reason: "the intake would quarantine it (key_missing)" },
      { id: "evt_other", reason: "the source's dedup id is not the listed id" },
    ]);
    // Listed twice (a page boundary that moved), enqueued once.
    expect(report.enqueued.map((x) => x.id)).toEqual(["evt_1Land1"]);
    expect(r.rows().map((x) => x.dedup_id)).toEqual(["evt_1Land1"]);
    await r.store.close();
  });
});
