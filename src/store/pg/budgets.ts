// Run budgets on PostgreSQL: the spends of SQLite's budgets.ts, read with the same rule, on the
// pool or inside a claim's transaction (where the destination's claim lock makes them exact).
import { budgetFromKey } from "../budget-plan.ts";
import type { PgSpool, Tx } from "./db.ts";

/** Where the window starts: windowS ago, or the destination's last resume --budget if later. */
async function sincePg(sql: Tx, destination: string, windowS: number, now: number): Promise<number> {
  const [r] = await sql`SELECT value FROM meta WHERE key = ${budgetFromKey(destination)}`;
  const from = r ? Number(r.value) : Number.NaN;
  return Number.isFinite(from) ? Math.max(now - windowS, from) : now - windowS;
}

/** The start times of the spends in the window, oldest first: the destination's, or one (route, key)'s. */
export async function budgetSpendsPg(
  sql: Tx,
  destination: string,
  windowS: number,
  now: number,
  group?: { route: string; key: string },
): Promise<number[]> {
  const since = await sincePg(sql, destination, windowS, now);
  const rows = (
    group
      ? await sql`SELECT a.started_at AS at FROM attempts a JOIN batches b ON b.id = a.batch_id
          WHERE a.destination = ${destination} AND a.started_at > ${since}
            AND ((a.outcome IS NULL AND a.finished_at IS NULL) OR (a.outcome = 'ok' AND (a.klass IS NULL
              OR a.klass = 'await')))
            AND b.route = ${group.route} AND b.key = ${group.key} ORDER BY a.started_at`
      : await sql`SELECT a.started_at AS at FROM attempts a
          WHERE a.destination = ${destination} AND a.started_at > ${since}
            AND ((a.outcome IS NULL AND a.finished_at IS NULL) OR (a.outcome = 'ok' AND (a.klass IS NULL
              OR a.klass = 'await'))) ORDER BY a.started_at`
  ) as { at: unknown }[];
  return rows.map((r) => Number(r.at));
}

/** resume --budget: the budget's window starts again at `now`. */
export async function releaseBudgetPg(spool: PgSpool, destination: string, now: number): Promise<void> {
  await spool.sql`INSERT INTO meta (key, value) VALUES (${budgetFromKey(destination)}, ${String(now)})
    ON CONFLICT (key) DO UPDATE SET value = excluded.value`;
}
