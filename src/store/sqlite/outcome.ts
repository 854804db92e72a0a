// The end of one attempt as one transaction: the outcome table (what each class does to the
// batch, its attempt counter and the destination's breaker), the fenced mark, the emits of a
// delivered script, and the issues the outcome opens or resolves. The dispatcher hands over a
// plain description of what happened; every decision that depends on stored state (the
// breaker, the poison run, a previous bad emit) is taken here, inside the same transaction.
import type { Database } from "bun:sqlite";
import { prepared, type SqliteSpool, eachInSavepoint, tx } from "./db.ts";
import { testHook } from "../../testhook.ts";
import { ignoredRun, PAST_LIMIT, type PastAttempt, previousBadEmit, strikeGaps } from "../attempts-plan.ts";
import {
  clearProbeTx,
  destinationStateTx,
  liftThrottleTx,
  pauseDestinationTx,
  recordSuccessTx,
  recordTransportFailureTx,
  setRetryAfterTx,
  throttleTx,
} from "./destinations.ts";
import { raiseIssueTx, resolveIssueTx } from "./issues.ts";
import type { MarkResult } from "../marks.ts";
import { markDeadTx, markDeliveredTx, markRetryTx } from "./marks.ts";
import {
  factsNeeded,
  type OutcomeFacts,
  type OutcomeInput,
  type OutcomePlan,
  planOutcome,
  type Recorded,
} from "../outcome-plan.ts";

const PAST = `SELECT outcome, klass, error, finished_at FROM attempts
  WHERE batch_id = ? AND finished_at IS NOT NULL AND outcome <> 'discarded' ORDER BY id DESC LIMIT ${PAST_LIMIT}`;

// An awaited delivery's 2xx (class "await") is not a success: its run's outcome is.
const SUCCESS_BETWEEN = `SELECT 1 FROM attempts
  WHERE destination = $destination AND batch_id <> $batch AND outcome = 'ok' AND (klass IS NULL OR klass <> 'await')
    AND finished_at >= $from AND finished_at < $to LIMIT 1`;

const pastAttempts = (db: Database, batchId: number) => prepared<PastAttempt, [number]>(db, PAST).all(batchId);

/** The poison run a strike finishing at `now` completes (strikeGaps says which gaps count). */
export function transportStrikesTx(db: Database, batchId: number, destination: string, now: number): number {
  let strikes = 0;
  for (const gap of strikeGaps(pastAttempts(db, batchId), now)) {
    if (!prepared(db, SUCCESS_BETWEEN).get({ destination, batch: batchId, ...gap })) break;
    strikes++;
  }
  return strikes;
}

const LATEST_ANSWERS = `SELECT answer FROM attempts WHERE destination = $destination AND outcome = 'ok'
  ORDER BY started_at DESC, id DESC LIMIT $limit`;

/** The destination's latest delivered answers (at most `limit`), newest first. */
const latestAnswers = (db: Database, destination: string, limit: number) =>
  prepared<{ answer: string | null }, Record<string, string | number>>(db, LATEST_ANSWERS)
    .all({ destination, limit })
    .map((a) => a.answer);

const BATCH = "SELECT destination, route, attempts FROM batches WHERE id = ?";

/**
 * Record how an attempt ended, in one BEGIN IMMEDIATE transaction. A worker that lost
 * its lease changes nothing but its own attempt row (discarded).
 */
export function recordOutcome(spool: SqliteSpool, input: OutcomeInput): Recorded {
  return tx(spool.db).immediate((): Recorded => {
    const r = recordOutcomeTx(spool.db, input);
    testHook("mark.before_commit");
    return r;
  });
}

/**
 * Record how several attempts ended in one BEGIN IMMEDIATE transaction (the dispatcher's
 * deliveries that end together share one commit), each under its own savepoint: one that
 * throws is undone alone and its error stands in its place. A failed COMMIT throws for all.
 */
export function recordOutcomes(spool: SqliteSpool, inputs: readonly OutcomeInput[]): (Recorded | Error)[] {
  if (inputs.length === 0) return [];
  return eachInSavepoint(
    spool.db,
    inputs,
    (input) => recordOutcomeTx(spool.db, input),
    () => testHook("mark.before_commit"),
  );
}

/** The facts the plan needs, read in the transaction; the costlier ones only when it needs them. */
function factsTx(db: Database, f: OutcomeInput): OutcomeFacts | null {
  const batch = prepared<OutcomeFacts["batch"], [number]>(db, BATCH).get(f.batchId);
  if (!batch) return null;
  const need = factsNeeded(f);
  const destination = destinationStateTx(db, batch.destination);
  return {
    batch,
    destination,
    strikes:
      need.strikes && destination.state === "closed" ? transportStrikesTx(db, f.batchId, batch.destination, f.now) : 0,
    previousBadEmit: need.previousBadEmit ? previousBadEmit(pastAttempts(db, f.batchId)) : false,
    ignoredRun: need.ignoredRun > 0 ? ignoredRun(latestAnswers(db, batch.destination, need.ignoredRun)) : 0,
  };
}

/** Make the plan's mark; when it applied, its effects, in order. The breaker's verdict joins the record. */
function applyTx(db: Database, f: OutcomeInput, plan: OutcomePlan, dest: string): Recorded {
  const base = { batchId: f.batchId, attemptId: f.attemptId, owner: f.owner, now: f.now };
  const m = plan.mark;
  let r: MarkResult;
  if (m.kind === "delivered")
    r = markDeliveredTx(db, {
      ...base,
      emits: m.emits,
      attempt: m.attempt,
      result: m.result,
      awaitUntil: m.awaitUntil,
    });
  else if (m.kind === "retry") r = markRetryTx(db, { ...base, nextAttemptAt: m.nextAttemptAt, attempt: m.attempt });
  else r = markDeadTx(db, { ...base, deadReason: m.deadReason, attempt: m.attempt });
  if (!r.applied) return { applied: false };
  const recorded: Recorded = { ...plan.recorded };
  for (const e of plan.effects) {
    switch (e.kind) {
      case "success": {
        const before = recordSuccessTx(db, dest, f.now);
        if (before === "open" || before === "half_open") recorded.breaker = "closed";
        break;
      }
      case "transport_failure": {
        const effect = recordTransportFailureTx(db, dest, e.failure);
        if (effect === "tripped" || effect === "retripped") {
          raiseIssueTx(db, e.onTrip(effect === "retripped"));
          recorded.breaker = effect === "tripped" ? "opened" : "reopened";
        }
        break;
      }
      case "retry_after":
        setRetryAfterTx(db, dest, e.until);
        break;
      case "throttle":
        throttleTx(db, dest, f.now, e.until, e.throttleS);
        break;
      case "lift_throttle":
        liftThrottleTx(db, dest, e.startedAt);
        break;
      case "pause":
        pauseDestinationTx(db, dest, e.by, f.now);
        break;
      case "clear_probe":
        clearProbeTx(db, dest);
        break;
      case "raise":
        raiseIssueTx(db, e.issue);
        break;
      case "resolve":
        resolveIssueTx(db, e.fingerprint, f.now);
        break;
    }
  }
  return recorded;
}

function recordOutcomeTx(db: Database, f: OutcomeInput): Recorded {
  const facts = factsTx(db, f);
  if (!facts) return { applied: false };
  return applyTx(db, f, planOutcome(facts, f), facts.batch.destination);
}
