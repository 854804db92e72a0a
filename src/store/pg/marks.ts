// The fenced marks on PostgreSQL: delivered (or awaiting), retry and dead, each changing the
// batch only while this dispatcher's lease still holds it (lease_owner and the attempt id), and
// the attempt row finished with it; an abandoned attempt. The same fence as SQLite's marks.ts.
import type { DeadReason } from "../../delivery.ts";
import { attemptFacts, type MarkBase, scrubError } from "../marks.ts";
import type { PgSpool, Tx } from "./db.ts";
import { journalPg } from "./journal.ts";
import type { NewEvent } from "../enqueue.ts";
import { enqueueEventsPgTx } from "./enqueue.ts";
import { pollDeliveredPgTx } from "./polls.ts";

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
 * leased -> delivered, in the caller's transaction, or leased -> awaiting until `awaitUntil`
 * when the run's outcome is awaited. False when the lease was lost (the attempt is discarded,
 * nothing else applies).
 */
export async function markDeliveredPgTx(
  tx: Tx,
  m: MarkBase & { result?: string; emits?: NewEvent[]; awaitUntil?: number },
): Promise<boolean> {
  const applied =
    m.awaitUntil !== undefined
      ? await fencedTx(
          tx,
          m,
          "ok",
          async (t) =>
            (
              await t`UPDATE batches
                SET state = 'awaiting', next_attempt_at = ${m.awaitUntil}, result = ${m.result ?? "ok"},
                  lease_until = NULL,
        lease_owner = NULL, attempts = attempts + ${m.attempt.counted ? 1 : 0}, last_class = NULL, last_error = NULL
        WHERE id = ${m.batchId}::bigint AND state = 'leased' AND lease_owner = ${m.owner}`
            ).count,
        )
      : await fencedTx(
          tx,
          m,
          "ok",
          async (t) =>
            (
              await t`UPDATE batches
                SET state = 'delivered', delivered_at = ${m.now}, result = ${m.result ?? "ok"}, lease_until = NULL,
        lease_owner = NULL, attempts = attempts + ${m.attempt.counted ? 1 : 0}, last_class = NULL, last_error = NULL
        WHERE id = ${m.batchId}::bigint AND state = 'leased' AND lease_owner = ${m.owner}`
            ).count,
        );
  if (applied) {
    // As on SQLite, in the mark's step: a poll source's tick batch's delivery is the instance's
    // last delivered tick, and a delivered script's emits are queued in the same transaction.
    await pollDeliveredPgTx(tx, m.batchId, m.now);
    await enqueueEventsPgTx(tx, m.emits ?? [], m.now);
  }
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
