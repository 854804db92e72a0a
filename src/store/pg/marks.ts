// The fenced marks on PostgreSQL: delivered (or awaiting), retry and dead, each changing the
// batch only while this dispatcher's lease still holds it (lease_owner and the attempt id), and
// the attempt row finished with it; an abandoned attempt. The same fence as SQLite's marks.ts.
// Delivered marks, the common end, go several to a statement (markDeliveredAllPg).
import type { DeadReason } from "../../delivery.ts";
import { attemptFacts, type MarkBase, scrubError } from "../marks.ts";
import { num, type PgSpool, type Tx } from "./db.ts";
import { journalPg } from "./journal.ts";
import type { NewEvent } from "../enqueue.ts";
import { enqueueEventsPgTx } from "./enqueue.ts";

type Outcome = "ok" | "retry" | "dead";

/**
 * A fenced mark in the caller's transaction: the update must touch the leased row this owner holds, else the attempt is
 * discarded.
 */
async function fencedTx(
  tx: Tx,
  m: MarkBase & { awaitUntil?: number },
  outcome: Outcome,
  update: (tx: Tx) => Promise<number>,
  detail: Record<string, unknown> = {},
): Promise<boolean> {
  const applied = (await update(tx)) === 1;
  const a = m.attempt;
  const finished = applied ? outcome : "discarded";
  // A lost lease's request went out all the same: its hits stay as reserved.
  const hits = finished === "discarded" ? null : (a.hits ?? null);
  await tx`UPDATE attempts
    SET finished_at = ${m.now}, outcome = ${finished}, klass = ${a.klass}, status = ${a.status},
      error = ${scrubError(a.error)},
      duration_ms = ${Math.round(a.durationMs)}, counted = ${finished !== "discarded" && a.counted ? 1 : 0},
        events_delivered = ${a.eventsDelivered ?? null}, failed_event_id = ${a.failedEventId ?? null},
      hits = CASE WHEN hits IS NULL THEN NULL ELSE COALESCE(${hits}::int, hits)
        END, answer = ${a.answer ?? null}, unconfirmed = ${a.unconfirmed ? 1 : 0}
      WHERE id = ${m.attemptId}::bigint`;
  if (applied) {
    const facts = { ...attemptFacts(a), ...detail };
    const kind = outcome !== "ok" ? outcome : m.awaitUntil !== undefined ? "awaiting" : "delivered";
    await journalPg(tx, kind, m.batchId, m.now, {
      attempt: m.attemptId,
      detail: m.awaitUntil !== undefined ? { ...facts, until: m.awaitUntil } : facts,
    });
  }
  return applied;
}

/**
 * The delivered marks' statement ($1 the marks as JSON rows, $2 their batch ids, $3 their attempt
 * ids): the leases ended, the attempts finished, the journal rows, the poll ticks delivered, each
 * key's last delivered version. The ids come again as arrays beside the JSON rows: the planner
 * knows an array's length, not a JSON document's (it guesses 100 rows, and scans attempts and
 * batches whole rather than search them).
 */
