// Attempt history questions the dispatcher asks: the poison rule and a repeated bad emit.
import type { Database } from "bun:sqlite";
import { prepared, type Spool } from "./db.ts";

interface PastAttempt {
  id: number;
  outcome: string | null;
  klass: string | null;
  error: string | null;
  started_at: number;
  finished_at: number | null;
}

const PAST = `SELECT id, outcome, klass, error, started_at, finished_at FROM attempts
  WHERE batch_id = ? AND finished_at IS NOT NULL AND outcome <> 'discarded' ORDER BY id DESC LIMIT 64`;
// Half-open gaps [previous failure, this failure) partition time, so one success counts for at
// most one gap, and a success finishing at the same instant as a failure still counts once.
// An awaited delivery's 2xx (class "await") is not a success: its run's outcome is.
const SUCCESS_BETWEEN = `SELECT 1 FROM attempts
  WHERE destination = $destination AND batch_id <> $batch AND outcome = 'ok' AND (klass IS NULL OR klass <> 'await')
    AND finished_at >= $from AND finished_at < $to LIMIT 1`;

/**
 * A lease that merely expired says nothing about the batch, and neither does an awaited
 * delivery's 2xx: the outcome of its run does.
 */
function leaseExpired(a: PastAttempt): boolean {
  return (a.klass === null && a.error === "lease expired") || a.klass === "await";
}

/** A strike's class: a transport failure, or a run the agent reported failed (or never reported). */
export function strikeClass(klass: string | null): boolean {
  return klass === "transport" || klass === "agent";
}

/**
 * The poison run that a transport failure (or a failed run of an awaited destination) finishing
 * at `now` completes: the number of strikes, each such failure of this batch after the
 * destination succeeded with another batch since this batch's previous failure. Five strikes (six failures in a row with the
 * destination delivering in between) make the batch poison. The attempt being recorded has
 * not been finished yet, so it is not among the past attempts.
 */
export function transportStrikesTx(db: Database, batchId: number, destination: string, now: number): number {
  let strikes = 0;
  let later = now;
  for (const a of prepared<PastAttempt, [number]>(db, PAST).all(batchId)) {
    if (leaseExpired(a)) continue;
    if (!strikeClass(a.klass) || a.outcome === "ok") break;
    const delivered = prepared(db, SUCCESS_BETWEEN).get({ destination, batch: batchId, from: a.finished_at, to: later });
    if (!delivered) break;
    strikes++;
    later = a.finished_at as number;
  }
  return strikes;
}

/** Whether this batch's previous attempt failed on a bad emit (twice makes it permanent). */
export function previousBadEmitTx(db: Database, batchId: number): boolean {
  for (const a of prepared<PastAttempt, [number]>(db, PAST).all(batchId)) {
    if (leaseExpired(a)) continue;
    return a.klass === "batch" && (a.error ?? "").startsWith("bad emit");
  }
  return false;
}

const LATEST_ANSWERS = `SELECT answer FROM attempts WHERE destination = $destination AND outcome = 'ok'
  ORDER BY started_at DESC, id DESC LIMIT $limit`;

/** How many of the destination's latest deliveries in a row (at most `limit`) the receiver ignored. */
export function ignoredRunTx(db: Database, destination: string, limit: number): number {
  let n = 0;
  for (const a of prepared<{ answer: string | null }, Record<string, string | number>>(db, LATEST_ANSWERS).all({ destination, limit })) {
    if (a.answer !== "ignored") break;
    n++;
  }
  return n;
}

/** A successful config reload makes every config-class retry due now. */
export function redueConfigRetries(spool: Spool, now: number): number {
  return spool.db
    .transaction(() => prepared(spool.db, "UPDATE batches SET next_attempt_at = $now WHERE state = 'retry' AND last_class = 'config' AND next_attempt_at > $now").run({ now }).changes)
    .immediate();
}
