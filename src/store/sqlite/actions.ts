// The record of what an operator changed from the dashboard: one row per action, written in the
// transaction that makes the change (a failed change leaves no row). Names and ids only.
import { prepared, type SqliteSpool } from "./db.ts";
import type { ActionRow } from "../actions.ts";

/** Run `change` and record it in one transaction; the change's own transaction nests as a savepoint. */
export function recordAction<T>(spool: SqliteSpool, a: Omit<ActionRow, "id">, change: () => T): T {
  return spool.db
    .transaction(() => {
      const out = change();
      prepared(spool.db, "INSERT INTO actions (at, via, verb, target) VALUES ($at, $via, $verb, $target)").run({
        at: a.at,
        via: a.via,
        verb: a.verb,
        target: a.target,
      });
      return out;
    })
    .immediate();
}

/** The newest actions first, at most `limit`. */
export function recentActions(spool: SqliteSpool, limit: number): ActionRow[] {
  return prepared<ActionRow, [number]>(
    spool.db,
    "SELECT id, at, via, verb, target FROM actions ORDER BY id DESC LIMIT ?",
  ).all(limit);
}
