// Shared by the clock-fault tests: snapshots of the stored facts, to prove a clock step rewrote none.
import type { SqliteSpool } from "../../src/store/sqlite/db.ts";

/** Every row of `table`, ordered by its first column, as plain objects. */
export function rows(spool: SqliteSpool, table: string, where = "1"): Record<string, unknown>[] {
  return spool.db.query(`SELECT * FROM ${table} WHERE ${where} ORDER BY 1`).all() as Record<string, unknown>[];
}

/** The stored facts of every batch and event: first_at, last_at, received_at, next_attempt_at and the rest. */
export function facts(spool: SqliteSpool): {
  batches: Record<string, unknown>[];
  events: Record<string, unknown>[];
  attempts: Record<string, unknown>[];
} {
  return { batches: rows(spool, "batches"), events: rows(spool, "events"), attempts: rows(spool, "attempts") };
}
