// The soak (make soak DURATION=... [BACKEND=postgres]): random bursts over several sources and
// keys into real intake and dispatcher processes, a receiver that flaps (down, slow, 5xx, 429
// with Retry-After, back up), periodic kill -9 of a dispatcher and of an intake, and config
// reloads. On SQLite one intake and one dispatcher share a home; on PostgreSQL (a throwaway
// server) each of --intakes and --dispatchers has a home of its own on one shared database, the
// senders spread over the intakes, and a random one of each kind is killed (of the dispatchers,
// one that holds a lease when one does, so the others' takeover is tested). At the end it asserts,
// reading the database: no acked event lost (each in exactly one batch), no batch delivered with
// two different content_hashes, order per key kept, no batch over its bounds, nothing stuck
// (every batch delivered or dead with a reason), and the leases a killed dispatcher held taken
// over; and it prints one JSON line with the figures, CPU seconds and peak RSS of the hookspool
// processes.
//
//   bun scripts/soak.ts [--duration 60] [--seed 1] [--runtime bun|binary]
//     [--backend sqlite|postgres] [--intakes 1] [--dispatchers 1] [--senders N]
import { seededRng } from "../src/clock.ts";
import type { Runtime } from "../test/helpers/proc.ts";
import { runHookspool, waitFor } from "../test/helpers/proc.ts";
import { tempDir } from "../test/helpers/tmp.ts";
import { judge, type SoakStore } from "./soak/checks.ts";
import { type Backend, PG_URL_ENV, SECRET, writeConfig, writeHome } from "./soak/config.ts";
import { Farm, type Kind } from "./soak/farm.ts";
import { Load } from "./soak/load.ts";
import { PG_PASSWORD, type SoakPg, startSoakPg } from "./soak/pg.ts";
import { FlappingReceiver, type Mode } from "./soak/receiver.ts";
import { openSqliteSoakStore } from "./soak/sqlite.ts";

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? (process.argv[i + 1] ?? fallback) : fallback;
}

/** A usage mistake: one line, exit 2. */
function refuse(why: string): never {
  console.error(`soak: ${why}`);
  process.exit(2);
}

function count(name: string, fallback: number): number {
  const n = Number(arg(name, String(fallback)));
  if (!Number.isInteger(n) || n < 1) refuse(`--${name} must be a whole number of at least 1`);
  return n;
}

const DURATION_S = Number(arg("duration", process.env.DURATION ?? "60"));
const SEED = Number(arg("seed", String(Date.now() % 100000)));
const rng = seededRng(SEED);
const RUNTIME = arg("runtime", "bun") as Runtime;
const BACKEND = arg("backend", "sqlite") as Backend;
if (BACKEND !== "sqlite" && BACKEND !== "postgres") refuse(`--backend must be sqlite or postgres, not ${BACKEND}`);
const INTAKES = count("intakes", 1);
const DISPATCHERS = count("dispatchers", 1);
if (BACKEND === "sqlite" && (INTAKES > 1 || DISPATCHERS > 1))
  refuse("--intakes and --dispatchers above 1 need --backend postgres (a SQLite spool has one dispatcher)");
const SENDERS = count("senders", INTAKES);
const rand = (n: number) => Math.floor(rng.next() * n);

const receiver = new FlappingReceiver();
let pg: SoakPg | null = null;
let farm: Farm | null = null;
let reloads = 0;
let backlogHighWater = 0;
/** How long the backlog took to drain after the senders stopped (null: not in 45 s). */
let drainS: number | null = null;

/** The homes: one on SQLite; on PostgreSQL one per process, as on separate hosts. */
function homes(): { intake: string[]; dispatch: string[] } {
  if (BACKEND === "sqlite") {
    const home = tempDir("hookspool-soak-");
    return { intake: [home], dispatch: [home] };
  }
  const make = (kind: Kind, n: number) => Array.from({ length: n }, (_, i) => tempDir(`hookspool-soak-${kind}-${i}-`));
  return { intake: make("intake", INTAKES), dispatch: make("dispatch", DISPATCHERS) };
}

