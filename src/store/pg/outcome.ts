// The end of an attempt on PostgreSQL: the facts read in the transaction (the batch, the
// destination's row locked, the batch's poison run, a previous bad emit, the destination's ignored answers), the
// plan of store/outcome-plan.ts (the same rules as SQLite's), and its mark and effects applied in
// that transaction. Several outcomes share one transaction, each in a savepoint.
import type { PgSpool, Tx } from "./db.ts";
import { closedRow, type DestinationRow } from "../destinations.ts";
import { factsNeeded, type OutcomeFacts, type OutcomeInput, planOutcome, type Recorded } from "../outcome-plan.ts";
import {
  clearProbePg,
  destinationRowOf,
  liftThrottlePg,
  pauseDestinationPgTx,
  recordSuccessPg,
  recordTransportFailurePg,
  setRetryAfterPg,
  throttlePg,
} from "./destinations.ts";
import { raiseIssuePg, resolveIssuePg } from "./issues.ts";
import { markDeadPgTx, markDeliveredPgTx, markRetryPgTx } from "./marks.ts";
import { testHook } from "../../testhook.ts";
import { ignoredRun, PAST_LIMIT, type PastAttempt, previousBadEmit, strikeGaps } from "../attempts-plan.ts";

/** The batch's finished attempts, newest first (the ones the rules of attempts-plan.ts read). */
async function pastAttempts(tx: Tx, batchId: number): Promise<PastAttempt[]> {
  const rows = (await tx`SELECT outcome, klass, error, finished_at FROM attempts
      WHERE batch_id = ${batchId}::bigint AND finished_at IS NOT NULL AND outcome <> 'discarded' ORDER BY id DESC
        LIMIT ${PAST_LIMIT}`) as Record<string, unknown>[];
  return rows.map((r) => ({
    outcome: (r.outcome as string | null) ?? null,
    klass: (r.klass as string | null) ?? null,
    error: (r.error as string | null) ?? null,
    finished_at: Number(r.finished_at),
  }));
}

/** The poison run a strike finishing at `now` completes (strikeGaps says which gaps count). */
export async function transportStrikesPg(tx: Tx, batchId: number, destination: string, now: number): Promise<number> {
  let strikes = 0;
  for (const gap of strikeGaps(await pastAttempts(tx, batchId), now)) {
    // An awaited delivery's 2xx (class "await") is not a success: its run's outcome is.
    const [delivered] =
      await tx`SELECT 1 AS one FROM attempts WHERE destination = ${destination} AND batch_id <> ${batchId}::bigint
        AND outcome = 'ok'
        AND (klass IS NULL OR klass <> 'await') AND finished_at >= ${gap.from} AND finished_at < ${gap.to} LIMIT 1`;
    if (!delivered) break;
    strikes++;
  }
  return strikes;
}

/** The destination's row, locked for the transaction (a destination never seen is closed). */
async function destinationLocked(tx: Tx, name: string): Promise<DestinationRow> {
  const [r] = await tx`SELECT * FROM destinations WHERE name = ${name} FOR UPDATE`;
  return r ? destinationRowOf(r) : closedRow(name);
}

/** The destination's latest delivered answers (at most `limit`), newest first. */
async function latestAnswersPg(tx: Tx, destination: string, limit: number): Promise<(string | null)[]> {
  const rows = (await tx`SELECT answer FROM attempts WHERE destination = ${destination} AND outcome = 'ok'
      ORDER BY started_at DESC, id DESC LIMIT ${limit}`) as {
    answer: string | null;
  }[];
  return rows.map((a) => a.answer);
}

