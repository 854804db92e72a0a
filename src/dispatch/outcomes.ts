// The outcome table of spec 6.5: what each class does to the batch, the attempt counter and the
// breaker, applied as one fenced transaction with the issues it opens or resolves.
import type { Database } from "bun:sqlite";
import type { Rng } from "../clock.ts";
import type { Outcome } from "../delivery.ts";
import { consecutiveThrottles, previousBadEmit, transportStrikes } from "../store/attempts.ts";
import { type AttemptRecord, type Claim, markDead, markDelivered, markRetry } from "../store/batches.ts";
import type { Spool } from "../store/db.ts";
import { clearProbeTx, destinationState, recordSuccessTx, recordTransportFailureTx, setRetryAfterTx } from "../store/destinations.ts";
import type { NewEvent } from "../store/enqueue.ts";
import type { BatchRow } from "../store/queries.ts";
import { backoffS, retryDelayS } from "./backoff.ts";
import { type IssueContext, onConfigTx, onCountedStreakTx, onDeadTx, onNoticeTx, onSuccessTx, onTripTx } from "./issues.ts";

/** Five strikes, six failures in a row with the destination delivering in between (spec 4.2). */
export const POISON_STRIKES = 5;

export interface Policy {
  maxAttempts: number;
  backoffBaseS: number;
  backoffCapS: number;
  tripAfter: number;
  cooldownInitialS: number;
  cooldownMaxS: number;
}

export interface Finished {
  batch: BatchRow;
  claim: Claim;
  /** When the attempt started: only an attempt started after opened_at is a probe. */
  startedAt: number;
  probe: boolean;
  outcome: Outcome;
  /** Emits, validated and resolved; enqueued with the delivered mark. */
  emits: NewEvent[];
  durationMs: number;
  /** now_eff when the attempt ended. */
  now: number;
  /** A script destination (its counted failures are script_exit issues). */
  script: boolean;
}

export type Applied =
  | { applied: false }
  | {
      applied: true;
      state: "delivered" | "retry" | "dead";
      klass: string | null;
      nextAttemptAt?: number;
      effect?: string;
      /** The breaker changed state with this outcome. */
      breaker?: "opened" | "reopened" | "closed";
    };