/** kill -9 of a random process of the kind (a dispatcher holding a lease, when one does), then its restart. */
async function killAndRestart(f: Farm, kind: Kind): Promise<void> {
  const holders = kind === "dispatch" ? await f.leaseHolders() : [];
  const i = holders.length > 0 ? holders[rand(holders.length)] : rand(f.count(kind));
  await f.kill9(kind, i);
  await Bun.sleep(200 + rand(600));
  await f.start(kind, i);
}

async function main(): Promise<number> {
  const h = homes();
  const all = [...new Set([...h.intake, ...h.dispatch])];
  for (const home of all) writeHome(home, receiver.port, BACKEND, reloads);
  if (BACKEND === "postgres") pg = await startSoakPg();
  const env: Record<string, string> = pg ? { [PG_URL_ENV]: pg.url } : {};
  const migrated = await runHookspool(h.intake[0], ["migrate"], { runtime: RUNTIME, env });
  if (migrated.code !== 0) throw new Error(`migrate exited ${migrated.code}: ${migrated.err.slice(-500)}`);
  const store: SoakStore = pg ? pg.store : openSqliteSoakStore(h.intake[0]);
  const f = new Farm({ intakeHomes: h.intake, dispatchHomes: h.dispatch, runtime: RUNTIME, env, store });
  farm = f;
  await f.startAll();
  const load = new Load(rand, (i) => f.port(i), INTAKES, SENDERS);
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
      for (const home of all) writeConfig(home, receiver.port, BACKEND, reloads);
      nextReload = now + 8000 + rand(4000);
    }
    await Bun.sleep(50);
  }
  await senders;
  const sendersStopped = Date.now();
  // Drain: the senders retry what was refused, the receiver comes back for good.
  await receiver.setMode("up");
  await waitFor("every sender's event acked", () => load.retryHeld(), 20_000);
  // Counted every 0.1 s or so, not waitFor's every 25 ms: on PostgreSQL the count is the server's
  // work too, and the drain is what is being measured.
  const drained = await waitFor(
    "every batch delivered or dead",
    async () => (await Bun.sleep(100), (await store.unfinished()) === 0),
    45_000,
  ).then(
    () => true,
    () => false,
  );
  drainS = drained ? Math.round((Date.now() - sendersStopped) / 100) / 10 : null;
  // Not drained: what the oldest unfinished batches look like, while the processes still run.
  if (!drained) for (const line of await store.stuckSample()) console.error(`soak: stuck: ${line}`);
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
  for (const s of f.stderrs) {
    if (s.includes(SECRET)) failures.push("a log line carries the inbound secret");
    if (pg && s.includes(PG_PASSWORD)) failures.push("a log line carries the database password");
    if (pg && s.includes(pg.socketDir)) failures.push("a log line carries the database URL");
  }
  const batches = facts.batches;
  const summary = {
    soak: {
      ok: failures.length === 0,
      runtime: RUNTIME,
      backend: BACKEND,
      intakes: INTAKES,
      dispatchers: DISPATCHERS,
      senders: SENDERS,
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
      undelivered: v.undelivered,
      reloads,
      cpu_s: Math.round(f.usage.cpuS * 10) / 10,
      peak_rss_mb: Math.round(f.usage.peakRssKb / 102.4) / 10,
      server_cpu_s: pg ? Math.round(pg.serverCpuS() * 10) / 10 : null,
      failures: failures.slice(0, 20),
    },
  };
  console.log(JSON.stringify(summary));
  return failures.length === 0 ? 0 : 1;
}

/** The processes and the server go with the soak, however it ends. */
async function cleanUp(): Promise<void> {
  farm?.killAll();
  receiver.stop();
  await pg?.stop();
  pg = null;
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
