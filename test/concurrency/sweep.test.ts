// The stripe-events sweep and the intake as two real processes on one SQLite spool: while
// `hookspool sweep` lists 200 undelivered events from a stand-in for Stripe's API and enqueues
// the missing ones, a sender keeps posting those same events to `hookspool intake`, as Stripe's
// retries would. Whoever commits first queues an event; the other is told it is a duplicate.
// Every event ends in the spool exactly once, and the database passes quick_check.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { appendFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { openSpool, quickCheck } from "../../src/store/sqlite/db.ts";
import { SECRET_SENTINEL } from "../helpers/logs.ts";
import { type Hookspool, runHookspool, startHookspool } from "../helpers/proc.ts";
import { type ProviderApi, startStripeApi, stripeEvent, stripeSignature } from "../helpers/provider-apis.ts";
import { tempDir } from "../helpers/tmp.ts";

const KEY = `rk_test_${SECRET_SENTINEL}_concurrent`;
const WHSEC = "whsec_kit-test-secret-stripe-concurrent";
const NOW = Math.floor(Date.now() / 1000);
const id = (i: number) => `evt_1Conc${String(i).padStart(4, "0")}`;
const EVENTS = Array.from({ length: 200 }, (_, i) =>
  stripeEvent(id(i), NOW, { ago: 30 * (i + 1), customer: `cus_${i % 5}` }),
);
// The intake took every fourth event before the sweep; the rest race.
const LANDED = EVENTS.filter((_, i) => i % 4 === 0);
const RACING = EVENTS.filter((_, i) => i % 4 !== 0);

let api: ProviderApi;
let intake: Hookspool | null = null;
beforeAll(() => {
  api = startStripeApi(KEY, EVENTS);
});
afterAll(async () => {
  api.stop();
  intake?.kill();
  await intake?.exited;
});

test("the sweep and the intake in two processes: every event spooled exactly once", async () => {
  const home = join(tempDir(), "home");
  expect((await runHookspool(home, ["init"])).code).toBe(0);
  writeFileSync(join(home, "stripe-secret"), WHSEC, { mode: 0o600 });
  writeFileSync(join(home, "stripe-key"), KEY, { mode: 0o600 });
  appendFileSync(
    join(home, "config.toml"),
    `\n[intake]\nlisten = "127.0.0.1:0"\n\n[bobbins.stripe]\nbobbin = "stripe.events"\n` +
      `secrets.secret = { file = "${join(home, "stripe-secret")}" }\n` +
      `secrets.api_key = { file = "${join(home, "stripe-key")}" }\noutputs = { "*" = "script:demo-log" }\n`,
  );
  intake = await startHookspool(home, ["intake"]);
  const url = `http://127.0.0.1:${await intake.port()}/hooks/stripe`;
  const deliver = async (e: Record<string, unknown>) => {
    const body = JSON.stringify(e, null, 2);
    const t = Math.floor(Date.now() / 1000);
    const r = await fetch(url, {
      method: "POST",
      body,
      headers: { "content-type": "application/json", "stripe-signature": stripeSignature(WHSEC, body, t) },
    });
    return r.status;
  };
  for (const e of LANDED) expect(await deliver(e)).toBe(202);

  // Stripe's retries of the racing events, in a loop over them, until the sweep has ended.
  let done = false;
  const answers = new Map<string, number[]>(RACING.map((e) => [String(e.id), []]));
  const retries = (async () => {
    // Spread out, so that some land before the sweep looks them up and some after it enqueued.
    for (let round = 0; !done || round < 1; round++)
      for (const e of RACING) {
        answers.get(String(e.id))?.push(await deliver(e));
        await Bun.sleep(6);
      }
  })();
  const sweep = await runHookspool(home, ["--json", "sweep", "stripe", "--api-url", api.url]);
  done = true;
  await retries;
  expect({ code: sweep.code, err: sweep.err }).toEqual({ code: 0, err: "" });
  expect(sweep.out).not.toContain(KEY);
  const report = JSON.parse(sweep.out) as { spooled: string[]; enqueued: { id: string }[]; duplicates: string[] };
  expect(report.spooled.length + report.enqueued.length + report.duplicates.length).toBe(200);

  const spool = openSpool(join(home, "spool.db"));
  try {
    const rows = spool.db
      .query("SELECT dedup_id, COUNT(*) AS n FROM events WHERE source = 'stripe' GROUP BY dedup_id")
      .all() as {
      dedup_id: string;
      n: number;
    }[];
    expect(rows).toHaveLength(200);
    expect(rows.every((r) => r.n === 1)).toBe(true);
    expect(quickCheck(spool)).toEqual([]);
  } finally {
    spool.close();
  }
  // Each racing event was queued by exactly one of the two: one 202 from the intake, or the sweep.
  for (const e of RACING) {
    const a = answers.get(String(e.id)) ?? [];
    expect(a.every((s) => s === 202 || s === 200)).toBe(true);
    const byIntake = a.filter((s) => s === 202).length;
    const bySweep = report.enqueued.filter((x) => x.id === e.id).length;
    expect(byIntake + bySweep).toBe(1);
  }
}, 60_000);
