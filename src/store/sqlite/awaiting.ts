// Awaited outcomes on SQLite: where a webhook-id points, an outcome reported for it (applying
// awaiting-plan.ts in a BEGIN IMMEDIATE transaction that the reports of one turn share: the
// outcome's attempt row, the batch's mark fenced on `awaiting`, the journal step, the issues),
// and the awaiting batches whose outcome is overdue.
import type { Database } from "bun:sqlite";
import { transportStrikesTx } from "./outcome.ts";
import {
  AGENT_CLASS,
  type AwaitedDelivery,
  type AwaitingFacts,
  type AwaitingPlan,
  planAwaiting,
  type ReportInput,
  type Reported,
  reportedOf,
  settles,
  type OverdueOutcome,
} from "../awaiting-plan.ts";
import { eachInSavepoint, prepared, type SqliteSpool } from "./db.ts";
import { raiseIssueTx, resolveIssueTx } from "./issues.ts";
import { journalTx } from "./journal.ts";
import { recordDeliveredVersionTx } from "./marks.ts";
import { scrubError } from "../marks.ts";

// The delivery's accepted attempt: the newest of class "await" with this webhook-id.
const ACCEPTED = `SELECT a.id, a.batch_id, a.finished_at, b.state, b.destination, b.route, b.attempts
  FROM attempts a JOIN batches b ON b.id = a.batch_id
  WHERE a.delivery_id = ? AND a.klass = 'await' ORDER BY a.id DESC LIMIT 1`;

const NEWEST_ACCEPTED = "SELECT MAX(id) AS id FROM attempts WHERE batch_id = ? AND klass = 'await'";

const ATTEMPT_ROWS = "SELECT COUNT(*) AS n FROM attempts WHERE batch_id = ?";

const INSERT_OUTCOME = `INSERT
  INTO attempts (batch_id, n, destination, started_at, finished_at, outcome, klass, error, duration_ms, counted,
    delivery_id, answer)
  VALUES ($batch, $n, $destination, $now, $now, $outcome, '${AGENT_CLASS}', $error, $duration, $counted, $delivery,
    $answer)`;

const DELIVERED = `UPDATE batches
  SET state = 'delivered', delivered_at = $now, result = $result, next_attempt_at = NULL,
    attempts = attempts + $counted, last_class = NULL, last_error = NULL
  WHERE id = $id AND state = 'awaiting'`;

const RETRY = `UPDATE batches
  SET state = 'retry', next_attempt_at = $next, attempts = attempts + 1, last_class = '${AGENT_CLASS}',
    last_error = $error
  WHERE id = $id AND state = 'awaiting'`;

const DEAD = `UPDATE batches
  SET state = 'dead', next_attempt_at = NULL, attempts = attempts + $counted, last_class = $klass,
    last_error = $error, dead_reason = $reason
  WHERE id = $id AND state = 'awaiting'`;

const OVERDUE = `SELECT b.id AS batchId, b.destination,
    (SELECT a.delivery_id FROM attempts a WHERE a.batch_id = b.id AND a.klass = 'await' ORDER BY a.id DESC
      LIMIT 1) AS deliveryId
  FROM batches b INDEXED BY batches_awaiting WHERE b.state = 'awaiting' AND b.next_attempt_at <= $now
    ORDER BY b.next_attempt_at LIMIT $limit`;

interface AcceptedRow {
  id: number;
  batch_id: number;
  finished_at: number;
  state: string;
  destination: string;
  route: string;
  attempts: number;
}

function acceptedTx(db: Database, deliveryId: string): AcceptedRow | null {
  return prepared<AcceptedRow, [string]>(db, ACCEPTED).get(deliveryId) ?? null;
}

function newestTx(db: Database, batchId: number): number | null {
  return prepared<{ id: number | null }, [number]>(db, NEWEST_ACCEPTED).get(batchId)?.id ?? null;
}

// The delivery's request still in flight: its attempt row is written at the claim, before the request.
const IN_FLIGHT = `SELECT a.batch_id, b.state, b.destination FROM attempts a JOIN batches b ON b.id = a.batch_id
  WHERE a.delivery_id = ? AND a.finished_at IS NULL ORDER BY a.id DESC LIMIT 1`;

/** Where `deliveryId` points, or null when no delivery of ours has it. */
export function awaitedDelivery(spool: SqliteSpool, deliveryId: string): AwaitedDelivery | null {
  const f = prepared<{ batch_id: number; state: string; destination: string }, [string]>(spool.db, IN_FLIGHT).get(
    deliveryId,
  );
  if (f) return { batchId: f.batch_id, destination: f.destination, state: f.state, awaiting: false, inFlight: true };
  const a = acceptedTx(spool.db, deliveryId);
  if (!a) return null;
  return {
    batchId: a.batch_id,
    destination: a.destination,
    state: a.state,
    awaiting: a.state === "awaiting" && newestTx(spool.db, a.batch_id) === a.id,
    inFlight: false,
  };
}

