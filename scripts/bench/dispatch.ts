// Delivery from the spool to a local receiver that answers 200 at once.
//
// 1. Drain: a backlog of N single-event sealed batches over K keys (posted through a real
//    `hookspool intake` into a source with max_events = 1, so each batch is sealed in its
//    enqueue transaction), then the intake stops and `hookspool dispatch` starts with the
//    default [dispatch] config (poll_s 1, parallel 4; the http destination's max_inflight 4):
//    the time from its spawn to the last 2xx, and batches/s from the first 2xx to the last.
//    The same backlog drained by `hookspool run`, for comparison.
// 2. Readiness latency: events paced over distinct keys into a source with quiet_s = 0.2, so each
//    batch holds one event and is ready at its last_at + 0.2 s; the latency from then to the
//    receiver's 2xx, p50/p99/max, under `run` and under `intake` + `dispatch`, with the default
//    poll_s (1 s) and with poll_s = 0.1. Also the end-to-end time from the event's own `sent_at`.
//
//   bun scripts/bench/dispatch.ts     BENCH_DISPATCH_N (2000), BENCH_DISPATCH_K (2000), BENCH_BINARY=1
import { load } from "./lib/load.ts";
import { SENDER_SECRET } from "./lib/payload.ts";
import { type Child, hookspoolVerb, listeningPort, main, startHookspool } from "./lib/procs.ts";
import { receiver, type Receiver } from "./lib/receiver.ts";
import { emit, percentile, table } from "./lib/report.ts";
import { BACKLOG_BODY, backlogSource, makeHome } from "./lib/homes.ts";

const N = Number(process.env.BENCH_DISPATCH_N ?? 2000);
const K = Number(process.env.BENCH_DISPATCH_K ?? 2000);
const LAT_EVENTS = Number(process.env.BENCH_LATENCY_EVENTS ?? 300);
const LAT_RATE = 100;
const QUIET_S = 0.2;

function loadSpec(port: number, source: string, n: number, keys: number, concurrency: number, rate?: number) {
  return {
    url: `http://127.0.0.1:${port}/hooks/${source}`,
    concurrency,
    n,
    maxSeconds: 30,
    body: BACKLOG_BODY,
    keys,
    headers: {},
    sign: { header: "X-Bench-Signature", prefix: "sha256=", secret: SENDER_SECRET },
    rate,
  };
}

async function until(what: string, ms: number, ok: () => boolean): Promise<boolean> {
  const end = performance.now() + ms;
  while (!ok()) {
    if (performance.now() > end) {
      console.error(`dispatch bench: gave up waiting for ${what} after ${ms} ms`);
      return false;
    }
    await Bun.sleep(5);
  }
  return true;
}

const distinct = (rx: Receiver) => new Set(rx.arrivals.map((a) => a.batchId)).size;

/** Build the backlog in a fresh home through its intake; returns the home with the intake stopped. */
async function backlog(prefix: string, rx: Receiver): Promise<string> {
  const home = await makeHome(prefix, {
    receiverPort: rx.port,
    noGithub: true,
    extra: backlogSource("backlog", "max_events = 1"),
  });
  const intake = await startHookspool(`${prefix}-intake`, home, ["intake"]);
  const r = await load(loadSpec(await listeningPort(intake), "backlog", N, K, 16), home);
  await intake.stop();
  if (r.ok !== N) throw new Error(`backlog: ${r.ok} of ${N} events accepted (${JSON.stringify(r.statuses)})`);
  const sealed = (
    JSON.parse(
      await hookspoolVerb(home, ["--json", "list", "--state", "sealed", "--limit", String(N + 10)]),
    ) as unknown[]
  ).length;
  if (sealed !== N) throw new Error(`backlog: ${sealed} sealed batches, expected ${N}`);
  return home;
}

interface Drain {
  mode: string;
  delivered: number;
  drainS: number;
  firstS: number;
  rate: number;
  /** TCP connections the receiver saw: a handful means the dispatcher kept them alive. */
  connections: number;
}

async function drain(mode: "dispatch" | "run"): Promise<Drain> {
  const rx = receiver();
  try {
    const home = await backlog(`drain-${mode}`, rx);
    const t0 = Date.now() / 1000;
    const child = await startHookspool(`drain-${mode}`, home, [mode]);
    await until(`${N} batches delivered by ${mode}`, 45_000, () => distinct(rx) >= N || child.proc.exitCode !== null);
    await child.stop();
    const at = rx.arrivals.map((a) => a.at).sort((a, b) => a - b);
    const delivered = distinct(rx);
    const first = at[0] ?? Number.NaN;
    const last = at[at.length - 1] ?? Number.NaN;
    const d: Drain = {
      mode,
      delivered,
      drainS: last - t0,
      firstS: first - t0,
      rate: (at.length - 1) / (last - first),
      connections: rx.connections(),
    };
    const config = {
      mode: `hookspool ${mode}`,
      batches: N,
      keys: K,
      events_per_batch: 1,
      dispatch: "defaults (poll_s 1, parallel 4, max_inflight 4)",
    };
    emit("dispatch", "drain_time", d.drainS, "s", config);
    emit("dispatch", "first_delivery_after_spawn", d.firstS, "s", config);
    emit("dispatch", "batches_per_s", d.rate, "batches/s", config);
    emit("dispatch", "batches_delivered", d.delivered, "batches", config);
    emit("dispatch", "receiver_connections", d.connections, "connections", config);
    return d;
  } finally {
    rx.stop();
  }
}

