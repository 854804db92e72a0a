// Intake throughput and ack latency: a ~6 KB signed GitHub push (X-Hub-Signature-256 over the
// body, a fresh X-GitHub-Delivery per request) into a [bobbins.github] instance of github.repo
// whose events go to an http destination (a local receiver answering 200), against
// `hookspool intake` alone and `hookspool run`, at 1, 16 and 64 concurrent senders; beside two
// bare baselines on the same pragmas (WAL, synchronous=FULL): A, Bun.serve + bun:sqlite with
// one INSERT+COMMIT per request, and B, the same with group commit. The load generator is a
// separate Bun process (lib/loadgen.ts). Each cell is sent in rounds, the four servers taking
// turns, so drift on a noisy machine hits every server alike; compare the ratios.
//
//   bun scripts/bench/intake.ts     BENCH_INTAKE_N (3000), BENCH_INTAKE_MAX_S (20), BENCH_BINARY=1
import { join } from "node:path";
import { load, type LoadResult, merge } from "./lib/load.ts";
import { SENDER_SECRET, githubPush } from "./lib/payload.ts";
import { type Child, listeningPort, main, procKb, spawnChild, startHookspool, tempHome } from "./lib/procs.ts";
import { receiver } from "./lib/receiver.ts";
import { emit, table } from "./lib/report.ts";
import { makeHome } from "./lib/homes.ts";

const N = Number(process.env.BENCH_INTAKE_N ?? 3000);
const MAX_S = Number(process.env.BENCH_INTAKE_MAX_S ?? 20);
/** All cells together: on a slow machine each cell gets its share of this, so the whole stays bounded. */
const BUDGET_S = 100;
const WARMUP = 200;
/** Each cell is sent in this many rounds, the servers taking turns, so drift on a shared machine hits them alike. */
const ROUNDS = 3;
const CONCURRENCY = [1, 16, 64];

interface Server {
  name: string;
  child: Child;
  port: number;
}

