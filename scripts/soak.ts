// The soak (make soak DURATION=...): random bursts over several sources and keys into a real
// intake and dispatcher (two processes sharing one home), a receiver that flaps (down, slow, 5xx,
// 429 with Retry-After, back up), periodic kill -9 of the dispatcher and of the intake, and
// config reloads. At the end it asserts, reading the spool: no acked event lost (each in exactly
// one batch), no batch delivered with two different content_hashes, order per key kept, no batch
// over its bounds, nothing stuck (every batch delivered or dead with a reason), and the leases a
// killed dispatcher held taken over; and it prints one JSON line with the figures, CPU seconds
// and peak RSS of the hookspool processes.
//
//   bun scripts/soak.ts [--duration 60] [--seed 1] [--runtime bun|binary]
import { seededRng } from "../src/clock.ts";
import type { Runtime } from "../test/helpers/proc.ts";
import { runHookspool, waitFor } from "../test/helpers/proc.ts";
import { tempDir } from "../test/helpers/tmp.ts";
import { judge, type SoakStore } from "./soak/checks.ts";
import { SECRET, writeConfig, writeHome } from "./soak/config.ts";
import { Farm, type Kind } from "./soak/farm.ts";
import { Load } from "./soak/load.ts";
import { FlappingReceiver, type Mode } from "./soak/receiver.ts";
import { openSqliteSoakStore } from "./soak/sqlite.ts";

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? (process.argv[i + 1] ?? fallback) : fallback;
}

const DURATION_S = Number(arg("duration", process.env.DURATION ?? "60"));
const SEED = Number(arg("seed", String(Date.now() % 100000)));
const rng = seededRng(SEED);
const RUNTIME = arg("runtime", "bun") as Runtime;
const rand = (n: number) => Math.floor(rng.next() * n);

const receiver = new FlappingReceiver();
let farm: Farm | null = null;
let reloads = 0;
let backlogHighWater = 0;
/** How long the backlog took to drain after the senders stopped (null: not in 45 s). */
let drainS: number | null = null;

/** kill -9 of a random process of the kind (a dispatcher holding a lease, when one does), then its restart. */
async function killAndRestart(f: Farm, kind: Kind): Promise<void> {
  const holders = kind === "dispatch" ? await f.leaseHolders() : [];
  const i = holders.length > 0 ? holders[rand(holders.length)] : rand(f.count(kind));
  await f.kill9(kind, i);
  await Bun.sleep(200 + rand(600));
  await f.start(kind, i);
}

async function main(): Promise<number> {
  const home = tempDir("hookspool-soak-");
  writeHome(home, receiver.port, "sqlite", reloads);
  const migrated = await runHookspool(home, ["migrate"], { runtime: RUNTIME });
  if (migrated.code !== 0) throw new Error(`migrate exited ${migrated.code}: ${migrated.err.slice(-500)}`);
  const store: SoakStore = openSqliteSoakStore(home);
  const f = new Farm({ intakeHomes: [home], dispatchHomes: [home], runtime: RUNTIME, env: {}, store });
  farm = f;
  await f.startAll();
  const load = new Load(rand, (i) => f.port(i), 1, 1);
  const started = Date.now();
  const end = started + DURATION_S * 1000;
  const modes: Mode[] = ["up", "5xx", "up", "slow", "up", "429", "down", "up"];
  let modeAt = 0;
  let nextMode = Date.now() + 2000;
  let nextKillDispatch = Date.now() + 5000 + rand(3000);
  let nextKillIntake = Date.now() + 7000 + rand(4000);
  let nextReload = Date.now() + 9000;
  let nextSample = Date.now();
  const senders = load.run(end);
  while (Date.now() < end) {
    const now = Date.now();
    if (now >= nextMode) {
      modeAt = (modeAt + 1) % modes.length;
      await receiver.setMode(modes[modeAt]);
      nextMode = now + 1500 + rand(2500);
    }
    if (now >= nextKillDispatch) {
      await killAndRestart(f, "dispatch");
      nextKillDispatch = Date.now() + 5000 + rand(4000);
    }
    if (now >= nextKillIntake) {
      await killAndRestart(f, "intake");
      nextKillIntake = Date.now() + 7000 + rand(5000);
    }
    if (now >= nextSample) {
      backlogHighWater = Math.max(backlogHighWater, await store.unfinished());
      nextSample = now + 1000;
    }
    if (now >= nextReload) {
      reloads++;
      writeConfig(home, receiver.port, "sqlite", reloads);
      nextReload = now + 8000 + rand(4000);
    }
    await Bun.sleep(50);
  }
  await senders;
  const sendersStopped = Date.now();
  // Drain: the senders retry what was refused, the receiver comes back for good.
  await receiver.setMode("up");
  await waitFor("every sender's event acked", () => load.retryHeld(), 20_000);
  const drained = await waitFor(
    "every batch delivered or dead",
    async () => (await store.unfinished()) === 0,
    45_000,
  ).then(
    () => true,
    () => false,
  );
  drainS = drained ? Math.round((Date.now() - sendersStopped) / 100) / 10 : null;
  await f.stopAll();
  try {
    return await report(f, store, load, started);
  } finally {
    await store.close();
  }
}

async function report(f: Farm, store: SoakStore, load: Load, started: number): Promise<number> {
  const got = receiver.accepted();
  const facts = await store.facts(f.heldAtKill);
  const v = judge(load.acked, got, facts);
  const failures = v.failures;
  for (const s of f.stderrs) if (s.includes(SECRET)) failures.push("a log line carries the inbound secret");
  const batches = facts.batches;
  const summary = {
    soak: {
      ok: failures.length === 0,
      runtime: RUNTIME,
      seed: SEED,
      duration_s: Math.round((Date.now() - started) / 1000),
      requests: load.requests,
      acked: load.acked.size,
      batches: batches.length,
      delivered: batches.filter((b) => b.state === "delivered").length,
      dead: batches.filter((b) => b.state === "dead").length,
      deliveries_received: got.length,
      backlog_high_water: backlogHighWater,
      drain_s_after_senders_stopped: drainS,
      kills: f.kills,
      leases_held_at_kill: v.leasesHeld,
      leases_recovered: v.leasesRecovered,
      order_breaks: v.orderBreaks,
      duplicates_with_two_contents: v.twoContents,
      lost: v.lost,
      reloads,
      cpu_s: Math.round(f.usage.cpuS * 10) / 10,
      peak_rss_mb: Math.round(f.usage.peakRssKb / 102.4) / 10,
      failures: failures.slice(0, 20),
    },
  };
  console.log(JSON.stringify(summary));
  return failures.length === 0 ? 0 : 1;
}

/** The processes go with the soak, however it ends. */
async function cleanUp(): Promise<void> {
  farm?.killAll();
  receiver.stop();
}

for (const sig of ["SIGINT", "SIGTERM"] as const)
  process.on(sig, () => {
    void cleanUp().finally(() => process.exit(130));
  });

let code = 1;
try {
  code = await main();
} catch (e) {
  console.error(`soak: ${(e as Error).message}`);
} finally {
  await cleanUp();
}
process.exit(code);
