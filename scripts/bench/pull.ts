// Pull against push on the same machine: one backlog of N single-event sealed batches over K keys
// (posted through a real `hookspool intake` into a source with max_events = 1, as dispatch.ts
// builds its own), delivered to a local receiver that answers 200 at once, two ways in one run:
//
// - push: `hookspool run` on that home, the source's action an http destination (unsigned,
//   allow_insecure) to the receiver;
// - pull: the source's action is pull:bench. That home's `hookspool run` starts and listens
//   first (its dispatcher never pushes a pull destination's batches); then a second home's
//   `hookspool run` starts, whose pull source leases from it (max PULL_MAX_LEASE, wait_s 1),
//   commits each leased batch's event there (max_events = 1: one batch each), acks it upstream,
//   and delivers it through the same http destination to the same receiver.
//
// Figures: each way's time from the spawn of the process that delivers (push: its run; pull: the
// private run) to the receiver's last 2xx, and batches/s over it; pull / push, the one ratio
// that means anything on a shared machine (both from this run); for pull, the public side's
// batches acked per second (their delivered_at, read back with `list`), its lease and ack
// requests (its log's lines) and batches per lease; the CPU seconds of each process (/proc), the
// public run's counted from the private run's spawn.
//
//   bun scripts/bench/pull.ts     BENCH_PULL_N (2000), BENCH_PULL_K (2000), BENCH_BINARY=1
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { PULL_MAX_LEASE } from "../../src/intake/pull-wire.ts";
import { BACKLOG_BODY, BENCH_TEMPLATE, makeHome } from "./lib/homes.ts";
import { load } from "./lib/load.ts";
import { SENDER_SECRET } from "./lib/payload.ts";
import { type Child, hookspoolVerb, listeningPort, main, procCpuS, startHookspool } from "./lib/procs.ts";
import { receiver, type Receiver } from "./lib/receiver.ts";
import { emit, table } from "./lib/report.ts";

const N = Number(process.env.BENCH_PULL_N ?? 2000);
const K = Number(process.env.BENCH_PULL_K ?? 2000);
const WAIT_S = 1;
const TOKEN = "bench-pull-token-0123456789abcdef";
const DRAIN_MS = 45_000;

/** The backlog's source: signed as the load generator signs, one event a batch, to `action`. */
const backlogSource = (action: string) => `[sources.backlog]
${BENCH_TEMPLATE}
secrets.secret = { file = "secrets/github" }
max_events = 1
action = "${action}"
`;

const PULL_DESTINATION = `[destinations."pull:bench"]
token = { file = "secrets/pull" }
`;

/** The private side: a pull source from the public run at `port`, its events to the receiver. */
const pullSource = (port: number) => `[sources.office]
max_events = 1
action = "receiver"

[sources.office.pull]
url = "http://127.0.0.1:${port}"
destination = "bench"
token = { file = "secrets/pull" }
wait_s = ${WAIT_S}
max = ${PULL_MAX_LEASE}
allow_insecure = true
consumer = "bench"
`;

/**
 * makeHome's receiver destination without a signature on both ways, and the pull token beside the
 * other secrets. Its reference is written absolute: a pull token's relative file is read from the
 * process's working directory, not config.toml's (the config's loader anchors other secrets only).
 */
async function prepare(home: string): Promise<void> {
  const file = join(home, "config.toml");
  const token = join(home, "secrets", "pull");
  const text = await Bun.file(file).text();
  await Bun.write(
    file,
    text
      .replace('secret = { file = "secrets/receiver" }', "unsigned = true")
      .replace('token = { file = "secrets/pull" }', `token = { file = ${JSON.stringify(token)} }`),
  );
  writeFileSync(token, TOKEN, { mode: 0o600 });
}

/** A home holding the backlog, sealed, with its intake stopped. */
async function backlog(prefix: string, rx: Receiver, action: string, extra = ""): Promise<string> {
  const home = await makeHome(prefix, { receiverPort: rx.port, noGithub: true, extra: backlogSource(action) + extra });
  await prepare(home);
  const intake = await startHookspool(`${prefix}-intake`, home, ["intake"]);
  const r = await load(
    {
      url: `http://127.0.0.1:${await listeningPort(intake)}/hooks/backlog`,
      concurrency: 16,
      n: N,
      maxSeconds: 30,
      body: BACKLOG_BODY,
      keys: K,
      headers: {},
      sign: { header: "X-Bench-Signature", prefix: "sha256=", secret: SENDER_SECRET },
    },
    home,
  );
  await intake.stop();
  if (r.ok !== N) throw new Error(`backlog: ${r.ok} of ${N} events accepted (${JSON.stringify(r.statuses)})`);
  const sealed = (await batches(home, "sealed")).length;
  if (sealed !== N) throw new Error(`backlog: ${sealed} sealed batches, expected ${N}`);
  return home;
}

async function batches(home: string, state: string): Promise<{ delivered_at: number | null }[]> {
  return JSON.parse(await hookspoolVerb(home, ["--json", "list", "--state", state, "--limit", String(N + 10)]));
}

const distinct = (rx: Receiver) => new Set(rx.arrivals.map((a) => a.batchId)).size;