interface Latency {
  mode: string;
  pollS: number;
  delivered: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
  e2eP50: number;
  e2eP99: number;
  ackP50: number;
  ackP99: number;
}

async function latency(mode: "run" | "intake+dispatch", pollS: number | null): Promise<Latency> {
  const rx = receiver();
  const children: Child[] = [];
  try {
    const dispatch = pollS === null ? "" : `[dispatch]\npoll_s = ${pollS}\n`;
    const extra = `${backlogSource("fresh", `quiet_s = ${QUIET_S}\nmax_s = 5`)}\n${dispatch}`;
    const home = await makeHome(`latency-${mode.replace("+", "-")}`, { receiverPort: rx.port, noGithub: true, extra });
    let port: number;
    if (mode === "run") {
      const run = await startHookspool("latency-run", home, ["run"]);
      children.push(run);
      port = await listeningPort(run);
    } else {
      const intake = await startHookspool("latency-intake", home, ["intake"]);
      const dispatch = await startHookspool("latency-dispatch", home, ["dispatch"]);
      children.push(intake, dispatch);
      port = await listeningPort(intake);
    }
    // A few events first, so both processes have warmed up and the dispatcher has ticked.
    await load({ ...loadSpec(port, "fresh", 20, 20, 2), run: 1 }, home);
    await until("the warm-up batches", 15_000, () => distinct(rx) >= 20);
    rx.arrivals.length = 0;
    const r = await load({ ...loadSpec(port, "fresh", LAT_EVENTS, LAT_EVENTS, 4, LAT_RATE), run: 2 }, home);
    await until(`${r.ok} batches delivered`, 15_000, () => distinct(rx) >= r.ok);
    const lat = rx.arrivals.map((a) => (a.at - (a.lastAt + QUIET_S)) * 1000).sort((a, b) => a - b);
    const e2e = rx.arrivals.map((a) => (a.at - a.sentAt) * 1000).sort((a, b) => a - b);
    const l: Latency = {
      mode,
      pollS: pollS ?? 1,
      delivered: distinct(rx),
      p50: percentile(lat, 0.5),
      p90: percentile(lat, 0.9),
      p99: percentile(lat, 0.99),
      max: lat[lat.length - 1],
      e2eP50: percentile(e2e, 0.5),
      e2eP99: percentile(e2e, 0.99),
      ackP50: r.p50_ms,
      ackP99: r.p99_ms,
    };
    const config = {
      mode: mode === "run" ? "hookspool run" : "hookspool intake + hookspool dispatch",
      poll_s: l.pollS,
      quiet_s: QUIET_S,
      events: LAT_EVENTS,
      events_per_s: LAT_RATE,
      batches: l.delivered,
    };
    emit("dispatch", "ready_to_2xx_p50", l.p50, "ms", config);
    emit("dispatch", "ready_to_2xx_p90", l.p90, "ms", config);
    emit("dispatch", "ready_to_2xx_p99", l.p99, "ms", config);
    emit("dispatch", "ready_to_2xx_max", l.max, "ms", config);
    emit("dispatch", "sent_to_2xx_p50", l.e2eP50, "ms", config);
    emit("dispatch", "sent_to_2xx_p99", l.e2eP99, "ms", config);
    emit("dispatch", "intake_ack_p50", l.ackP50, "ms", config);
    emit("dispatch", "intake_ack_p99", l.ackP99, "ms", config);
    return l;
  } finally {
    for (const c of children.reverse()) await c.stop();
    rx.stop();
  }
}

await main("dispatch", 150, async () => {
  const drains = [await drain("dispatch"), await drain("run")];
  table(
    `dispatch: drain a backlog of ${N} single-event sealed batches over ${K} keys, default [dispatch]`,
    ["process", "delivered", "drain s (from spawn)", "first 2xx s", "batches/s", "connections"],
    drains.map((d) => [`hookspool ${d.mode}`, d.delivered, d.drainS, d.firstS, d.rate, d.connections]),
  );
  const lats: Latency[] = [];
  for (const pollS of [null, 0.1])
    for (const mode of ["run", "intake+dispatch"] as const) lats.push(await latency(mode, pollS));
  table(
    `dispatch: readiness (last_at + quiet_s ${QUIET_S}) ` +
      `to the receiver's 2xx, ${LAT_EVENTS} one-event batches at ${LAT_RATE}/s`,
    [
      "processes",
      "poll_s",
      "batches",
      "p50 ms",
      "p90 ms",
      "p99 ms",
      "max ms",
      "sent->2xx p50",
      "sent->2xx p99",
      "ack p50",
      "ack p99",
    ],
    lats.map((l) => [l.mode, l.pollS, l.delivered, l.p50, l.p90, l.p99, l.max, l.e2eP50, l.e2eP99, l.ackP50, l.ackP99]),
  );
});
