// The dispatcher's reads and small writes on PostgreSQL beside claims.ts: one batch row, the
// next instant a batch becomes ready by itself, whether one is ready now, an abandoned
// attempt, config retries made due after a reload, and the destination's row as the gate reads it.
import type { BatchRow } from "../batches.ts";
import { closedRow, type DestinationRow } from "../destinations.ts";
import { scrubError } from "../marks.ts";
import { num, numOrNull, type PgSpool } from "./db.ts";
import { destinationRowOf } from "./destinations.ts";

/** A batches row with SQLite's types: BIGINT columns arrive as strings. */
export function batchRowOf(r: Record<string, unknown>): BatchRow {
  return {
    ...(r as unknown as BatchRow),
    id: num(r.id),
    first_at: Number(r.first_at),
    last_at: Number(r.last_at),
    quiet_s: Number(r.quiet_s),
    max_s: Number(r.max_s),
    max_events: Number(r.max_events),
    max_bytes: num(r.max_bytes),
    not_before: numOrNull(r.not_before),
    count: Number(r.count),
    bytes: num(r.bytes),
    sealed_at: numOrNull(r.sealed_at),
    attempts: Number(r.attempts),
    next_attempt_at: numOrNull(r.next_attempt_at),
    lease_until: numOrNull(r.lease_until),
    delivered_at: numOrNull(r.delivered_at),
  };
}

export async function getBatchPg(spool: PgSpool, id: number): Promise<BatchRow | null> {
  const [r] = await spool.sql`SELECT * FROM batches WHERE id = ${id}::bigint`;
  return r ? batchRowOf(r) : null;
}

/** The next instant after `now` at which an open batch's window ends, a retry falls due or an awaited outcome is overdue; null when none will. */
export async function nextReadyAtPg(spool: PgSpool, now: number): Promise<number | null> {
  const [r] = await spool.sql`SELECT LEAST(
      (SELECT MIN(LEAST(last_at + quiet_s, first_at + max_s)) FROM batches
        WHERE state = 'open' AND NOT (quiet_s = 0 AND max_s = 0) AND LEAST(last_at + quiet_s, first_at + max_s) > ${now}),
      (SELECT MIN(next_attempt_at) FROM batches WHERE state IN ('retry', 'awaiting') AND next_attempt_at > ${now})) AS at`;
  return numOrNull(r?.at);
}

/** Whether some batch is ready at `now`: sealed, due for a retry, open past its window, or awaiting an overdue outcome. */
export async function anyReadyNowPg(spool: PgSpool, now: number): Promise<boolean> {
  const [r] = await spool.sql`SELECT EXISTS (SELECT 1 FROM batches WHERE state = 'sealed')
      OR EXISTS (SELECT 1 FROM batches WHERE state IN ('retry', 'awaiting') AND next_attempt_at <= ${now})
      OR EXISTS (SELECT 1 FROM batches WHERE state = 'open'
        AND ((quiet_s = 0 AND max_s = 0) OR ${now} >= last_at + quiet_s OR ${now} >= first_at + max_s)) AS ready`;
  return r?.ready === true;
}

/** Close an attempt whose worker cannot go on (its batch vanished): discarded, uncounted. */
export async function abandonAttemptPg(spool: PgSpool, attemptId: number, now: number, why: string): Promise<void> {
  await spool.sql`UPDATE attempts SET finished_at = ${now}, outcome = 'discarded', error = ${scrubError(why)}, counted = 0
      WHERE id = ${attemptId}::bigint AND finished_at IS NULL`;
}

/** A successful config reload makes every config-class retry due now. */
export async function redueConfigRetriesPg(spool: PgSpool, now: number): Promise<number> {
  const r = await spool.sql`UPDATE batches SET next_attempt_at = ${now} WHERE state = 'retry' AND last_class = 'config' AND next_attempt_at > ${now}`;
  return r.count;
}

/** The destination's row; one never seen is closed. */
export async function destinationStatePg(spool: PgSpool, name: string): Promise<DestinationRow> {
  const [r] = await spool.sql`SELECT * FROM destinations WHERE name = ${name}`;
  return r ? destinationRowOf(r) : closedRow(name);
}

/** The spool's instance id, minted by the first migration. */
export async function instanceIdPg(spool: PgSpool): Promise<string> {
  const [r] = await spool.sql`SELECT value FROM meta WHERE key = 'instance_id'`;
  if (!r) throw new Error("meta.instance_id is missing: the database was not migrated");
  return String(r.value);
}