await main("intake", 150, async () => {
  const rx = receiver();
  const body = githubPush();
  const bodyBytes = body.replaceAll("{{SEQ}}", "0".repeat(40)).length;

  const servers: Server[] = [];
  for (const verb of ["intake", "run"]) {
    const home = await makeHome(`intake-${verb}`, { receiverPort: rx.port });
    const child = await startHookspool(`hookspool-${verb}`, home, [verb]);
    servers.push({ name: `hookspool ${verb}`, child, port: await listeningPort(child) });
  }
  // The same `run` with `hookspool watch --json` following every change as it commits: what a
  // watcher costs the intake (it only reads, between commits).
  {
    const home = await makeHome("intake-watched", { receiverPort: rx.port });
    const child = await startHookspool("hookspool-run-watched", home, ["run"]);
    servers.push({ name: "hookspool run + watch", child, port: await listeningPort(child) });
    await startHookspool("hookspool-watch", home, ["--json", "watch"]);
  }
  for (const [mode, label] of [
    ["commit", "baseline A (commit per request)"],
    ["group", "baseline B (group commit)"],
  ]) {
    const dir = tempHome(`intake-${mode}`);
    const child = spawnChild(
      `baseline-${mode}`,
      [process.execPath, join(import.meta.dir, "lib", "baseline.ts"), mode, join(dir, "baseline.db")],
      { logDir: dir },
    );
    servers.push({ name: label, child, port: await listeningPort(child) });
  }

  const work = tempHome("intake-load");
  const rounds = new Map<string, LoadResult[]>();
  const loads = servers.length * CONCURRENCY.length * ROUNDS;
  let run = 0;
  const t0 = performance.now();
  for (const c of CONCURRENCY) {
    for (let round = 0; round < ROUNDS; round++) {
      for (const s of servers) {
        const share = (BUDGET_S - (performance.now() - t0) / 1000) / (loads - run);
        const r = await load(
          {
            url: `http://127.0.0.1:${s.port}/hooks/github`,
            concurrency: c,
            n: Math.ceil(N / ROUNDS),
            maxSeconds: Math.max(1, Math.min(MAX_S / ROUNDS, share)),
            warmup: round === 0 ? WARMUP : Math.min(WARMUP, 2 * c),
            body,
            headers: {
              "User-Agent": "GitHub-Hookshot/bench",
              "X-GitHub-Event": "push",
              "X-GitHub-Hook-ID": "512340001",
            },
            deliveryHeader: "X-GitHub-Delivery",
            sign: { header: "X-Hub-Signature-256", prefix: "sha256=", secret: SENDER_SECRET },
            run: ++run,
            keepLatencies: true,
          },
          work,
        );
        rounds.set(`${s.name}/${c}`, [...(rounds.get(`${s.name}/${c}`) ?? []), r]);
        // run's dispatcher delivers the batches this load sealed by size: let it finish before the next server's turn.
        if (s.name.startsWith("hookspool run")) await Bun.sleep(500);
      }
    }
  }
  const results = new Map<string, LoadResult>();
  for (const c of CONCURRENCY) {
    for (const s of servers) {
      const r = merge(rounds.get(`${s.name}/${c}`) ?? []);
      results.set(`${s.name}/${c}`, r);
      const config = { server: s.name, concurrency: c, requests: r.sent, rounds: ROUNDS, body_bytes: bodyBytes };
      emit("intake", "req_per_s", r.rps, "req/s", config);
      emit("intake", "latency_p50", r.p50_ms, "ms", config);
      emit("intake", "latency_p99", r.p99_ms, "ms", config);
      emit("intake", "latency_max", r.max_ms, "ms", config);
      emit("intake", "non_2xx", r.failed, "requests", config);
    }
  }

  const peak = new Map<string, number>();
  for (const s of servers) {
    peak.set(s.name, procKb(s.child.proc.pid, "VmHWM") / 1024);
    emit("intake", "peak_rss", peak.get(s.name) ?? Number.NaN, "MiB", { server: s.name });
    if (s.child.proc.exitCode !== null || s.child.proc.signalCode)
      throw new Error(`${s.name} exited during the benchmark: ${s.child.log().slice(-800)}`);
  }
  const delivered = rx.arrivals.reduce((n, a) => n + a.count, 0);
  emit("intake", "events_delivered_by_run", delivered, "events", {
    server: "hookspool run",
    batches: rx.arrivals.length,
  });

  const ratioRows: (string | number)[][] = [];
  for (const c of CONCURRENCY) {
    const a = results.get(`baseline A (commit per request)/${c}`);
    const b = results.get(`baseline B (group commit)/${c}`);
    for (const h of ["hookspool intake", "hookspool run", "hookspool run + watch"]) {
      const r = results.get(`${h}/${c}`);
      if (!r || !a || !b) continue;
      const config = { server: h, concurrency: c };
      emit("intake", "req_per_s_ratio_vs_A", r.rps / a.rps, "ratio", config);
      emit("intake", "req_per_s_ratio_vs_B", r.rps / b.rps, "ratio", config);
      emit("intake", "p99_ratio_vs_A", r.p99_ms / a.p99_ms, "ratio", config);
      emit("intake", "p99_ratio_vs_B", r.p99_ms / b.p99_ms, "ratio", config);
      ratioRows.push([h, c, r.rps / a.rps, r.rps / b.rps, r.p99_ms / a.p99_ms, r.p99_ms / b.p99_ms]);
    }
  }

  const rows: (string | number)[][] = [];
  for (const c of CONCURRENCY) {
    for (const s of servers) {
      const r = results.get(`${s.name}/${c}`);
      if (r) rows.push([s.name, c, r.sent, r.rps, r.p50_ms, r.p99_ms, r.max_ms, r.failed]);
    }
  }
  table(
    `intake: ${bodyBytes} B signed GitHub push, ` +
      `${N} requests per cell in ${ROUNDS} rounds (after ${WARMUP} warm-up), WAL + synchronous=FULL`,
    ["server", "senders", "requests", "req/s", "p50 ms", "p99 ms", "max ms", "non-2xx"],
    rows,
  );
  table(
    "intake: hookspool against the baselines (req/s ratio >1 is faster; p99 ratio <1 is better)",
    ["server", "senders", "req/s vs A", "req/s vs B", "p99 vs A", "p99 vs B"],
    ratioRows,
  );
  console.error(
    "A and B neither verify the signature nor route nor log: they are the floor of a durable ack on these pragmas.",
  );
  table(
    "intake: peak RSS of each server",
    ["server", "MiB"],
    servers.map((s) => [s.name, peak.get(s.name) ?? Number.NaN]),
  );
  console.error(
    `run delivered ${delivered} events in ${rx.arrivals.length} batches to the receiver during the benchmark`,
  );
  rx.stop();
});