function factsTx(db: Database, r: ReportInput): AwaitingFacts | null {
  const a = acceptedTx(db, r.deliveryId);
  if (!a) return null;
  const facts: AwaitingFacts = {
    attemptId: a.id,
    acceptedAt: a.finished_at,
    batch: { id: a.batch_id, state: a.state, destination: a.destination, route: a.route, attempts: a.attempts },
    newest: newestTx(db, a.batch_id) === a.id,
    strikes: 0,
    attemptRows: prepared<{ n: number }, [number]>(db, ATTEMPT_ROWS).get(a.batch_id)?.n ?? 0,
  };
  const failing = r.status === "failed" || (r.status === "timeout" && r.onTimeout !== "delivered");
  if (failing && settles(facts)) facts.strikes = transportStrikesTx(db, a.batch_id, a.destination, r.now);
  return facts;
}

function applyTx(db: Database, f: AwaitingFacts, r: ReportInput, plan: AwaitingPlan): boolean {
  const id = f.batch.id;
  const m = plan.mark;
  const a = plan.attempt;
  let changed: number;
  if (m.kind === "delivered")
    changed = prepared(db, DELIVERED).run({ id, now: r.now, result: m.result, counted: a.counted ? 1 : 0 }).changes;
  else if (m.kind === "retry")
    changed = prepared(db, RETRY).run({ id, next: m.nextAttemptAt, error: scrubError(m.error) }).changes;
  else
    changed = prepared(db, DEAD).run({
      id,
      counted: a.counted ? 1 : 0,
      klass: m.deadReason === "poison" ? "poison" : AGENT_CLASS,
      error: scrubError(m.error),
      reason: m.deadReason,
    }).changes;
  if (changed !== 1) return false;
  if (m.kind === "delivered") recordDeliveredVersionTx(db, id, r.now);
  const row = prepared(db, INSERT_OUTCOME).run({
    batch: id,
    n: a.n,
    destination: f.batch.destination,
    now: r.now,
    outcome: a.outcome,
    error: scrubError(a.error),
    duration: a.durationMs,
    counted: a.counted ? 1 : 0,
    delivery: r.deliveryId,
    answer: a.answer,
  });
  const detail: Record<string, unknown> = { class: AGENT_CLASS, outcome: a.answer, via: r.via };
  if (m.kind === "retry") detail.next_attempt_at = m.nextAttemptAt;
  if (m.kind === "dead") detail.reason = m.deadReason;
  journalTx(db, m.kind, id, r.now, { attempt: Number(row.lastInsertRowid), detail });
  for (const issue of plan.raise) raiseIssueTx(db, issue);
  for (const fp of plan.resolve) resolveIssueTx(db, fp, r.now);
  return true;
}

/**
 * The outcome of the run a delivery started, in the caller's transaction: settles its awaiting
 * batch (delivered, retry or dead). An id no delivery of ours has is unknown; one whose batch no
 * longer awaits it (settled, replayed, dropped) is settled already and changes nothing.
 */
function reportOutcomeTx(db: Database, r: ReportInput): Reported {
  const facts = factsTx(db, r);
  if (!facts) return { kind: "unknown" };
  if (!settles(facts)) return { kind: "settled_already", batchId: facts.batch.id, state: facts.batch.state };
  const plan = planAwaiting(facts, r);
  if (!applyTx(db, facts, r, plan))
    return { kind: "settled_already", batchId: facts.batch.id, state: facts.batch.state };
  return reportedOf(facts, plan);
}

/**
 * Reports that arrive in the same turn of the event loop share one BEGIN IMMEDIATE transaction
 * (one commit, one fsync), each under its own savepoint: one that throws is undone alone and
 * its caller hears the error; a failed COMMIT fails them all. As the intake's group commit does
 * for events, so a receiver reporting many runs at once costs a commit per turn, not per report.
 */
export class ReportGroup {
  private queue: { r: ReportInput; resolve: (v: Reported) => void; reject: (e: unknown) => void }[] = [];

  constructor(private readonly spool: SqliteSpool) {}

  report(r: ReportInput): Promise<Reported> {
    return new Promise((resolve, reject) => {
      if (this.queue.push({ r, resolve, reject }) === 1) setImmediate(() => this.flush());
    });
  }

  private async flush(): Promise<void> {
    const jobs = this.queue;
    this.queue = [];
    const db = this.spool.db;
    let results: (Reported | Error)[];
    try {
      results = await this.spool.line.write(() => eachInSavepoint(db, jobs, (j) => reportOutcomeTx(db, j.r)));
    } catch (e) {
      for (const j of jobs) j.reject(e);
      return;
    }
    results.forEach((v, i) => (v instanceof Error ? jobs[i].reject(v) : jobs[i].resolve(v)));
  }
}

/** Awaiting batches whose outcome is overdue at `now`, the most overdue first, at most `limit`. */
export function overdueOutcomes(spool: SqliteSpool, now: number, limit: number): OverdueOutcome[] {
  return prepared<OverdueOutcome, Record<string, number>>(spool.db, OVERDUE).all({ now, limit });
}

/** The query plan of the overdue read (held to its index by the plans test). */
export function overduePlan(spool: SqliteSpool): string[] {
  return (
    spool.db.query(`EXPLAIN QUERY PLAN ${OVERDUE}`).all({ now: 0, limit: 1 } as never) as { detail: string }[]
  ).map((r) => r.detail);
}
