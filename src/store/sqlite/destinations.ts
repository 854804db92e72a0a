// Destination runtime state: the circuit breaker, the operator pause, the rotating probe, the
// Retry-After soft gate and the 429 gate. One row per destination, created on first use.
import type { Database } from "bun:sqlite";
import { prepared, type SqliteSpool } from "./db.ts";
import { resolveIssueTx } from "./issues.ts";
import {
  breakerOnFailure,
  closedRow,
  type FailureEffect,
  type DestinationRow,
  type FailureInput,
} from "../destinations.ts";

export function destinationRows(spool: SqliteSpool): DestinationRow[] {
  const db = spool.db;
  return prepared<DestinationRow, []>(db, "SELECT * FROM destinations ORDER BY name").all();
}

/** Destinations that have batches, with or without a runtime row. */
export function destinationNames(spool: SqliteSpool): string[] {
  const db = spool.db;
  return prepared<{ d: string }, []>(
    db,
    "SELECT DISTINCT destination AS d FROM batches WHERE destination <> 'quarantine' UNION SELECT name " +
      "FROM destinations ORDER BY 1",
  )
    .all()
    .map((r) => r.d);
}

const GET = "SELECT * FROM destinations WHERE name = ?";

const ENSURE = "INSERT INTO destinations (name) VALUES (?) ON CONFLICT (name) DO NOTHING";

/** The destination's row; a destination never seen is closed. */
export function destinationState(spool: SqliteSpool, name: string): DestinationRow {
  return destinationStateTx(spool.db, name);
}

/** destinationState inside the caller's transaction. */
export function destinationStateTx(db: Database, name: string): DestinationRow {
  return prepared<DestinationRow, [string]>(db, GET).get(name) ?? closedRow(name);
}

function ensure(db: Database, name: string): void {
  prepared(db, ENSURE).run(name);
}

const SUCCESS = `UPDATE destinations SET consecutive_failures = 0, last_ok_at = $now, last_error = NULL,
    state = CASE WHEN state = 'paused' THEN 'paused' ELSE 'closed' END,
    opened_at = CASE WHEN state = 'paused' THEN opened_at ELSE NULL END,
    cooldown_s = CASE WHEN state = 'paused' THEN cooldown_s ELSE NULL END,
    probe_until = NULL
  WHERE name = $name`;

/**
 * A successful attempt: closed, counters and cooldown reset, last_ok_at (success on any attempt
 * closes the breaker; a paused destination stays paused). Returns the state it left.
 */
export function recordSuccessTx(db: Database, name: string, now: number): DestinationRow["state"] {
  ensure(db, name);
  const before = destinationStateTx(db, name).state;
  prepared(db, SUCCESS).run({ name, now });
  return before;
}

/**
 * A transport failure on the destination: closed counts it and opens the breaker at
 * trip_after; a probe's failure re-opens it with the cooldown doubled; an attempt that was
 * already in flight when the breaker opened records its outcome and nothing else.
 */
export function recordTransportFailureTx(db: Database, name: string, f: FailureInput): FailureEffect {
  ensure(db, name);
  const change = breakerOnFailure(destinationStateTx(db, name), f);
  prepared(db, "UPDATE destinations SET last_error = ? WHERE name = ?").run(f.error, name);
  if (change.effect === "counted")
    prepared(db, "UPDATE destinations SET consecutive_failures = ? WHERE name = ?").run(
      change.consecutive_failures,
      name,
    );
  else if (change.effect !== "ignored") {
    prepared(
      db,
      "UPDATE destinations SET state = 'open', consecutive_failures = $n, opened_at = $at, cooldown_s = $cool, " +
        "probe_until = NULL WHERE name = $name",
    ).run({
      name,
      n: change.consecutive_failures,
      at: change.opened_at,
      cool: change.cooldown_s,
    });
  }
  return change.effect;
}

