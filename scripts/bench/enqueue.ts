// Store enqueue throughput and latency on a real WAL file with synchronous=FULL, against a
// baseline that does the least a durable spool can: one INSERT per BEGIN IMMEDIATE on the same
// pragmas. Prints JSON lines; compare the ratio, not absolute figures.
import { Database } from "bun:sqlite";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openSpool } from "../../src/store/sqlite/db.ts";
import { enqueue } from "../../src/store/sqlite/enqueue.ts";
import { migrate } from "../../src/store/sqlite/migrate.ts";

const N = Number(process.env.BENCH_N ?? 2000);
const payload = JSON.stringify({ action: "opened", repository: { full_name: "o/r" }, body: "x".repeat(600) });

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))];
}

function measure(name: string, op: (i: number) => void): { ops: number; p50: number; p99: number } {
  const lat: number[] = [];
  const t0 = performance.now();
  for (let i = 0; i < N; i++) {
    const s = performance.now();
    op(i);
    lat.push(performance.now() - s);
  }
  const total = (performance.now() - t0) / 1000;
  lat.sort((a, b) => a - b);
  const r = { ops: N / total, p50: percentile(lat, 0.5), p99: percentile(lat, 0.99) };
  console.log(
    JSON.stringify({
      bench: name,
      n: N,
      ops_per_s: Math.round(r.ops),
      p50_ms: +r.p50.toFixed(3),
      p99_ms: +r.p99.toFixed(3),
    }),
  );
  return r;
}

const dir = mkdtempSync(join(tmpdir(), "hookspool-bench-"));
try {
  const base = new Database(join(dir, "baseline.db"), { create: true, strict: true });
  base.run("PRAGMA journal_mode = WAL");
  base.run("PRAGMA synchronous = FULL");
  base.run("CREATE TABLE events (id INTEGER PRIMARY KEY, k TEXT, payload TEXT, received_at REAL)");
  const ins = base.query("INSERT INTO events (k, payload, received_at) VALUES (?, ?, ?)");
  const tx = base.transaction((i: number) => ins.run(`k${i % 16}`, payload, i));
  const b = measure("baseline.insert_per_txn", (i) => tx.immediate(i));
  base.close();

  const spool = openSpool(join(dir, "spool.db"), { create: true });
  migrate(spool);
  const w = { quiet_s: 60, max_s: 300, max_events: 500, max_bytes: 786432 };
  const h = measure("store.enqueue", (i) =>
    enqueue(spool, {
      source: "github",
      key: `o/r:${i % 16}`,
      eventType: "push",
      dedupId: `delivery-${i}`,
      payload,
      raw: null,
      headers: { "X-GitHub-Event": "push" },
      copies: [{ route: "github", destination: "hermes:github", tee: false, window: w }],
      dedupWindowS: 86400,
    }),
  );
  spool.close();
  console.log(
    JSON.stringify({
      bench: "store.enqueue_vs_baseline",
      ops_ratio: +(h.ops / b.ops).toFixed(3),
      p99_ratio: +(h.p99 / b.p99).toFixed(3),
    }),
  );
} finally {
  rmSync(dir, { recursive: true, force: true });
}
