// The load generator (loadgen.ts) as a separate process: what to send, and what it measured.
import { join } from "node:path";
import { spawnChild } from "./procs.ts";

const LOADGEN = join(import.meta.dir, "loadgen.ts");

export interface LoadSpec {
  url: string;
  /** Requests in flight at once. */
  concurrency: number;
  /** Requests to measure (after the warm-up). */
  n: number;
  /** Stop starting requests after this long: the cell then has fewer than n. */
  maxSeconds: number;
  /** Requests sent first and not measured (JIT, connections). */
  warmup?: number;
  /**
   * The body; per request {{SEQ}} (40 hex, unique), {{KEY}} (request number mod keys) and {{TS}} (send time, Unix s)
   * are filled in.
   */
  body: string;
  keys?: number;
  headers: Record<string, string>;
  /** A header that gets a fresh UUID per request (X-GitHub-Delivery). */
  deliveryHeader?: string;
  /** Sign each body as the sender does: HMAC-SHA256 hex of the body, in `header`, after `prefix`. */
  sign?: { header: string; prefix: string; secret: string };
  /** Start request i at i / rate seconds (a paced sender) instead of as fast as the slots free. */
  rate?: number;
  /** A prefix of {{SEQ}}, so two runs into one spool never share a payload. */
  run?: number;
  /** Return every latency (lat_ms), so rounds can be merged. */
  keepLatencies?: boolean;
  /** Append the deliveryHeader value of every request answered 2xx (warm-ups included) to this file, a line each. */
  ackedFile?: string;
}

export interface LoadResult {
  sent: number;
  ok: number;
  failed: number;
  statuses: Record<string, number>;
  seconds: number;
  rps: number;
  p50_ms: number;
  p99_ms: number;
  max_ms: number;
  /** Every measured latency, ascending, when the spec asked for them. */
  lat_ms?: number[];
  /** Warm-up requests that did not get a 2xx, by status ("error": no answer): they hold no event row. */
  warmup_failed?: Record<string, number>;
}

let loads = 0;

/** Run the load generator as its own process (its own event loop) and read its one JSON line. */
export async function load(spec: LoadSpec, logDir: string): Promise<LoadResult> {
  const specPath = join(logDir, `load-${++loads}.json`);
  await Bun.write(specPath, JSON.stringify(spec));
  const c = spawnChild(`loadgen-${loads}`, [process.execPath, LOADGEN, specPath], { logDir });
  const code = await c.proc.exited;
  await c.stop();
  const out = c.log().trim().split("\n");
  if (code !== 0) throw new Error(`loadgen exited ${code}: ${out.slice(-10).join("\n")}`);
  // Its result is its last JSON line: the runtime may print a line of its own after it.
  const result = out.findLast((line) => line.startsWith("{"));
  if (result === undefined) throw new Error(`loadgen printed no result: ${out.slice(-10).join("\n")}`);
  try {
    return JSON.parse(result) as LoadResult;
  } catch {
    throw new Error(`loadgen's result is not JSON: ${out.slice(-10).join("\n").slice(0, 2000)}`);
  }
}

/** Rounds of one cell as one result: requests and seconds added up, percentiles over every latency. */
export function merge(rounds: LoadResult[]): LoadResult {
  const lat = rounds.flatMap((r) => r.lat_ms ?? []).sort((a, b) => a - b);
  const pct = (p: number) =>
    lat.length ? lat[Math.min(lat.length - 1, Math.max(0, Math.ceil(lat.length * p) - 1))] : Number.NaN;
  const statuses: Record<string, number> = {};
  for (const r of rounds) for (const [k, v] of Object.entries(r.statuses)) statuses[k] = (statuses[k] ?? 0) + v;
  const sum = (f: (r: LoadResult) => number) => rounds.reduce((n, r) => n + f(r), 0);
  const seconds = sum((r) => r.seconds);
  return {
    sent: sum((r) => r.sent),
    ok: sum((r) => r.ok),
    failed: sum((r) => r.failed),
    statuses,
    seconds,
    rps: sum((r) => r.sent) / seconds,
    p50_ms: pct(0.5),
    p99_ms: pct(0.99),
    max_ms: lat[lat.length - 1] ?? Number.NaN,
  };
}
