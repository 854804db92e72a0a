// The record of a benchmark: one JSON line per figure on stdout, a plain table on stderr.
import { RUNNER } from "./procs.ts";

export type Config = Record<string, string | number | boolean | null>;

/** One figure: one JSON line on stdout. */
export function emit(bench: string, metric: string, value: number, unit: string, config: Config = {}): void {
  const v = Number.isFinite(value) ? +value.toFixed(Math.abs(value) >= 100 ? 1 : 3) : null;
  console.log(JSON.stringify({ bench, metric, value: v, unit, config: { runner: RUNNER, ...config } }));
}

/** A plain table on stderr (the JSON lines on stdout are the record). */
export function table(title: string, head: string[], rows: (string | number)[][]): void {
  const cells = [head, ...rows.map((r) => r.map((c) => (typeof c === "number" ? fmt(c) : c)))];
  const widths = head.map((_, i) => Math.max(...cells.map((r) => String(r[i] ?? "").length)));
  const line = (r: (string | number)[]) =>
    r.map((c, i) => (i === 0 ? String(c).padEnd(widths[i]) : String(c).padStart(widths[i]))).join("  ");
  console.error(
    [`\n== ${title}`, line(cells[0]), widths.map((w) => "-".repeat(w)).join("  "), ...cells.slice(1).map(line)].join(
      "\n",
    ),
  );
}

export function fmt(n: number): string {
  if (!Number.isFinite(n)) return "-";
  if (Number.isInteger(n)) return String(n);
  if (Math.abs(n) >= 100) return n.toFixed(0);
  if (Math.abs(n) >= 10) return n.toFixed(1);
  return n.toFixed(2);
}

/** The p-th percentile (0..1) of an ascending array, nearest rank. */
export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(sorted.length * p) - 1))];
}
