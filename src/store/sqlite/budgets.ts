// Run budgets on SQLite: a destination's spends in its budget's window (and one key's), read
// from attempts (so a budget holds across restarts), and `resume --budget`, after which only
// later spends count.
import { budgetFromKey } from "../budget-plan.ts";
import { prepared, type SqliteSpool } from "./db.ts";
import { getMeta, setMetaTx } from "./meta.ts";

// A spend: an attempt in flight, or one that got a 2xx (class null, or "await" when its run's
// outcome is awaited); an outcome's own row (class "agent") is not another spend.
const SPEND =
  "((a.outcome IS NULL AND a.finished_at IS NULL) OR (a.outcome = 'ok' AND (a.klass IS NULL OR a.klass = 'await')))";

const DESTINATION_SPENDS = `SELECT a.started_at AS at FROM attempts a INDEXED BY attempts_destination
  WHERE a.destination = $destination AND a.started_at > $since AND ${SPEND} ORDER BY a.started_at`;

const KEY_SPENDS = `SELECT a.started_at AS at FROM attempts a INDEXED BY attempts_destination
  JOIN batches b ON b.id = a.batch_id
  WHERE a.destination = $destination AND a.started_at > $since AND ${SPEND} AND b.route = $route AND b.key = $key
    ORDER BY a.started_at`;

/** Where `destination`'s budget window starts at `now`: windowS ago, or its last resume --budget if later. */
export function budgetSince(spool: SqliteSpool, destination: string, windowS: number, now: number): number {
  const from = Number(getMeta(spool, budgetFromKey(destination)) ?? Number.NaN);
  return Number.isFinite(from) ? Math.max(now - windowS, from) : now - windowS;
}

/** The start times of the spends in the window, oldest first: the destination's, or one (route, key)'s. */
export function budgetSpends(
  spool: SqliteSpool,
  destination: string,
  windowS: number,
  now: number,
  group?: { route: string; key: string },
): number[] {
  const since = budgetSince(spool, destination, windowS, now);
  const rows = group
    ? prepared<{ at: number }, Record<string, string | number>>(spool.db, KEY_SPENDS).all({
        destination,
        since,
        route: group.route,
        key: group.key,
      })
    : prepared<{ at: number }, Record<string, string | number>>(spool.db, DESTINATION_SPENDS).all({
        destination,
        since,
      });
  return rows.map((r) => r.at);
}

/** resume --budget: the budget's window starts again at `now`, so held batches may go. */
export function releaseBudget(spool: SqliteSpool, destination: string, now: number): void {
  spool.db.transaction(() => setMetaTx(spool.db, budgetFromKey(destination), now)).immediate();
}