async function factsPg(tx: Tx, f: OutcomeInput): Promise<OutcomeFacts | null> {
  const [b] = await tx`SELECT destination, route, attempts FROM batches WHERE id = ${f.batchId}::bigint`;
  if (!b) return null;
  const batch = { destination: String(b.destination), route: String(b.route), attempts: Number(b.attempts) };
  const need = factsNeeded(f);
  const destination = await destinationLocked(tx, batch.destination);
  return {
    batch,
    destination,
    strikes:
      need.strikes && destination.state === "closed"
        ? await transportStrikesPg(tx, f.batchId, batch.destination, f.now)
        : 0,
    previousBadEmit: need.previousBadEmit ? previousBadEmit(await pastAttempts(tx, f.batchId)) : false,
    ignoredRun: need.ignoredRun > 0 ? ignoredRun(await latestAnswersPg(tx, batch.destination, need.ignoredRun)) : 0,
  };
}

async function recordOutcomePgTx(tx: Tx, f: OutcomeInput): Promise<Recorded> {
  const facts = await factsPg(tx, f);
  if (!facts) return { applied: false };
  const plan = planOutcome(facts, f);
  const dest = facts.batch.destination;
  const base = { batchId: f.batchId, attemptId: f.attemptId, owner: f.owner, now: f.now };
  const m = plan.mark;
  let applied: boolean;
  if (m.kind === "delivered") {
    applied = await markDeliveredPgTx(tx, {
      ...base,
      attempt: m.attempt,
      result: m.result,
      emits: m.emits,
      awaitUntil: m.awaitUntil,
    });
  } else if (m.kind === "retry")
    applied = await markRetryPgTx(tx, { ...base, nextAttemptAt: m.nextAttemptAt, attempt: m.attempt });
  else applied = await markDeadPgTx(tx, { ...base, deadReason: m.deadReason, attempt: m.attempt });
  if (!applied) return { applied: false };
  const recorded: Recorded = { ...plan.recorded };
  for (const e of plan.effects) {
    switch (e.kind) {
      case "success": {
        const before = await recordSuccessPg(tx, dest, f.now);
        if (before === "open" || before === "half_open") recorded.breaker = "closed";
        break;
      }
      case "transport_failure": {
        const effect = await recordTransportFailurePg(tx, dest, e.failure);
        if (effect === "tripped" || effect === "retripped") {
          await raiseIssuePg(tx, e.onTrip(effect === "retripped"));
          recorded.breaker = effect === "tripped" ? "opened" : "reopened";
        }
        break;
      }
      case "retry_after":
        await setRetryAfterPg(tx, dest, e.until);
        break;
      case "throttle":
        await throttlePg(tx, dest, f.now, e.until, e.throttleS);
        break;
      case "lift_throttle":
        await liftThrottlePg(tx, dest, e.startedAt);
        break;
      case "pause":
        await pauseDestinationPgTx(tx, dest, e.by, f.now);
        break;
      case "clear_probe":
        await clearProbePg(tx, dest);
        break;
      case "raise":
        await raiseIssuePg(tx, e.issue);
        break;
      case "resolve":
        await resolveIssuePg(tx, e.fingerprint, f.now);
        break;
    }
  }
  return recorded;
}

/**
 * How several attempts ended, in one transaction, each in its own savepoint: one that throws is
 * undone alone and its error stands in its place. A failed COMMIT throws for all.
 */
export async function recordOutcomesPg(spool: PgSpool, inputs: readonly OutcomeInput[]): Promise<(Recorded | Error)[]> {
  if (inputs.length === 0) return [];
  // In destination then batch order, the order every transaction that locks several destination
  // rows takes them, so two dispatchers' outcome transactions never wait on each other in a cycle.
  const order = inputs
    .map((input, i) => ({ input, i }))
    .sort(
      (a, b) =>
        (a.input.destination ?? "").localeCompare(b.input.destination ?? "") || a.input.batchId - b.input.batchId,
    );
  return spool.sql.begin(async (tx) => {
    const out: (Recorded | Error)[] = new Array(inputs.length);
    for (const { input, i } of order) {
      try {
        out[i] = await tx.savepoint((sp) => recordOutcomePgTx(sp, input));
      } catch (e) {
        out[i] = e instanceof Error ? e : new Error(String(e));
      }
    }
    testHook("mark.before_commit");
    return out;
  });
}