export function applyOutcome(spool: Spool, policy: Policy, rng: Rng, f: Finished): Applied {
  const { batch, claim, outcome: o, now } = f;
  const dest = batch.destination;
  const issue: IssueContext = { destination: dest, route: batch.route, batchId: batch.id, now };
  const record = (klass: string | null, counted: boolean, error: string | null = o.detail): AttemptRecord => ({
    klass,
    status: o.status,
    error,
    durationMs: f.durationMs,
    counted,
    eventsDelivered: o.eventsDelivered,
    failedEventId: o.failedEventId,
  });
  const base = { batchId: batch.id, attemptId: claim.attemptId, owner: claim.owner, now };
  const d = destinationState(spool.db, dest);
  // A probe that ends without a verdict on the destination frees the way for the next probe.
  const neutral = (db: Database) => {
    if (f.probe) clearProbeTx(db, dest);
  };
  const retry = (klass: string, counted: boolean, delay: number, alsoTx: (db: Database) => void, error?: string): Applied => {
    const next = now + delay;
    const r = markRetry(spool, {
      ...base,
      nextAttemptAt: next,
      attempt: record(klass, counted, error),
      alsoTx: (db) => {
        if (klass !== "transport") neutral(db);
        alsoTx(db);
      },
    });
    return r.applied ? { applied: true, state: "retry", klass, nextAttemptAt: next } : { applied: false };
  };
  const dead = (klass: string, counted: boolean, reasonClass: "permanent" | "poison" | "exhausted", alsoTx?: (db: Database) => void, error?: string): Applied => {
    const r = markDead(spool, {
      ...base,
      attempt: record(klass, counted, error),
      alsoTx: (db) => {
        neutral(db);
        alsoTx?.(db);
        onDeadTx(db, issue, reasonClass, error ?? o.reason);
      },
    });
    return r.applied ? { applied: true, state: "dead", klass } : { applied: false };
  };

  if (o.kind === "ok") {
    let before = "closed";
    const r = markDelivered(spool, {
      ...base,
      emits: f.emits,
      attempt: record(null, !f.probe, null),
      alsoTx: (db) => {
        before = recordSuccessTx(db, dest, now);
        onSuccessTx(db, dest, now);
        if (o.notice) onNoticeTx(db, issue, o.notice);
      },
    });
    if (!r.applied) return { applied: false };
    return { applied: true, state: "delivered", klass: null, ...(before === "open" || before === "half_open" ? { breaker: "closed" as const } : {}) };
  }

  if (o.kind === "dead") return dead("permanent", false, "permanent");

  switch (o.klass) {
    case "transport": {
      // spec 4.2: a batch that keeps failing while the destination delivers others is poison;
      // it dies uncounted and does not count against the breaker, so the destination drains.
      if (d.state === "closed" && transportStrikes(spool.db, batch.id, dest, now) >= POISON_STRIKES) {
        return dead("poison", false, "poison", undefined, `poison: ${o.reason}, ${POISON_STRIKES + 1} failures in a row while the destination delivered other batches`);
      }
      const n = d.state === "closed" ? d.consecutive_failures + 1 : Math.max(1, d.consecutive_failures);
      let effect = "";
      const r = retry("transport", false, retryDelayS(backoffS(n, policy.backoffBaseS, policy.backoffCapS, rng), o.retryAfterS), (db) => {
        effect = recordTransportFailureTx(db, dest, { now, startedAt: f.startedAt, tripAfter: policy.tripAfter, cooldownInitialS: policy.cooldownInitialS, cooldownMaxS: policy.cooldownMaxS, error: o.reason });
        if (effect === "tripped" || effect === "retripped") onTripTx(db, issue, o, effect === "retripped");
      });
      if (!r.applied) return r;
      const breaker = effect === "tripped" ? "opened" : effect === "retripped" ? "reopened" : undefined;
      return { ...r, effect, ...(breaker ? { breaker } : {}) };
    }
    case "throttle": {
      // A hint in the future is honoured (capped at 1 h) and gates the destination. Without one
      // (none sent, or 0, or a past date) the batch backs off on the schedule, keyed on its own
      // run of throttles, since a throttle never moves the destination's failure counter.
      const hinted = o.retryAfterS !== null && o.retryAfterS > 0;
      const delay = hinted ? retryDelayS(0, o.retryAfterS) : backoffS(consecutiveThrottles(spool.db, batch.id) + 1, policy.backoffBaseS, policy.backoffCapS, rng);
      return retry("throttle", false, delay, (db) => {
        if (hinted) setRetryAfterTx(db, dest, now + delay);
      });
    }
    case "batch": {
      const attempts = batch.attempts + 1;
      if (o.badEmit && previousBadEmit(spool.db, batch.id)) {
        return dead("permanent", true, "permanent", undefined, `bad emit twice: ${o.reason}`);
      }
      if (attempts >= policy.maxAttempts) {
        return dead("batch", true, "exhausted", undefined, `${o.reason}; ${attempts} counted attempts (max_attempts)`);
      }
      const error = o.badEmit ? `bad emit: ${o.detail}` : o.detail;
      return retry(
        "batch",
        true,
        retryDelayS(backoffS(attempts, policy.backoffBaseS, policy.backoffCapS, rng), o.retryAfterS),
        (db) => {
          if (attempts >= 3) onCountedStreakTx(db, issue, f.script, o.reason, attempts);
        },
        error,
      );
    }
    case "config":
      // The operator's to fix and often transient: retried at the backoff cap, uncounted, made
      // due at once by a successful reload (spec 6.5).
      return retry("config", false, retryDelayS(policy.backoffCapS, o.retryAfterS), (db) => onConfigTx(db, issue, o.reason));
    default:
      return retry("transport", false, backoffS(1, policy.backoffBaseS, policy.backoffCapS, rng), () => {});
  }
}
