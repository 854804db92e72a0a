// What an attempt's end does, decided without touching the database: from the facts a backend
// read inside its outcome transaction (the batch, the destination's breaker row, the batch's
// poison run, its run of throttles, a previous bad emit), the mark to make and the effects to
// apply once the mark is applied (the breaker, the Retry-After gate, the probe, the issues).
// SQLite (outcome.ts) and PostgreSQL (pg/outcome.ts) read the facts and apply the plan in their
// own transaction; the rules live here once.
import type { DeadReason, Outcome } from "../delivery.ts";
import { backoffS, retryDelayS } from "./backoff.ts";
import type { DestinationRow, FailureInput } from "./destinations.ts";
import type { NewEvent } from "./enqueue.ts";
import type { RaiseIssue } from "./issues.ts";
import type { AttemptRecord } from "./marks.ts";

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
  /**
   * The batch's destination, as the claim saw it: only the order in which a transaction of
   * several outcomes locks destination rows (the batch's own row decides everything else).
   */
  destination?: string;
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

/** The facts the plan needs, read in the outcome's transaction. */
export interface OutcomeFacts {
  batch: { destination: string; route: string; attempts: number };
  destination: DestinationRow;
  /** The batch's poison run (transportStrikes), read only when `needs` asks for it. */
  strikes: number;
  /** The batch's latest run of throttles. */
  throttles: number;
  /** Whether the batch's previous attempt failed on a bad emit. */
  previousBadEmit: boolean;
}

/** Which of the costlier facts this outcome needs (the others are read always). */
export function factsNeeded(f: OutcomeInput): { strikes: boolean; throttles: boolean; previousBadEmit: boolean } {
  const o = f.outcome;
  const failed = o.kind !== "ok" && o.kind !== "dead";
  return { strikes: failed && o.klass === "transport", throttles: failed && o.klass === "throttle", previousBadEmit: failed && o.klass === "batch" && o.badEmit };
}

export type PlannedMark =
  | { kind: "delivered"; attempt: AttemptRecord; emits: NewEvent[] }
  | { kind: "retry"; nextAttemptAt: number; attempt: AttemptRecord }
  | { kind: "dead"; deadReason: DeadReason; attempt: AttemptRecord };

export type PlannedEffect =
  /** The destination delivered: the breaker closes (a pause stays), its transient issues resolve. */
  | { kind: "success" }
  /** A transport failure on the breaker; on a trip (or a probe's re-trip) the issue is raised. */
  | { kind: "transport_failure"; failure: FailureInput; onTrip: (retripped: boolean) => RaiseIssue }
  | { kind: "retry_after"; until: number }
  /** A probe that ended without a verdict on the destination frees the way for the next. */
  | { kind: "clear_probe" }
  | { kind: "raise"; issue: RaiseIssue }
  | { kind: "resolve"; fingerprint: string };

export interface OutcomePlan {
  mark: PlannedMark;
  /** Applied in order, only when the mark was. */
  effects: PlannedEffect[];
  /** What the outcome recorded, before the breaker's own verdict (the apply adds it). */
  recorded: Extract<Recorded, { applied: true }>;
}

/** Reason classes that a later success on the destination resolves by itself. */
const TRANSIENT = ["unreachable", "http_5xx", "timeout", "script_exit", "batch"] as const;

/** The reason class of a transport failure: unreachable, http_5xx or timeout. */
export function transportReasonClass(o: Outcome): "unreachable" | "http_5xx" | "timeout" {
  if (o.status !== null && o.status >= 500 && o.status < 600) return "http_5xx";
  if (/timeout|deadline/i.test(o.reason)) return "timeout";
  return "unreachable";
}

