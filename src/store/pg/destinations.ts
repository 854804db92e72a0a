// Destination runtime state on PostgreSQL: the breaker, the pause, the probe and the
// Retry-After gate, with SQLite's transitions. With several dispatchers, every change locks the
// destination's row (FOR UPDATE), so two verdicts on one destination apply one after the other.
import {
  breakerOnFailure,
  type DestinationRow,
  type FailureEffect,
  type FailureInput,
  closedRow,
} from "../destinations.ts";
import { numOrNull, type PgSpool, type Tx } from "./db.ts";
import { resolveIssuePg } from "./issues.ts";

/** A destinations row as the store's DestinationRow (numbers where PostgreSQL gives strings). */
export function destinationRowOf(r: Record<string, unknown>): DestinationRow {
  return {
    name: String(r.name),
    state: r.state as DestinationRow["state"],
    consecutive_failures: Number(r.consecutive_failures),
    opened_at: numOrNull(r.opened_at),
    cooldown_s: numOrNull(r.cooldown_s),
    probe_until: numOrNull(r.probe_until),
    last_probe_batch_id: numOrNull(r.last_probe_batch_id),
    paused_at: numOrNull(r.paused_at),
    paused_by: (r.paused_by as string | null) ?? null,
    last_ok_at: numOrNull(r.last_ok_at),
    last_error: (r.last_error as string | null) ?? null,
    retry_after_until: numOrNull(r.retry_after_until),
    throttled_at: numOrNull(r.throttled_at),
    throttle_s: numOrNull(r.throttle_s),
  };
}

/** The row, created on first use and locked for the rest of the transaction. */
async function locked(tx: Tx, name: string): Promise<DestinationRow> {
  await tx`INSERT INTO destinations (name) VALUES (${name}) ON CONFLICT (name) DO NOTHING`;
  const [r] = await tx`SELECT * FROM destinations WHERE name = ${name} FOR UPDATE`;
  return destinationRowOf(r);
}

export async function destinationRowsPg(spool: PgSpool): Promise<DestinationRow[]> {
  return ((await spool.sql`SELECT * FROM destinations ORDER BY name`) as Record<string, unknown>[]).map(
    destinationRowOf,
  );
}

/** A successful attempt: closed (a paused destination stays paused), counters reset. Returns the state it left. */
export async function recordSuccessPg(tx: Tx, name: string, now: number): Promise<DestinationRow["state"]> {
  const before = (await locked(tx, name)).state;
  await tx`UPDATE destinations SET consecutive_failures = 0, last_ok_at = ${now}, last_error = NULL,
      state = CASE WHEN state = 'paused' THEN 'paused' ELSE 'closed' END,
      opened_at = CASE WHEN state = 'paused' THEN opened_at ELSE NULL END,
      cooldown_s = CASE WHEN state = 'paused' THEN cooldown_s ELSE NULL END,
      probe_until = NULL
    WHERE name = ${name}`;
  return before;
}

/**
 * A transport failure: counted while closed, trips at trip_after; a probe's failure re-trips with the cooldown doubled.
 */
export async function recordTransportFailurePg(tx: Tx, name: string, f: FailureInput): Promise<FailureEffect> {
  const change = breakerOnFailure(await locked(tx, name), f);
  await tx`UPDATE destinations SET last_error = ${f.error} WHERE name = ${name}`;
  if (change.effect === "counted")
    await tx`UPDATE destinations SET consecutive_failures = ${change.consecutive_failures} WHERE name = ${name}`;
  else if (change.effect !== "ignored") {
    await tx`UPDATE destinations
      SET state = 'open', consecutive_failures = ${change.consecutive_failures}, opened_at = ${change.opened_at},
        cooldown_s = ${change.cooldown_s}, probe_until = NULL WHERE name = ${name}`;
  }
  return change.effect;
}

/** open -> half_open once the cooldown has elapsed; whether it moved (only one dispatcher sees true). */
export async function halfOpenIfCooledPg(spool: PgSpool, name: string, now: number): Promise<boolean> {
  const r = await spool.sql`UPDATE destinations SET state = 'half_open', probe_until = NULL WHERE name = ${name}
      AND state = 'open' AND opened_at + cooldown_s <= ${now}`;
  return r.count === 1;
}

