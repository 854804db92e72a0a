// How an attempt ends: the fenced marks (leased -> delivered, awaiting, retry or dead). Each mark checks
// the lease_owner fence, so a worker that lost its lease records its attempt as discarded and
// changes nothing else. The outcome table that chooses the mark is outcome.ts.
import type { Database } from "bun:sqlite";
import type { DeadReason } from "../../delivery.ts";
import { testHook } from "../../testhook.ts";
import { prepared, type SqliteSpool } from "./db.ts";
import { pollDeliveredTx } from "./polls.ts";
import { enqueueTx } from "./enqueue.ts";
import type { EnqueueResult, NewEvent } from "../enqueue.ts";
import { journalTx } from "./journal.ts";
import { scrubError, type AttemptOutcome, type MarkResult, attemptFacts, type MarkBase } from "../marks.ts";

const FINISH = `UPDATE attempts
  SET finished_at = $now, outcome = $outcome, klass = $klass, status = $status, error = $error,
    duration_ms = $duration, counted = $counted, events_delivered = $delivered, failed_event_id = $failed,
    hits = CASE WHEN hits IS NULL THEN NULL ELSE COALESCE($hits, hits) END, answer = $answer, unconfirmed = $unconfirmed
  WHERE id = $id`;

function finishAttempt(db: Database, m: MarkBase, outcome: AttemptOutcome): void {
  const a = m.attempt;
  prepared(db, FINISH).run({
    id: m.attemptId,
    now: m.now,
    outcome,
    klass: a.klass,
    status: a.status,
    error: scrubError(a.error),
    duration: Math.round(a.durationMs),
    counted: outcome !== "discarded" && a.counted ? 1 : 0,
    delivered: a.eventsDelivered ?? null,
    failed: a.failedEventId ?? null,
    // A lost lease's request went out all the same: its hits stay as reserved.
    hits: outcome === "discarded" ? null : (a.hits ?? null),
    answer: a.answer ?? null,
    unconfirmed: a.unconfirmed ? 1 : 0,
  });
}

/**
 * A fenced mark inside the caller's transaction: `update` must touch exactly the leased row this
 * owner holds. When it touches none, the worker lost its lease: the attempt is recorded as
 * discarded and nothing else (emits included) is applied.
 */
function fencedTx(
  db: Database,
  m: MarkBase & { awaitUntil?: number },
  outcome: "ok" | "retry" | "dead",
  update: () => number,
  after?: () => EnqueueResult[],
  detail: Record<string, unknown> = {},
): MarkResult {
  if (update() !== 1) {
    finishAttempt(db, m, "discarded");
    return { applied: false };
  }
  finishAttempt(db, m, outcome);
  // What watch shows of the attempt: its class and status code, never its error text.
  const facts = { ...attemptFacts(m.attempt), ...detail };
  const kind = outcome !== "ok" ? outcome : m.awaitUntil !== undefined ? "awaiting" : "delivered";
  journalTx(db, kind, m.batchId, m.now, {
    attempt: m.attemptId,
    detail: m.awaitUntil !== undefined ? { ...facts, until: m.awaitUntil } : facts,
  });
  return { applied: true, emitted: after ? after() : [] };
}

/** A mark in a transaction of its own. */
export function own(spool: SqliteSpool, mark: (db: Database) => MarkResult): MarkResult {
  return spool.db
    .transaction(() => {
      const r = mark(spool.db);
      testHook("mark.before_commit");
      return r;
    })
    .immediate();
}

const DELIVERED = `UPDATE batches SET state = 'delivered', delivered_at = $now, result = $result, lease_until = NULL,
    lease_owner = NULL, attempts = attempts + $counted, last_class = NULL, last_error = NULL
  WHERE id = $id AND state = 'leased' AND lease_owner = $owner`;

const AWAITING = `UPDATE batches SET state = 'awaiting', next_attempt_at = $until, result = $result, lease_until = NULL,
    lease_owner = NULL, attempts = attempts + $counted, last_class = NULL, last_error = NULL
  WHERE id = $id AND state = 'leased' AND lease_owner = $owner`;

// The highest version a delivered batch carried becomes its (route, key)'s last delivered
// version, never lower than it was (stale-plan.ts); its age is the key's last delivery.
const DELIVERED_VERSION = `INSERT INTO delivered_versions (route, key, version, batch_id, at)
  SELECT b.route, b.key, m.v, b.id, $now
    FROM batches b, (SELECT MAX(version) AS v FROM events WHERE batch_id = $id AND excluded_at IS NULL) m
    WHERE b.id = $id AND m.v IS NOT NULL
  ON CONFLICT (route, key) DO UPDATE SET
    batch_id = CASE WHEN excluded.version > version THEN excluded.batch_id ELSE batch_id END,
    version = MAX(version, excluded.version), at = MAX(at, excluded.at)`;