/** The plan for one attempt's end. Pure: the same facts and input give the same plan. */
export function planOutcome(facts: OutcomeFacts, f: OutcomeInput): OutcomePlan {
  const o = f.outcome;
  const { now, policy } = f;
  const dest = facts.batch.destination;
  const d = facts.destination;
  const rng = { next: () => f.jitter };
  const issue = (reasonClass: string, error: string): RaiseIssue => ({ fingerprint: `delivery:${dest}:${reasonClass}`, kind: "delivery", destination: dest, route: facts.batch.route, batchId: f.batchId, error, now });
  const record = (klass: string | null, counted: boolean, error: string | null = o.detail): AttemptRecord => ({
    klass,
    status: o.status,
    error,
    durationMs: f.durationMs,
    counted,
    eventsDelivered: o.eventsDelivered,
    failedEventId: o.failedEventId,
  });
  const neutral = (): PlannedEffect[] => (f.probe ? [{ kind: "clear_probe" }] : []);
  const retry = (klass: string, counted: boolean, delay: number, also: PlannedEffect[], error?: string): OutcomePlan => {
    const next = now + delay;
    return {
      mark: { kind: "retry", nextAttemptAt: next, attempt: record(klass, counted, error) },
      effects: [...(klass !== "transport" ? neutral() : []), ...also],
      recorded: { applied: true, state: "retry", klass, nextAttemptAt: next },
    };
  };
  const dead = (klass: string, counted: boolean, reasonClass: "permanent" | "poison" | "exhausted", deadReason: DeadReason, error?: string): OutcomePlan => ({
    mark: { kind: "dead", deadReason, attempt: record(klass, counted, error) },
    effects: [...neutral(), { kind: "raise", issue: issue(reasonClass, `${error ?? o.reason}; batch ${f.batchId} is dead (${deadReason}): hookspool show ${f.batchId} --attempts, then hookspool replay ${f.batchId}`) }],
    recorded: { applied: true, state: "dead", klass, deadReason },
  });

  if (o.kind === "ok") {
    const effects: PlannedEffect[] = [{ kind: "success" }, ...TRANSIENT.map((r): PlannedEffect => ({ kind: "resolve", fingerprint: `delivery:${dest}:${r}` })), { kind: "resolve", fingerprint: `config:delivery:${dest}` }];
    if (o.notice) effects.push({ kind: "raise", issue: issue("ignored", `${o.notice}: check the route's events/coalesce settings in the Hermes subscriptions file`) });
    return { mark: { kind: "delivered", attempt: record(null, !f.probe, null), emits: f.emits }, effects, recorded: { applied: true, state: "delivered", klass: null } };
  }

  // The receiver said no, unless the destination knows better: a processor's own verdict, or
  // a bound of ours the batch can never meet.
  if (o.kind === "dead") return dead("permanent", false, "permanent", o.deadReason ?? "rejected");

  switch (o.klass) {
    case "transport": {
      // A batch that keeps failing while the destination delivers others is poison; it dies
      // uncounted and does not count against the breaker, so the destination drains.
      if (d.state === "closed" && facts.strikes >= POISON_STRIKES) {
        return dead("poison", false, "poison", "poison", `poison: ${o.reason}, ${POISON_STRIKES + 1} failures in a row while the destination delivered other batches`);
      }
      const n = d.state === "closed" ? d.consecutive_failures + 1 : Math.max(1, d.consecutive_failures);
      const failure: FailureInput = { now, startedAt: f.startedAt, tripAfter: policy.tripAfter, cooldownInitialS: policy.cooldownInitialS, cooldownMaxS: policy.cooldownMaxS, error: o.reason };
      // After a re-trip the text names the probe's batch, which an operator may exclude or split
      // if every probe fails on it (a poison payload on a destination fed by one batch looks like an outage).
      const onTrip = (retripped: boolean) =>
        issue(
          transportReasonClass(o),
          retripped
            ? `breaker open again: the probe (batch ${f.batchId}) failed with ${o.reason}; if probes keep failing on one batch, see hookspool show ${f.batchId} --attempts`
            : `breaker open after ${o.reason} (batch ${f.batchId} failed last; the next probe after the cooldown carries the oldest batch due)`,
        );
      return retry("transport", false, retryDelayS(backoffS(n, policy.backoffBaseS, policy.backoffCapS, rng), o.retryAfterS), [{ kind: "transport_failure", failure, onTrip }]);
    }
    case "throttle": {
      // A hint in the future is honoured (capped at 1 h) and gates the destination. Without one
      // (none sent, or 0, or a past date) the batch backs off on the schedule, keyed on its own
      // run of throttles, since a throttle never moves the destination's failure counter.
      const hinted = o.retryAfterS !== null && o.retryAfterS > 0;
      const delay = hinted ? retryDelayS(0, o.retryAfterS) : backoffS(facts.throttles + 1, policy.backoffBaseS, policy.backoffCapS, rng);
      return retry("throttle", false, delay, hinted ? [{ kind: "retry_after", until: now + delay }] : []);
    }
    case "batch": {
      const attempts = facts.batch.attempts + 1;
      if (o.badEmit && facts.previousBadEmit) return dead("permanent", true, "permanent", "bad_emit", `bad emit twice: ${o.reason}`);
      if (attempts >= policy.maxAttempts) return dead("batch", true, "exhausted", "exhausted", `${o.reason}; ${attempts} counted attempts (max_attempts)`);
      const error = o.badEmit ? `bad emit: ${o.detail}` : o.detail;
      const streak: PlannedEffect[] = attempts >= 3 ? [{ kind: "raise", issue: issue(f.script ? "script_exit" : "batch", `${o.reason} (${attempts} counted attempts on batch ${f.batchId})`) }] : [];
      return retry("batch", true, retryDelayS(backoffS(attempts, policy.backoffBaseS, policy.backoffCapS, rng), o.retryAfterS), streak, error);
    }
    case "config":
      // The operator's to fix and often transient: retried at the backoff cap, uncounted, made
      // due at once by a successful reload.
      return retry("config", false, retryDelayS(policy.backoffCapS, o.retryAfterS), [
        { kind: "raise", issue: { fingerprint: `config:delivery:${dest}`, kind: "config", destination: dest, route: facts.batch.route, batchId: f.batchId, error: o.reason, now } },
      ]);
    default:
      return retry("transport", false, backoffS(1, policy.backoffBaseS, policy.backoffCapS, rng), []);
  }
}
