// make bench: every benchmark in turn, the store's first. Each prints JSON lines on stdout (one
// figure each) and a human table on stderr; a benchmark that fails is named and the others still
// run. BENCH_BINARY=1 runs the compiled dist/hookspool instead of `bun src/main.ts`. Names on the
// command line run only those (`bun scripts/bench/run.ts postgres.ts`). postgres.ts comes after
// the SQLite ones and measures SQLite again beside PostgreSQL; it prints one `skipped` line when
// PostgreSQL is not installed.
import { join } from "node:path";

const ALL = [
  "enqueue.ts",
  "history.ts",
  "where.ts",
  "intake.ts",
  "lock.ts",
  "dispatch.ts",
  "coalesce.ts",
  "pacing.ts",
  "outcomes.ts",
  "pull.ts",
  "bodies.ts",
  "footprint.ts",
  "postgres.ts",
];
const wanted = process.argv.slice(2).map((a) => (a.endsWith(".ts") ? a : `${a}.ts`));
const unknown = wanted.filter((w) => !ALL.includes(w));
if (unknown.length) {
  console.error(`unknown benchmark ${unknown.join(", ")}; one of ${ALL.join(", ")}`);
  process.exit(2);
}
const BENCHES = wanted.length ? wanted : ALL;

const dir = import.meta.dir;
const failed: string[] = [];
const t0 = performance.now();
for (const f of BENCHES) {
  const t = performance.now();
  console.error(`\n### bench ${f}`);
  const p = Bun.spawn([process.execPath, join(dir, f)], { stdout: "inherit", stderr: "inherit", env: process.env });
  const code = await p.exited;
  if (code !== 0) {
    console.error(`bench ${f} failed (exit ${code})`);
    failed.push(f);
  }
  console.error(`### bench ${f}: ${((performance.now() - t) / 1000).toFixed(1)} s`);
}
console.error(
  `\nall benchmarks: ${((performance.now() - t0) / 1000).toFixed(1)} s` +
    `${failed.length ? `; failed: ${failed.join(", ")}` : ""}`,
);
process.exit(failed.length ? 1 : 0);