/** A batch marked delivered: its versions' highest is its key's last delivered one, in the mark's transaction. */
export function recordDeliveredVersionTx(db: Database, batchId: number, now: number): void {
  prepared(db, DELIVERED_VERSION).run({ id: batchId, now });
}

/**
 * leased -> delivered, with the script's emits enqueued in the same transaction; or, when the
 * run's outcome is awaited, leased -> awaiting until `awaitUntil` (the lease released, the key
 * still held; store/awaiting.ts ends it).
 */
export function markDeliveredTx(
  db: Database,
  m: MarkBase & { result?: string; emits?: NewEvent[]; awaitUntil?: number },
): MarkResult {
  const row = { id: m.batchId, owner: m.owner, result: m.result ?? "ok", counted: m.attempt.counted ? 1 : 0 };
  return fencedTx(
    db,
    m,
    "ok",
    () =>
      (m.awaitUntil !== undefined
        ? prepared(db, AWAITING).run({ ...row, until: m.awaitUntil })
        : prepared(db, DELIVERED).run({ ...row, now: m.now })
      ).changes,
    () => {
      // A poll source's tick batch: its delivery is the instance's last delivered tick.
      pollDeliveredTx(db, m.batchId, m.now);
      // An awaited run's outcome is still to come: its versions count when it is delivered.
      if (m.awaitUntil === undefined) recordDeliveredVersionTx(db, m.batchId, m.now);
      return (m.emits ?? []).map((ev) => enqueueTx(db, ev, m.now));
    },
  );
}

export function markDelivered(spool: SqliteSpool, m: MarkBase & { result?: string; emits?: NewEvent[] }): MarkResult {
  return own(spool, (db) => markDeliveredTx(db, m));
}

const RETRY = `UPDATE batches SET state = 'retry', next_attempt_at = $next, lease_until = NULL, lease_owner = NULL,
    attempts = attempts + $counted, last_class = $klass, last_error = $error
  WHERE id = $id AND state = 'leased' AND lease_owner = $owner`;

/** leased -> retry, due at `nextAttemptAt`. */
export function markRetryTx(db: Database, m: MarkBase & { nextAttemptAt: number }): MarkResult {
  return fencedTx(
    db,
    m,
    "retry",
    () =>
      prepared(db, RETRY).run({
        id: m.batchId,
        owner: m.owner,
        next: m.nextAttemptAt,
        counted: m.attempt.counted ? 1 : 0,
        klass: m.attempt.klass,
        error: scrubError(m.attempt.error),
      }).changes,
    undefined,
    { next_attempt_at: m.nextAttemptAt },
  );
}

const DEAD = `UPDATE batches SET state = 'dead', lease_until = NULL, lease_owner = NULL, next_attempt_at = NULL,
    attempts = attempts + $counted, last_class = $klass, last_error = $error, dead_reason = $reason
  WHERE id = $id AND state = 'leased' AND lease_owner = $owner`;

export function markRetry(spool: SqliteSpool, m: MarkBase & { nextAttemptAt: number }): MarkResult {
  return own(spool, (db) => markRetryTx(db, m));
}

/** leased -> dead, with why (the receiver's refusal unless the caller says otherwise). */
export function markDeadTx(db: Database, m: MarkBase & { deadReason?: DeadReason }): MarkResult {
  return fencedTx(
    db,
    m,
    "dead",
    () =>
      prepared(db, DEAD).run({
        id: m.batchId,
        owner: m.owner,
        counted: m.attempt.counted ? 1 : 0,
        klass: m.attempt.klass,
        error: scrubError(m.attempt.error),
        reason: m.deadReason ?? "rejected",
      }).changes,
    undefined,
    { reason: m.deadReason ?? "rejected" },
  );
}

export function markDead(spool: SqliteSpool, m: MarkBase & { deadReason?: DeadReason }): MarkResult {
  return own(spool, (db) => markDeadTx(db, m));
}

const ABANDON = `UPDATE attempts SET finished_at = $now, outcome = 'discarded', error = $why, counted = 0
  WHERE id = $id AND finished_at IS NULL`;

/** Close an attempt whose worker cannot go on (its batch vanished): discarded, uncounted. */
export function abandonAttempt(spool: SqliteSpool, attemptId: number, now: number, why: string): void {
  spool.db.transaction(() => prepared(spool.db, ABANDON).run({ id: attemptId, now, why: scrubError(why) })).immediate();
}