export const MARK_DELIVERED = `WITH m AS (SELECT * FROM json_to_recordset($1::text::json) AS m(ord int,
        batch_id bigint, attempt_id bigint, owner text, now float8, await_until float8, result text, counted int,
        klass text, status int, error text, duration_ms int, events_delivered int, failed_event_id bigint, hits int,
        answer text, unconfirmed int, detail text)),
      u AS (UPDATE batches b SET state = CASE WHEN m.await_until IS NULL THEN 'delivered' ELSE 'awaiting' END,
          delivered_at = CASE WHEN m.await_until IS NULL THEN m.now ELSE b.delivered_at END,
          next_attempt_at = CASE WHEN m.await_until IS NULL THEN b.next_attempt_at ELSE m.await_until END,
          result = m.result, lease_until = NULL, lease_owner = NULL, attempts = b.attempts + m.counted,
          last_class = NULL, last_error = NULL
        FROM m WHERE b.id = m.batch_id AND b.id = ANY($2::bigint[])
          AND b.state = 'leased' AND b.lease_owner = m.owner
        RETURNING b.id, b.route, b.source, b.destination, b.key),
      -- A lost lease's request went out all the same: its hits stay as reserved.
      a AS (UPDATE attempts t SET finished_at = m.now, outcome = CASE WHEN u.id IS NULL THEN 'discarded' ELSE 'ok' END,
          klass = m.klass, status = m.status, error = m.error, duration_ms = m.duration_ms,
          counted = CASE WHEN u.id IS NULL THEN 0 ELSE m.counted END, events_delivered = m.events_delivered,
          failed_event_id = m.failed_event_id,
          hits = CASE WHEN t.hits IS NULL THEN NULL
            ELSE COALESCE(CASE WHEN u.id IS NULL THEN NULL ELSE m.hits END, t.hits) END,
          answer = m.answer, unconfirmed = m.unconfirmed
        FROM m LEFT JOIN u ON u.id = m.batch_id
        WHERE t.id = m.attempt_id AND t.id = ANY($3::bigint[])),
      j AS (INSERT INTO journal (at, kind, batch_id, attempt_id, source, destination, key, detail)
        SELECT m.now, CASE WHEN m.await_until IS NULL THEN 'delivered' ELSE 'awaiting' END, u.id, m.attempt_id,
          u.source, u.destination, u.key, m.detail
        FROM m JOIN u ON u.id = m.batch_id ORDER BY m.ord),
      p AS (UPDATE polls SET delivered_at = m.now, delivered_tick_at = polls.last_tick_at
        FROM m JOIN u ON u.id = m.batch_id WHERE polls.last_batch_id = m.batch_id),
      -- Each delivered batch's highest version is its (route, key)'s last delivered one, never lower.
      v AS (INSERT INTO delivered_versions (route, key, version, batch_id, at)
        SELECT u.route, u.key, MAX(e.version), (array_agg(u.id ORDER BY e.version DESC))[1], MAX(m.now)
          FROM m JOIN u ON u.id = m.batch_id
            JOIN events e ON e.batch_id = u.id AND e.excluded_at IS NULL AND e.version IS NOT NULL
          WHERE m.await_until IS NULL
          GROUP BY u.route, u.key
        ON CONFLICT (route, key) DO UPDATE SET
          batch_id = CASE WHEN excluded.version > delivered_versions.version THEN excluded.batch_id
            ELSE delivered_versions.batch_id END,
          version = GREATEST(delivered_versions.version, excluded.version),
          at = GREATEST(delivered_versions.at, excluded.at))
    SELECT id FROM u`;

/** A delivered mark, as markDeliveredAllPg takes several: leased -> delivered, or -> awaiting until `awaitUntil`. */
export type DeliveredMark = MarkBase & { result?: string; awaitUntil?: number };

/**
 * Several delivered marks in one statement, each fenced as fencedTx fences one: a batch this
 * owner still holds leased -> delivered (or awaiting), its attempt finished 'ok', its journal
 * row (in the marks' order), and a poll source's tick batch's delivery recorded on its
 * instance (the last delivered tick, as on SQLite); an attempt whose lease was lost is
 * discarded and nothing else applies. Returns the batches marked.
 */
export async function markDeliveredAllPg(tx: Tx, marks: readonly DeliveredMark[]): Promise<Set<number>> {
  if (marks.length === 0) return new Set();
  const rows = marks.map((m, ord) => {
    const a = m.attempt;
    const facts = attemptFacts(a);
    return {
      ord,
      batch_id: m.batchId,
      attempt_id: m.attemptId,
      owner: m.owner,
      now: m.now,
      await_until: m.awaitUntil ?? null,
      result: m.result ?? "ok",
      counted: a.counted ? 1 : 0,
      klass: a.klass,
      status: a.status,
      error: scrubError(a.error),
      duration_ms: Math.round(a.durationMs),
      events_delivered: a.eventsDelivered ?? null,
      failed_event_id: a.failedEventId ?? null,
      hits: a.hits ?? null,
      answer: a.answer ?? null,
      unconfirmed: a.unconfirmed ? 1 : 0,
      detail: JSON.stringify(m.awaitUntil !== undefined ? { ...facts, until: m.awaitUntil } : facts),
    };
  });
  const done = (await tx.unsafe(MARK_DELIVERED, [
    JSON.stringify(rows),
    marks.map((m) => m.batchId),
    marks.map((m) => m.attemptId),
  ])) as { id: string }[];
  return new Set(done.map((r) => num(r.id)));
}