/** Wait until the receiver has seen N batches, or one of `children` has exited, or DRAIN_MS has passed. */
async function drained(rx: Receiver, children: Child[]): Promise<void> {
  const end = performance.now() + DRAIN_MS;
  while (distinct(rx) < N) {
    const gone = children.find((c) => c.proc.exitCode !== null || c.proc.signalCode);
    if (gone) throw new Error(`${gone.name} exited before the drain's end: ${gone.log().slice(-800)}`);
    if (performance.now() > end) throw new Error(`${distinct(rx)} of ${N} batches delivered in ${DRAIN_MS} ms`);
    await Bun.sleep(5);
  }
}

interface Way {
  way: "push" | "pull";
  delivered: number;
  /** From the spawn of the process that delivers to the receiver's last 2xx. */
  drainS: number;
  firstS: number;
  rate: number;
  /** CPU seconds by process, over the drain. */
  cpu: Record<string, number>;
  /** pull: the public side's acks, from the same t0 to its last delivered_at. */
  ackedRate?: number;
  leases?: number;
  acks?: number;
}

function timesOf(rx: Receiver, t0: number) {
  const at = rx.arrivals.map((a) => a.at).sort((a, b) => a - b);
  const last = at[at.length - 1] ?? Number.NaN;
  return { delivered: distinct(rx), drainS: last - t0, firstS: (at[0] ?? Number.NaN) - t0, rate: N / (last - t0) };
}

async function push(): Promise<Way> {
  const rx = receiver();
  try {
    const home = await backlog("pull-push", rx, "receiver");
    const t0 = Date.now() / 1000;
    const run = await startHookspool("pull-push-run", home, ["run"]);
    await drained(rx, [run]);
    const cpu = { "hookspool run": procCpuS(run.proc.pid) };
    await run.stop();
    return { way: "push", ...timesOf(rx, t0), cpu };
  } finally {
    rx.stop();
  }
}

async function pull(): Promise<Way> {
  const rx = receiver();
  try {
    const pub = await backlog("pull-public", rx, "pull:bench", PULL_DESTINATION);
    const upstream = await startHookspool("pull-public-run", pub, ["run"]);
    const port = await listeningPort(upstream);
    const priv = await makeHome("pull-private", { receiverPort: rx.port, noGithub: true, extra: pullSource(port) });
    await prepare(priv);
    const cpu0 = procCpuS(upstream.proc.pid);
    const t0 = Date.now() / 1000;
    const down = await startHookspool("pull-private-run", priv, ["run"]);
    await drained(rx, [upstream, down]);
    const cpu = {
      "public hookspool run": procCpuS(upstream.proc.pid) - cpu0,
      "private hookspool run": procCpuS(down.proc.pid),
    };
    await down.stop();
    await upstream.stop();
    const acked = (await batches(pub, "delivered")).map((b) => b.delivered_at ?? Number.NaN);
    if (acked.length !== N) throw new Error(`public side: ${acked.length} of ${N} batches delivered (acked)`);
    const log = upstream.log();
    return {
      way: "pull",
      ...timesOf(rx, t0),
      cpu,
      ackedRate: N / (Math.max(...acked) - t0),
      leases: log.match(/pull lease/g)?.length ?? 0,
      acks: log.match(/pull ack/g)?.length ?? 0,
    };
  } finally {
    rx.stop();
  }
}

await main("pull", 120, async () => {
  const ways = [await push(), await pull()];
  const config = { batches: N, keys: K, events_per_batch: 1, receiver: "http, unsigned, answers 200 at once" };
  const modes = {
    push: { ...config, mode: "push: hookspool run -> http" },
    pull: {
      ...config,
      mode: "pull: public hookspool run -> pull:bench <- private hookspool run -> http",
      max: PULL_MAX_LEASE,
      wait_s: WAIT_S,
    },
  };
  for (const w of ways) {
    const c = modes[w.way];
    emit("pull", "drain_time", w.drainS, "s", c);
    emit("pull", "first_delivery_after_spawn", w.firstS, "s", c);
    emit("pull", "batches_per_s", w.rate, "batches/s", c);
    emit("pull", "batches_delivered", w.delivered, "batches", c);
    for (const [process, s] of Object.entries(w.cpu)) emit("pull", "cpu_s", s, "s", { ...c, process });
  }
  const [p, q] = ways;
  emit("pull", "public_acked_per_s", q.ackedRate ?? Number.NaN, "batches/s", modes.pull);
  emit("pull", "lease_requests", q.leases ?? Number.NaN, "requests", modes.pull);
  emit("pull", "ack_requests", q.acks ?? Number.NaN, "requests", modes.pull);
  emit("pull", "batches_per_lease", N / Math.max(1, q.leases ?? 0), "batches", modes.pull);
  emit("pull", "pull_vs_push", q.rate / p.rate, "x", { ...config, max: PULL_MAX_LEASE, wait_s: WAIT_S });
  const cpuSum = (w: Way) => Object.values(w.cpu).reduce((a, b) => a + b, 0);
  table(
    `pull: ${N} single-event sealed batches over ${K} keys to a receiver that answers 200, push against pull`,
    ["way", "delivered", "drain s (from spawn)", "first 2xx s", "batches/s", "acked/s upstream", "CPU s (all)"],
    ways.map((w) => [w.way, w.delivered, w.drainS, w.firstS, w.rate, w.ackedRate ?? "-", cpuSum(w)]),
  );
  console.error(
    `pull / push: ${(q.rate / p.rate).toFixed(2)}x; ${q.leases} lease and ${q.acks} ack requests upstream ` +
      `(${(N / Math.max(1, q.leases ?? 0)).toFixed(1)} batches a lease)`,
  );
});