/** open -> half_open once the cooldown has elapsed; returns whether it moved. */
export function halfOpenIfCooled(spool: SqliteSpool, name: string, now: number): boolean {
  return (
    prepared(
      spool.db,
      "UPDATE destinations SET state = 'half_open', probe_until = NULL WHERE name = $name AND state = 'open' " +
        "AND opened_at + cooldown_s <= $now",
    ).run({ name, now }).changes === 1
  );
}

/** The probe claim's bookkeeping, in the claim's transaction: which batch, and until when. */
export function markProbeTx(db: Database, name: string, batchId: number, probeUntil: number): void {
  ensure(db, name);
  prepared(db, "UPDATE destinations SET last_probe_batch_id = $batch, probe_until = $until WHERE name = $name").run({
    name,
    batch: batchId,
    until: probeUntil,
  });
}

/** A Retry-After soft gate: claiming waits without changing the breaker's state. */
export function setRetryAfterTx(db: Database, name: string, until: number): void {
  ensure(db, name);
  prepared(
    db,
    "UPDATE destinations SET retry_after_until = MAX(COALESCE(retry_after_until, 0), $until) WHERE name = $name",
  ).run({ name, until });
}

/**
 * A 429 without Retry-After: no delivery to the destination starts before `until`, then one
 * goes as a probe (throttled_at marks it) and the rest wait for its verdict.
 */
export function throttleTx(db: Database, name: string, now: number, until: number, throttleS: number): void {
  ensure(db, name);
  prepared(
    db,
    "UPDATE destinations SET throttled_at = $now, throttle_s = $s, retry_after_until = " +
      "MAX(COALESCE(retry_after_until, 0), $until) WHERE name = $name",
  ).run({ name, now, s: throttleS, until });
}

/** An attempt that started after the 429 gate and was not throttled again: the rest may go. */
export function liftThrottleTx(db: Database, name: string, startedAt: number): void {
  prepared(
    db,
    "UPDATE destinations SET throttled_at = NULL, throttle_s = NULL WHERE name = $name AND throttled_at IS NOT NULL " +
      "AND throttled_at < $started",
  ).run({ name, started: startedAt });
}

/** Paused, from any state, by an operator or by hookspool itself (a fault no retry mends). */
export function pauseDestinationTx(db: Database, name: string, by: string, now: number): void {
  ensure(db, name);
  prepared(db, "UPDATE destinations SET state = 'paused', paused_at = $now, paused_by = $by WHERE name = $name").run({
    name,
    now,
    by,
  });
}

/** hookspool pause: spool only, from any state. */
export function pauseDestination(spool: SqliteSpool, name: string, by: string, now: number): void {
  spool.db.transaction(() => pauseDestinationTx(spool.db, name, by, now)).immediate();
}

/**
 * hookspool resume: paused -> closed with its counters reset, its batches waiting on a config
 * fault due now (the pause was the fix's signal), its paused issue resolved. Returns false when
 * it was not paused.
 */
export function resumeDestination(spool: SqliteSpool, name: string, now: number): boolean {
  return spool.db
    .transaction(() => {
      const resumed =
        prepared(
          spool.db,
          `UPDATE destinations SET state = 'closed', consecutive_failures = 0, opened_at = NULL, cooldown_s = NULL,
              probe_until = NULL, paused_at = NULL, paused_by = NULL, retry_after_until = NULL, throttled_at = NULL,
                throttle_s = NULL
            WHERE name = $name AND state = 'paused'`,
        ).run({ name }).changes === 1;
      if (resumed) {
        prepared(
          spool.db,
          "UPDATE batches SET next_attempt_at = $now WHERE destination = $name AND state = 'retry' " +
            "AND last_class = 'config' AND next_attempt_at > $now",
        ).run({ name, now });
        resolveIssueTx(spool.db, `delivery:${name}:paused`, now);
      }
      return resumed;
    })
    .immediate();
}

/** A probe that ended without a verdict on the destination (throttle, batch, config, permanent):
 * the next probe need not wait for the old lease's probe_until. */
export function clearProbeTx(db: Database, name: string): void {
  prepared(db, "UPDATE destinations SET probe_until = NULL WHERE name = ? AND state = 'half_open'").run(name);
}