/** The probe claim's bookkeeping, in the claim's transaction. */
export async function markProbePg(tx: Tx, name: string, batchId: number, probeUntil: number): Promise<void> {
  await locked(tx, name);
  await tx`UPDATE destinations SET last_probe_batch_id = ${batchId}::bigint, probe_until = ${probeUntil}
    WHERE name = ${name}`;
}

/** A Retry-After soft gate: claiming waits without changing the breaker's state. */
export async function setRetryAfterPg(tx: Tx, name: string, until: number): Promise<void> {
  await locked(tx, name);
  await tx`UPDATE destinations SET retry_after_until = GREATEST(COALESCE(retry_after_until, 0), ${until})
    WHERE name = ${name}`;
}

/** A 429 without Retry-After: nothing starts before `until`, then one delivery goes as a probe. */
export async function throttlePg(tx: Tx, name: string, now: number, until: number, throttleS: number): Promise<void> {
  await locked(tx, name);
  await tx`UPDATE destinations SET throttled_at = ${now}, throttle_s = ${throttleS}, retry_after_until =
    GREATEST(COALESCE(retry_after_until, 0), ${until}) WHERE name = ${name}`;
}

/** An attempt that started after the 429 gate and was not throttled again: the rest may go. */
export async function liftThrottlePg(tx: Tx, name: string, startedAt: number): Promise<void> {
  await tx`UPDATE destinations SET throttled_at = NULL, throttle_s = NULL WHERE name = ${name}
    AND throttled_at IS NOT NULL AND throttled_at < ${startedAt}`;
}

/** Paused, from any state, by an operator or by hookspool itself, in the caller's transaction. */
export async function pauseDestinationPgTx(tx: Tx, name: string, by: string, now: number): Promise<void> {
  await locked(tx, name);
  await tx`UPDATE destinations SET state = 'paused', paused_at = ${now}, paused_by = ${by} WHERE name = ${name}`;
}

/** hookspool pause: from any state. */
export async function pauseDestinationPg(spool: PgSpool, name: string, by: string, now: number): Promise<void> {
  await spool.sql.begin((tx) => pauseDestinationPgTx(tx, name, by, now));
}

/**
 * hookspool resume: paused -> closed with its counters reset, its config-waiting batches due
 * now, its paused issue resolved; false when it was not paused.
 */
export async function resumeDestinationPg(spool: PgSpool, name: string, now: number): Promise<boolean> {
  return spool.sql.begin(async (tx) => {
    const r =
      await tx`UPDATE destinations SET state = 'closed', consecutive_failures = 0, opened_at = NULL, cooldown_s = NULL,
        probe_until = NULL, paused_at = NULL, paused_by = NULL, retry_after_until = NULL, throttled_at = NULL,
          throttle_s = NULL
      WHERE name = ${name} AND state = 'paused'`;
    if (r.count !== 1) return false;
    await tx`UPDATE batches SET next_attempt_at = ${now} WHERE destination = ${name} AND state = 'retry'
      AND last_class = 'config' AND next_attempt_at > ${now}`;
    await resolveIssuePg(tx, `delivery:${name}:paused`, now);
    return true;
  });
}

/** A probe that ended without a verdict: the next probe need not wait for the old probe_until. */
export async function clearProbePg(tx: Tx, name: string): Promise<void> {
  await tx`UPDATE destinations SET probe_until = NULL WHERE name = ${name} AND state = 'half_open'`;
}

/** The destination's row; one never seen is closed. */
export async function destinationStatePg(spool: PgSpool, name: string): Promise<DestinationRow> {
  const [r] = await spool.sql`SELECT * FROM destinations WHERE name = ${name}`;
  return r ? destinationRowOf(r) : closedRow(name);
}

/** Destinations that have batches, with or without a runtime row. */
export async function destinationNamesPg(spool: PgSpool): Promise<string[]> {
  const rows =
    (await spool.sql`SELECT DISTINCT destination AS d FROM batches WHERE destination <> 'quarantine' UNION SELECT name
      FROM destinations ORDER BY 1`) as {
      d: string;
    }[];
  return rows.map((r) => r.d);
}
