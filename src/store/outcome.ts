// The end of one attempt as one transaction: the outcome table (what each class does to the
// batch, its attempt counter and the destination's breaker), the fenced mark, the emits of a
// delivered script, and the issues the outcome opens or resolves. The dispatcher hands over a
// plain description of what happened; every decision that depends on stored state (the
// breaker, the poison run, a previous bad emit) is taken here, inside the same transaction.
import type { Database } from "bun:sqlite";
import type { DeadReason, Outcome } from "../delivery.ts";
import { testHook } from "../testhook.ts";
import { consecutiveThrottlesTx, previousBadEmitTx, transportStrikesTx } from "./attempts.ts";
import { backoffS, retryDelayS } from "./backoff.ts";
import { prepared, type Spool } from "./db.ts";
import { clearProbeTx, destinationStateTx, recordSuccessTx, recordTransportFailureTx, setRetryAfterTx } from "./destinations.ts";
import type { NewEvent } from "./enqueue.ts";
import { raiseIssueTx, resolveIssueTx } from "./issues.ts";
import { type AttemptRecord, type MarkResult, markDeadTx, markDeliveredTx, markRetryTx } from "./marks.ts";

/** Five strikes, six failures in a row with the destination delivering in between. */
export const POISON_STRIKES = 5;

export interface Policy {
  maxAttempts: number;
  backoffBaseS: number;
  backoffCapS: number;
  tripAfter: number;
  cooldownInitialS: number;
  cooldownMaxS: number;
}

/** What happened in one attempt, as the dispatcher saw it. */
export interface OutcomeInput {
  batchId: number;
  /** The claim's attempt row and lease fence. */
  attemptId: number;
  owner: string;
  /** When the attempt started: only an attempt started after opened_at is a probe. */
  startedAt: number;
  probe: boolean;
  /** A script destination (its counted failures are script_exit issues). */
  script: boolean;
  outcome: Outcome;
  /** Emits, validated and routed; enqueued with the delivered mark. */
  emits: NewEvent[];
  durationMs: number;
  /** now_eff when the attempt ended. */
  now: number;
  /** Uniform in [0, 1): the backoff's jitter, drawn by the caller (so this stays deterministic). */
  jitter: number;
  policy: Policy;
}

export type Recorded =
  | { applied: false }
  | {
      applied: true;
      state: "delivered" | "retry" | "dead";
      klass: string | null;
      nextAttemptAt?: number;
      /** The breaker changed state with this outcome. */
      breaker?: "opened" | "reopened" | "closed";
      /** Why it is dead, when it is. */
      deadReason?: DeadReason;
    };

interface Batch {
  destination: string;
  route: string;
  attempts: number;
}

const BATCH = "SELECT destination, route, attempts FROM batches WHERE id = ?";

/**
 * Record how an attempt ended, in one BEGIN IMMEDIATE transaction. A worker that lost
 * its lease changes nothing but its own attempt row (discarded).
 */
export function recordOutcome(spool: Spool, input: OutcomeInput): Recorded {
  return spool.db
    .transaction((): Recorded => {
      const r = recordOutcomeTx(spool.db, input);
      testHook("mark.before_commit");
      return r;
    })
    .immediate();
}

/**
 * Record how several attempts ended in one BEGIN IMMEDIATE transaction (the dispatcher's
 * deliveries that end together share one commit), each under its own savepoint: one that
 * throws is undone alone and its error stands in its place. A failed COMMIT throws for all.
 */
export function recordOutcomes(spool: Spool, inputs: readonly OutcomeInput[]): (Recorded | Error)[] {
  const db = spool.db;
  if (inputs.length === 0) return [];
  return db
    .transaction((): (Recorded | Error)[] => {
      const recorded = inputs.map((input) => {
        try {
          return db.transaction(() => recordOutcomeTx(db, input))();
        } catch (e) {
          // A full disk or an I/O error ends the whole transaction: none of the outcomes stands.
          if (!db.inTransaction) throw e;
          return e instanceof Error ? e : new Error(String(e));
        }
      });
      testHook("mark.before_commit");
      return recorded;
    })
    .immediate();
}

