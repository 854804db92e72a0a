// The soak (make soak DURATION=...): random bursts over several sources and keys into a
// real intake and dispatcher (two processes), a receiver that flaps (down, slow, 5xx, 429 with
// Retry-After, back up), periodic kill -9 of the dispatcher and of the intake, and config
// reloads. At the end it asserts: no acked event lost, no batch delivered with two different
// content_hashes, no batch over its bounds, nothing stuck (every batch delivered or dead with a
// reason); and it prints CPU seconds and peak RSS of the hookspool processes.
//
//   bun scripts/soak.ts [--duration 60] [--seed 1] [--runtime bun|binary]
import { Database } from "bun:sqlite";
import { createHmac } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { seededRng } from "../src/clock.ts";
import { type Hookspool, type Runtime, startHookspool, waitFor } from "../test/helpers/proc.ts";
import { Receiver } from "../test/helpers/receiver.ts";
import { tempDir } from "../test/helpers/tmp.ts";

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? (process.argv[i + 1] ?? fallback) : fallback;
}

const DURATION_S = Number(arg("duration", process.env.DURATION ?? "60"));
const rng = seededRng(Number(arg("seed", String(Date.now() % 100000))));
const RUNTIME = arg("runtime", "bun") as Runtime;
const SECRET = "soak-inbound-secret";
/** Every soak source's template line: the signature the load sends, the fields it keys on. */
const TEMPLATE =
  'template = { scheme = "hmac-sha256-hex", header = "X-Sig", prefix = "sha256=", key = "key", dedup = "id", ' +
  'event_type = "type" }';
const SOURCES = {
  a: { quiet: 0.3, max: 1, maxEvents: 10, maxBytes: 786432 },
  b: { quiet: 0, max: 0, maxEvents: 5, maxBytes: 786432 },
  c: { quiet: 0.5, max: 2, maxEvents: 500, maxBytes: 2000 },
} as const;
type Src = keyof typeof SOURCES;
const rand = (n: number) => Math.floor(rng.next() * n);

// ---- the flapping receiver ------------------------------------------------------------------

type Mode = "up" | "down" | "slow" | "5xx" | "429";
let mode: Mode = "up";
interface Doc {
  batch_id: number;
  content_hash: string;
  count: number;
  events: { id: string; key: string; seq: number; pad: string }[];
}
// Unsigned: the soak is about delivery, not signatures. A slow answer outlives the
// destination's timeout_s (1.5 s), so the dispatcher gives up on it: abandoned, not received.
const receiver = new Receiver<Doc>({
  answer: async () => {
    if (mode === "5xx") return 502;
    if (mode === "429") return { status: 429, headers: { "Retry-After": "1" } };
    if (mode === "slow") await Bun.sleep(2500);
    return 200;
  },
});
const port = receiver.port;

/** The batches the receiver took, as the checks read them. */
function received(): { batch: number; hash: string; ids: string[]; bytes: number }[] {
  return receiver.accepted().map(({ doc }) => ({
    batch: doc.batch_id,
    hash: doc.content_hash,
    ids: doc.events.map((e) => e.id),
    bytes: doc.events.reduce((s, e) => s + JSON.stringify(e).length, 0),
  }));
}

async function setMode(m: Mode): Promise<void> {
  if (m === "down") receiver.stop();
  else {
    await waitFor("the receiver to listen again", () => {
      try {
        receiver.listen();
        return true;
      } catch {
        return false;
      }
    });
  }
  mode = m;
}

// ---- the home and the two processes ---------------------------------------------------------

const home = tempDir("hookspool-soak-");
writeFileSync(join(home, "secret"), SECRET, { mode: 0o600 });
let reloads = 0;

function writeConfig(): void {
  const sources = Object.entries(SOURCES)
    .map(
      ([name, w]) => `[sources.${name}]
${TEMPLATE}
secrets.secret = { file = "${join(home, "secret")}" }
quiet_s = ${w.quiet}
max_s = ${w.max}
max_events = ${w.maxEvents}
max_bytes = ${w.maxBytes}
max_body_bytes = ${Math.min(w.maxBytes, 786432)}
action = "receiver"
`,
    )
    .join("\n");
  writeFileSync(
    join(home, "config.toml"),
    `# reload ${reloads}
[intake]
listen = "127.0.0.1:0"

[dispatch]
poll_s = 0.05
heartbeat_s = 1
parallel = 4
lease_grace_s = 6
backoff_base_s = 0.2
backoff_cap_s = 1
breaker = { trip_after = 3, cooldown_initial_s = 0.5, cooldown_max_s = 2 }

${sources}
[destinations.receiver]
type = "http"
url = "http://127.0.0.1:${port}/hook"
allow_insecure = true
unsigned = true
timeout_s = 1.5
max_inflight = 3
`,
  );
}

interface Usage {
  cpuS: number;
  peakRssKb: number;
}
const usage: Usage = { cpuS: 0, peakRssKb: 0 };
const TICKS = 100; // CLK_TCK on Linux