/**
 * An awaited batch settled delivered: its highest version becomes its key's last delivered one (as markDeliveredAllPg).
 */
export async function recordDeliveredVersionPg(tx: Tx, batchId: number, now: number): Promise<void> {
  await tx`INSERT INTO delivered_versions (route, key, version, batch_id, at)
      SELECT b.route, b.key, m.v, b.id, ${now}::float8 FROM batches b,
        (SELECT MAX(version) AS v FROM events WHERE batch_id = ${batchId}::bigint AND excluded_at IS NULL) m
        WHERE b.id = ${batchId}::bigint AND m.v IS NOT NULL
      ON CONFLICT (route, key) DO UPDATE SET
        batch_id = CASE WHEN excluded.version > delivered_versions.version THEN excluded.batch_id
          ELSE delivered_versions.batch_id END,
        version = GREATEST(delivered_versions.version, excluded.version),
        at = GREATEST(delivered_versions.at, excluded.at)`;
}

/**
 * leased -> delivered, in the caller's transaction, or leased -> awaiting until `awaitUntil`
 * when the run's outcome is awaited. False when the lease was lost (the attempt is discarded,
 * nothing else applies).
 */
export async function markDeliveredPgTx(tx: Tx, m: DeliveredMark & { emits?: NewEvent[] }): Promise<boolean> {
  const applied = (await markDeliveredAllPg(tx, [m])).has(m.batchId);
  // As on SQLite, in the mark's step: a delivered script's emits are queued in the same transaction.
  if (applied) await enqueueEventsPgTx(tx, m.emits ?? [], m.now);
  return applied;
}

/** leased -> retry, due at `nextAttemptAt`, in the caller's transaction. */
export function markRetryPgTx(tx: Tx, m: MarkBase & { nextAttemptAt: number }): Promise<boolean> {
  return fencedTx(
    tx,
    m,
    "retry",
    async (t) =>
      (
        await t`UPDATE batches
          SET state = 'retry', next_attempt_at = ${m.nextAttemptAt}, lease_until = NULL, lease_owner = NULL,
        attempts = attempts + ${m.attempt.counted ? 1 : 0}, last_class = ${m.attempt.klass},
          last_error = ${scrubError(m.attempt.error)}
        WHERE id = ${m.batchId}::bigint AND state = 'leased' AND lease_owner = ${m.owner}`
      ).count,
    { next_attempt_at: m.nextAttemptAt },
  );
}

/** leased -> dead, with why, in the caller's transaction. */
export function markDeadPgTx(tx: Tx, m: MarkBase & { deadReason?: DeadReason }): Promise<boolean> {
  const reason = m.deadReason ?? "rejected";
  return fencedTx(
    tx,
    m,
    "dead",
    async (t) =>
      (
        await t`UPDATE batches SET state = 'dead', lease_until = NULL, lease_owner = NULL, next_attempt_at = NULL,
        attempts = attempts + ${m.attempt.counted ? 1 : 0}, last_class = ${m.attempt.klass},
          last_error = ${scrubError(m.attempt.error)}, dead_reason = ${reason}
        WHERE id = ${m.batchId}::bigint AND state = 'leased' AND lease_owner = ${m.owner}`
      ).count,
    { reason },
  );
}

export const markDeliveredPg = (spool: PgSpool, m: MarkBase & { result?: string }) =>
  spool.sql.begin((tx) => markDeliveredPgTx(tx, m));

export const markRetryPg = (spool: PgSpool, m: MarkBase & { nextAttemptAt: number }) =>
  spool.sql.begin((tx) => markRetryPgTx(tx, m));

export const markDeadPg = (spool: PgSpool, m: MarkBase & { deadReason?: DeadReason }) =>
  spool.sql.begin((tx) => markDeadPgTx(tx, m));

/** Close an attempt whose worker cannot go on (its batch vanished): discarded, uncounted. */
export async function abandonAttemptPg(spool: PgSpool, attemptId: number, now: number, why: string): Promise<void> {
  await spool.sql`UPDATE attempts
    SET finished_at = ${now}, outcome = 'discarded', error = ${scrubError(why)}, counted = 0
      WHERE id = ${attemptId}::bigint AND finished_at IS NULL`;
}