function recordOutcomeTx(db: Database, f: OutcomeInput): Recorded {
  const batch = prepared<Batch, [number]>(db, BATCH).get(f.batchId);
  if (!batch) return { applied: false };
  const o = f.outcome;
  const { now, policy } = f;
  const dest = batch.destination;
  const issue: IssueContext = { destination: dest, route: batch.route, batchId: f.batchId, now };
  const rng = { next: () => f.jitter };
  const record = (klass: string | null, counted: boolean, error: string | null = o.detail): AttemptRecord => ({
    klass,
    status: o.status,
    error,
    durationMs: f.durationMs,
    counted,
    eventsDelivered: o.eventsDelivered,
    failedEventId: o.failedEventId,
  });
  const base = { batchId: f.batchId, attemptId: f.attemptId, owner: f.owner, now };
  const d = destinationStateTx(db, dest);
  // A probe that ends without a verdict on the destination frees the way for the next probe.
  const neutral = () => {
    if (f.probe) clearProbeTx(db, dest);
  };
  const applied = (r: MarkResult, state: "delivered" | "retry" | "dead", klass: string | null, extra: Partial<Extract<Recorded, { applied: true }>> = {}): Recorded =>
    r.applied ? { applied: true, state, klass, ...extra } : { applied: false };
  const retry = (klass: string, counted: boolean, delay: number, also: () => void, error?: string): Recorded => {
    const next = now + delay;
    const r = markRetryTx(db, { ...base, nextAttemptAt: next, attempt: record(klass, counted, error) });
    if (!r.applied) return { applied: false };
    if (klass !== "transport") neutral();
    also();
    return { applied: true, state: "retry", klass, nextAttemptAt: next };
  };
  const dead = (klass: string, counted: boolean, reasonClass: "permanent" | "poison" | "exhausted", deadReason: DeadReason, error?: string): Recorded => {
    const r = markDeadTx(db, { ...base, deadReason, attempt: record(klass, counted, error) });
    if (!r.applied) return { applied: false };
    neutral();
    onDeadTx(db, issue, reasonClass, error ?? o.reason, deadReason);
    return applied(r, "dead", klass, { deadReason });
  };

  if (o.kind === "ok") {
    const r = markDeliveredTx(db, { ...base, emits: f.emits, attempt: record(null, !f.probe, null) });
    if (!r.applied) return { applied: false };
    const before = recordSuccessTx(db, dest, now);
    onSuccessTx(db, dest, now);
    if (o.notice) onNoticeTx(db, issue, o.notice);
    return applied(r, "delivered", null, before === "open" || before === "half_open" ? { breaker: "closed" } : {});
  }

  // The receiver said no, unless the destination knows better: a processor's own verdict, or
  // a bound of ours the batch can never meet.
  if (o.kind === "dead") return dead("permanent", false, "permanent", o.deadReason ?? "rejected");

  switch (o.klass) {
    case "transport": {
      // A batch that keeps failing while the destination delivers others is poison;
      // it dies uncounted and does not count against the breaker, so the destination drains.
      if (d.state === "closed" && transportStrikesTx(db, f.batchId, dest, now) >= POISON_STRIKES) {
        return dead("poison", false, "poison", "poison", `poison: ${o.reason}, ${POISON_STRIKES + 1} failures in a row while the destination delivered other batches`);
      }
      const n = d.state === "closed" ? d.consecutive_failures + 1 : Math.max(1, d.consecutive_failures);
      let effect = "";
      const r = retry("transport", false, retryDelayS(backoffS(n, policy.backoffBaseS, policy.backoffCapS, rng), o.retryAfterS), () => {
        effect = recordTransportFailureTx(db, dest, { now, startedAt: f.startedAt, tripAfter: policy.tripAfter, cooldownInitialS: policy.cooldownInitialS, cooldownMaxS: policy.cooldownMaxS, error: o.reason });
        if (effect === "tripped" || effect === "retripped") onTripTx(db, issue, o, effect === "retripped");
      });
      if (!r.applied) return r;
      const breaker = effect === "tripped" ? "opened" : effect === "retripped" ? "reopened" : undefined;
      return breaker ? { ...r, breaker } : r;
    }
    case "throttle": {
      // A hint in the future is honoured (capped at 1 h) and gates the destination. Without one
      // (none sent, or 0, or a past date) the batch backs off on the schedule, keyed on its own
      // run of throttles, since a throttle never moves the destination's failure counter.
      const hinted = o.retryAfterS !== null && o.retryAfterS > 0;
      const delay = hinted ? retryDelayS(0, o.retryAfterS) : backoffS(consecutiveThrottlesTx(db, f.batchId) + 1, policy.backoffBaseS, policy.backoffCapS, rng);
      return retry("throttle", false, delay, () => {
        if (hinted) setRetryAfterTx(db, dest, now + delay);
      });
    }
    case "batch": {
      const attempts = batch.attempts + 1;
      if (o.badEmit && previousBadEmitTx(db, f.batchId)) return dead("permanent", true, "permanent", "bad_emit", `bad emit twice: ${o.reason}`);
      if (attempts >= policy.maxAttempts) return dead("batch", true, "exhausted", "exhausted", `${o.reason}; ${attempts} counted attempts (max_attempts)`);
      const error = o.badEmit ? `bad emit: ${o.detail}` : o.detail;
      return retry(
        "batch",
        true,
        retryDelayS(backoffS(attempts, policy.backoffBaseS, policy.backoffCapS, rng), o.retryAfterS),
        () => {
          if (attempts >= 3) onCountedStreakTx(db, issue, f.script, o.reason, attempts);
        },
        error,
      );
    }
    case "config":
      // The operator's to fix and often transient: retried at the backoff cap, uncounted, made
      // due at once by a successful reload.
      return retry("config", false, retryDelayS(policy.backoffCapS, o.retryAfterS), () => onConfigTx(db, issue, o.reason));
    default:
      return retry("transport", false, backoffS(1, policy.backoffBaseS, policy.backoffCapS, rng), () => {});
  }
}