/** Read a live process's CPU time and peak RSS from /proc before it goes away. */
function account(h: Hookspool | null): void {
  if (!h) return;
  try {
    const stat = readFileSync(`/proc/${h.proc.pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    usage.cpuS += (Number(fields[11]) + Number(fields[12])) / TICKS;
    const hwm = /VmHWM:\s+(\d+)/.exec(readFileSync(`/proc/${h.proc.pid}/status`, "utf8"));
    if (hwm) usage.peakRssKb = Math.max(usage.peakRssKb, Number(hwm[1]));
  } catch {
    // already gone
  }
}

let intake: Hookspool | null = null;
let dispatch: Hookspool | null = null;
let intakePort = 0;
const kills = { intake: 0, dispatch: 0 };
const stderrs: string[] = [];

async function startIntake(): Promise<void> {
  intake = await startHookspool(home, ["intake"], { runtime: RUNTIME });
  intakePort = await intake.port();
}

async function startDispatch(): Promise<void> {
  dispatch = await startHookspool(home, ["dispatch"], { runtime: RUNTIME });
  // Its first tick's heartbeat names its pid: from then on it holds the lock and delivers.
  const pid = dispatch.proc.pid;
  await waitFor("the dispatcher's first heartbeat", () => {
    const db = new Database(join(home, "spool.db"), { readonly: true });
    try {
      return (
        String(
          (db.query("SELECT value FROM meta WHERE key = 'dispatcher_pid'").get() as { value: unknown } | null)?.value,
        ) === String(pid)
      );
    } finally {
      db.close();
    }
  });
}

async function kill9(which: "intake" | "dispatch"): Promise<void> {
  const h = which === "intake" ? intake : dispatch;
  account(h);
  h?.kill("SIGKILL");
  await h?.exited;
  stderrs.push(h?.stderr() ?? "");
  kills[which]++;
}

// ---- the senders ----------------------------------------------------------------------------

let nextId = 0;
const seq = new Map<string, number>();
const acked = new Set<string>();
const pending: { src: Src; body: string; id: string }[] = [];
let requests = 0;

function newEvent(): { src: Src; body: string; id: string } {
  const src = (["a", "b", "c"] as const)[rand(3)];
  const key = `k${rand(5)}`;
  const s = (seq.get(`${src}/${key}`) ?? 0) + 1;
  seq.set(`${src}/${key}`, s);
  const id = `e${++nextId}`;
  return { src, id, body: JSON.stringify({ id, key, seq: s, type: "tick", pad: "x".repeat(10 + rand(600)) }) };
}

async function send(e: { src: Src; body: string; id: string }): Promise<boolean> {
  requests++;
  try {
    const res = await fetch(`http://127.0.0.1:${intakePort}/hooks/${e.src}`, {
      method: "POST",
      body: e.body,
      headers: {
        "Content-Type": "application/json",
        "X-Sig": `sha256=${createHmac("sha256", SECRET).update(e.body).digest("hex")}`,
      },
      signal: AbortSignal.timeout(3000),
    });
    await res.arrayBuffer();
    if (res.status === 202 || res.status === 200) {
      acked.add(e.id);
      return true;
    }
  } catch {
    // intake down (killed): the sender holds the event and retries, as a real sender would
  }
  return false;
}

async function sendBurst(): Promise<void> {
  const retry = pending.splice(0);
  for (const e of retry) if (!(await send(e))) pending.push(e);
  const n = 1 + rand(8);
  for (let i = 0; i < n; i++) {
    const e = newEvent();
    if (!(await send(e))) pending.push(e);
  }
}

// ---- the run --------------------------------------------------------------------------------

