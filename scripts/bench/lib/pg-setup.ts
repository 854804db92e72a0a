// What both halves of the PostgreSQL benchmark share: its settings (from the environment), the
// [spool] table of a PostgreSQL home, and the statement tables BENCH_PG_STATEMENTS=1 prints.
import type { BenchPg } from "./pg.ts";
import { table } from "./report.ts";

/** fsync, synchronous_commit and full_page_writes on, as SQLite's synchronous=FULL (BENCH_PG_FSYNC=off: off). */
export const FSYNC = (process.env.BENCH_PG_FSYNC ?? "on") !== "off";
/** Connections in each hookspool process's pool: left to the process (an intake 4, a dispatcher parallel + 2). */
export const POOL = "default";
/**
 * BENCH_PG_STATEMENTS=1: pg_stat_statements on, each phase's busiest statements on stderr (a diagnosis, not a figure).
 */
export const STATEMENTS = process.env.BENCH_PG_STATEMENTS === "1";
/** BENCH_PG_ONLY=intake or dispatch: one half of the bench. */
export const ONLY = process.env.BENCH_PG_ONLY ?? "";

/** The [spool] table of a home on the bench's server (its URL in HOOKSPOOL_PG_URL), and `extra` after it. */
export const pgSpool = (extra = "") => `
[spool]
backend = "postgres"
url = { env = "HOOKSPOOL_PG_URL" }
${extra}`;

/** The busiest statements since the last call, on stderr, when BENCH_PG_STATEMENTS=1. */
export async function printStatements(pg: BenchPg, phase: string): Promise<void> {
  const rows = await pg.statements();
  if (!STATEMENTS) return;
  table(
    `postgres statements: ${phase}`,
    ["calls", "exec ms", "plan ms", "rows", "statement"],
    rows.map((r) => [r.calls, r.totalMs, r.planMs, r.rows, r.query]),
  );
}