// ---------------------------------------------------------------------------------------------
// The issues an outcome opens or resolves

/** Reason classes that a later success on the destination resolves by itself. */
const TRANSIENT = ["unreachable", "http_5xx", "timeout", "script_exit", "batch"] as const;

interface IssueContext {
  destination: string;
  route: string;
  batchId: number;
  now: number;
}

/** The reason class of a transport failure: unreachable, http_5xx or timeout. */
export function transportReasonClass(o: Outcome): "unreachable" | "http_5xx" | "timeout" {
  if (o.status !== null && o.status >= 500 && o.status < 600) return "http_5xx";
  if (/timeout|deadline/i.test(o.reason)) return "timeout";
  return "unreachable";
}

function raise(db: Database, c: IssueContext, reasonClass: string, error: string): void {
  raiseIssueTx(db, { fingerprint: `delivery:${c.destination}:${reasonClass}`, kind: "delivery", destination: c.destination, route: c.route, batchId: c.batchId, error, now: c.now });
}

/**
 * A breaker trip or re-trip. The text names the batch the last attempt carried: after a re-trip
 * that is the probe's, which an operator may exclude or split if every probe fails on it (a
 * poison payload on a destination fed by one batch looks like an outage).
 */
function onTripTx(db: Database, c: IssueContext, o: Outcome, probe: boolean): void {
  const text = probe
    ? `breaker open again: the probe (batch ${c.batchId}) failed with ${o.reason}; if probes keep failing on one batch, see hookspool show ${c.batchId} --attempts`
    : `breaker open after ${o.reason} (batch ${c.batchId} failed last; the next probe after the cooldown carries the oldest batch due)`;
  raise(db, c, transportReasonClass(o), text);
}

/** A batch went dead: permanent, poison or exhausted. The text carries the command to run next. */
function onDeadTx(db: Database, c: IssueContext, reasonClass: "permanent" | "poison" | "exhausted", reason: string, deadReason: DeadReason): void {
  raise(db, c, reasonClass, `${reason}; batch ${c.batchId} is dead (${deadReason}): hookspool show ${c.batchId} --attempts, then hookspool replay ${c.batchId}`);
}

/** A counted failure streak of three or more on one batch. */
function onCountedStreakTx(db: Database, c: IssueContext, script: boolean, reason: string, attempts: number): void {
  raise(db, c, script ? "script_exit" : "batch", `${reason} (${attempts} counted attempts on batch ${c.batchId})`);
}

/** Hermes answered ignored or coalesced to a document: its own filter or coalescing ate it. */
function onNoticeTx(db: Database, c: IssueContext, notice: string): void {
  raise(db, c, "ignored", `${notice}: check the route's events/coalesce settings in the Hermes subscriptions file`);
}

/** A config-class outcome (401/403/404, unknown destination, unreadable secret). */
function onConfigTx(db: Database, c: IssueContext, reason: string): void {
  raiseIssueTx(db, { fingerprint: `config:delivery:${c.destination}`, kind: "config", destination: c.destination, route: c.route, batchId: c.batchId, error: reason, now: c.now });
}

/** A successful attempt resolves the destination's transient delivery issues and its config issue. */
function onSuccessTx(db: Database, destination: string, now: number): void {
  for (const r of TRANSIENT) resolveIssueTx(db, `delivery:${destination}:${r}`, now);
  resolveIssueTx(db, `config:delivery:${destination}`, now);
}