async function main(): Promise<number> {
  writeConfig();
  await startHookspool(home, ["migrate"], { runtime: RUNTIME }).then((m) => m.exited);
  await startIntake();
  await startDispatch();
  const started = Date.now();
  const end = started + DURATION_S * 1000;
  const modes: Mode[] = ["up", "5xx", "up", "slow", "up", "429", "down", "up"];
  let modeAt = 0;
  let nextMode = Date.now() + 2000;
  let nextKillDispatch = Date.now() + 5000 + rand(3000);
  let nextKillIntake = Date.now() + 7000 + rand(4000);
  let nextReload = Date.now() + 9000;
  let nextSample = Date.now();
  const watch = new Database(join(home, "spool.db"), { readonly: true });
  // The senders run on their own, so requests land while the intake is dead or restarting.
  const senders = (async () => {
    while (Date.now() < end) {
      await sendBurst();
      await Bun.sleep(20 + rand(120));
    }
  })();
  while (Date.now() < end) {
    const now = Date.now();
    if (now >= nextMode) {
      modeAt = (modeAt + 1) % modes.length;
      await setMode(modes[modeAt]);
      nextMode = now + 1500 + rand(2500);
    }
    if (now >= nextKillDispatch) {
      await kill9("dispatch");
      await Bun.sleep(200 + rand(600));
      await startDispatch();
      nextKillDispatch = Date.now() + 5000 + rand(4000);
    }
    if (now >= nextKillIntake) {
      await kill9("intake");
      await Bun.sleep(200 + rand(600));
      await startIntake();
      nextKillIntake = Date.now() + 7000 + rand(5000);
    }
    if (now >= nextSample) {
      backlogHighWater = Math.max(backlogHighWater, unfinished(watch));
      nextSample = now + 1000;
    }
    if (now >= nextReload) {
      reloads++;
      writeConfig();
      nextReload = now + 8000 + rand(4000);
    }
    await Bun.sleep(50);
  }
  await senders;
  watch.close();
  const sendersStopped = Date.now();
  // Drain: the senders retry what was refused, the receiver comes back for good.
  await setMode("up");
  await waitFor(
    "every sender's event acked",
    async () => {
      const retry = pending.splice(0);
      for (const e of retry) if (!(await send(e))) pending.push(e);
      return pending.length === 0;
    },
    20_000,
  );
  const db = new Database(join(home, "spool.db"), { readonly: true });
  try {
    const drained = await waitFor("every batch delivered or dead", () => unfinished(db) === 0, 45_000).then(
      () => true,
      () => false,
    );
    drainS = drained ? Math.round((Date.now() - sendersStopped) / 100) / 10 : null;
    return report(db, started);
  } finally {
    db.close();
    for (const h of [intake, dispatch]) {
      account(h);
      h?.kill("SIGTERM");
      await h?.exited;
      stderrs.push(h?.stderr() ?? "");
    }
    receiver.stop();
  }
}

/** Batches not yet delivered, dead or dropped: the backlog. */
function unfinished(db: Database): number {
  return (
    db.query("SELECT COUNT(*) AS n FROM batches WHERE state NOT IN ('delivered', 'dead', 'dropped')").get() as {
      n: number;
    }
  ).n;
}

/**
 * The largest backlog seen (sampled each second), and how long it took to drain after the senders stopped (null: not in
 * 45 s).
 */
let backlogHighWater = 0;
let drainS: number | null = null;

function report(db: Database, started: number): number {
  const failures: string[] = [];
  const got = received();
  const deliveredIds = new Set(got.flatMap((r) => r.ids));
  const deadIds = new Set(
    (
      db
        .query(
          "SELECT e.payload FROM events e JOIN batches b ON b.id = e.batch_id " +
            "WHERE b.state = 'dead' AND e.payload IS NOT NULL",
        )
        .all() as { payload: string }[]
    ).map((r) => (JSON.parse(r.payload) as { id: string }).id),
  );
  for (const id of acked)
    if (!deliveredIds.has(id) && !deadIds.has(id)) failures.push(`event ${id} was acked but never delivered nor dead`);
  const hashes = new Map<number, Set<string>>();
  for (const r of got) hashes.set(r.batch, (hashes.get(r.batch) ?? new Set()).add(r.hash));
  for (const [b, h] of hashes)
    if (h.size > 1) failures.push(`batch ${b} was delivered with ${h.size} different content_hashes`);
  const batches = db.query("SELECT id, source, state, count, bytes, last_error FROM batches").all() as {
    id: number;
    source: Src;
    state: string;
    count: number;
    bytes: number;
    last_error: string | null;
  }[];
  const maxEvent = 700;
  for (const b of batches) {
    const w = SOURCES[b.source];
    if (!w) continue;
    if (b.count > w.maxEvents) failures.push(`batch ${b.id} has ${b.count} events, over max_events ${w.maxEvents}`);
    if (b.bytes > w.maxBytes + maxEvent)
      failures.push(`batch ${b.id} has ${b.bytes} bytes, over max_bytes ${w.maxBytes} plus one event`);
    if (!["delivered", "dead", "dropped"].includes(b.state)) failures.push(`batch ${b.id} is stuck in ${b.state}`);
    if (b.state === "dead" && !b.last_error) failures.push(`batch ${b.id} is dead without a reason`);
  }
  const qc = (db.query("PRAGMA quick_check").get() as { quick_check: string }).quick_check;
  if (qc !== "ok") failures.push(`quick_check: ${qc}`);
  for (const s of stderrs) if (s.includes(SECRET)) failures.push("a log line carries the inbound secret");
  const summary = {
    soak: {
      ok: failures.length === 0,
      runtime: RUNTIME,
      duration_s: Math.round((Date.now() - started) / 1000),
      requests,
      acked: acked.size,
      batches: batches.length,
      delivered: batches.filter((b) => b.state === "delivered").length,
      dead: batches.filter((b) => b.state === "dead").length,
      deliveries_received: got.length,
      backlog_high_water: backlogHighWater,
      drain_s_after_senders_stopped: drainS,
      kills,
      reloads,
      cpu_s: Math.round(usage.cpuS * 10) / 10,
      peak_rss_mb: Math.round(usage.peakRssKb / 102.4) / 10,
      failures: failures.slice(0, 20),
    },
  };
  console.log(JSON.stringify(summary));
  return failures.length === 0 ? 0 : 1;
}

process.exit(await main());
