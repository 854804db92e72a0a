// What an attempt's end does, decided without touching the database: from the facts a backend
// read inside its outcome transaction (the batch, the destination's row, the batch's poison run,
// a previous bad emit, the destination's run of ignored answers), the mark to make and the
// effects to apply once the mark is applied (the breaker, the Retry-After and 429 gates, the
// probe, a pause, the issues).
// SQLite (sqlite/outcome.ts) and PostgreSQL (pg/outcome.ts) read the facts and apply the plan in their
// own transaction; the rules live here once.
import type { DeadReason, Outcome } from "../delivery.ts";
import { hitsMade } from "../pacing.ts";
import { backoffS, retryDelayS } from "./backoff.ts";
import type { DestinationRow, FailureInput } from "./destinations.ts";
import type { NewEvent } from "./enqueue.ts";
import type { RaiseIssue } from "./issues.ts";
import type { AttemptRecord } from "./marks.ts";

/** Five strikes, six failures in a row with the destination delivering in between. */
export const POISON_STRIKES = 5;

/**
 * A 429 without Retry-After gates a destination with no rate this long at first (a paced one:
 * its window): a minute and a second, so a receiver's per-minute window (Hermes's) has passed.
 */
export const THROTTLE_GATE_S = 61;

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
  /** How long a 429 without Retry-After first gates the destination: its rate's window, else THROTTLE_GATE_S. */
  throttleGateS?: number;
  /** Open an issue after this many ignored answers in a row (0 or absent: never). */
  ignoredIssueAfter?: number;
  /** The destination awaits the run's outcome: a 2xx that starts a run leaves the batch awaiting for this long. */
  awaitOutcomeS?: number;
  /**
   * Nothing was sent: the stale rule left every event of the batch out (store/stale-plan.ts). The
   * batch is delivered with result "stale", the attempt uncounted, and the destination is told
   * nothing: no breaker, no issue, no awaited run, no request in its rate window.
   */
  unsent?: "stale";
}

/** An attempt's end as a worker gives it: the store stamps now_eff when it writes the group (recordEnds). */
export type OutcomeEnd = Omit<OutcomeInput, "now">;

export type Recorded =
  | { applied: false }
  | {
      applied: true;
      state: "delivered" | "awaiting" | "retry" | "dead";
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
  /** Whether the batch's previous attempt failed on a bad emit. */
  previousBadEmit: boolean;
  /**
   * How many of the destination's latest deliveries in a row the receiver ignored (before this one), read only when
   * needed.
   */
  ignoredRun: number;
}

/** Which of the costlier facts this outcome needs (the others are read always). */
export function factsNeeded(f: OutcomeInput): { strikes: boolean; previousBadEmit: boolean; ignoredRun: number } {
  const o = f.outcome;
  const failed = o.kind !== "ok" && o.kind !== "dead";
  const after = f.ignoredIssueAfter ?? 0;
  return {
    strikes: failed && o.klass === "transport",
    previousBadEmit: failed && o.klass === "batch" && o.badEmit,
    // How far back to look: the run that, with this one, reaches the threshold.
    ignoredRun: o.kind === "ok" && o.answer === "ignored" && after > 1 ? after - 1 : 0,
  };
}

/**
 * What a delivered batch's result says: "accepted" (queued by the gateway, its run still to
 * come), "ignored" (the gateway's filter or script vetoed it), "unconfirmed" (a duplicate after
 * a request of ours that got no answer: nothing says the run happened), else "ok".
 */
export function resultOf(o: Outcome): "ok" | "accepted" | "ignored" | "unconfirmed" {
  if (o.unconfirmed) return "unconfirmed";
  if (o.answer === "accepted" || o.answer === "coalesced" || o.answer === "duplicate") return "accepted";
  if (o.answer === "ignored") return "ignored";
  return "ok";
}

/**
 * Whether a delivered attempt starts a run whose outcome is still to come: every 2xx except a
 * gateway's own word that no run of ours follows (ignored: vetoed; delivered: sent on without an
 * agent; coalesced: merged into a run that another delivery's outcome reports).
 */
export function startsRun(o: Outcome): boolean {
  return o.answer !== "ignored" && o.answer !== "delivered" && o.answer !== "coalesced";
}

/** The attempt class of a 2xx whose batch then awaits its outcome (attempts.klass). */
export const AWAIT_CLASS = "await";

export type PlannedMark =
  /** leased -> delivered, or -> awaiting until `awaitUntil` when the run's outcome is awaited. */
  | { kind: "delivered"; attempt: AttemptRecord; emits: NewEvent[]; result: string; awaitUntil?: number }
  | { kind: "retry"; nextAttemptAt: number; attempt: AttemptRecord }
  | { kind: "dead"; deadReason: DeadReason; attempt: AttemptRecord };

export type PlannedEffect =
  /** The destination delivered: the breaker closes (a pause stays), its transient issues resolve. */
  | { kind: "success" }
  /** A transport failure on the breaker; on a trip (or a probe's re-trip) the issue is raised. */
  | { kind: "transport_failure"; failure: FailureInput; onTrip: (retripped: boolean) => RaiseIssue }
  | { kind: "retry_after"; until: number }
  /** A 429 without Retry-After: the destination gated until `until`, then one probe first. */
  | { kind: "throttle"; until: number; throttleS: number }
  /** An attempt after the 429 gate that was not throttled again: the rest may go. */
  | { kind: "lift_throttle"; startedAt: number }
  /** A fault no retry mends: the destination pauses itself (an operator resumes it). */
  | { kind: "pause"; by: string }
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
  const issue = (reasonClass: string, error: string): RaiseIssue => ({
    fingerprint: `delivery:${dest}:${reasonClass}`,
    kind: "delivery",
    destination: dest,
    route: facts.batch.route,
    batchId: f.batchId,
    error,
    now,
  });
  const record = (klass: string | null, counted: boolean, error: string | null = o.detail): AttemptRecord => ({
    klass,
    status: o.status,
    error,
    durationMs: f.durationMs,
    counted,
    eventsDelivered: o.eventsDelivered,
    failedEventId: o.failedEventId,
    hits: hitsMade(o.status, o.sent, o.kind === "ok"),
    answer: o.answer,
    unconfirmed: o.unconfirmed,
  });
  // The 429 gate's probe was answered with anything but another throttle: the rest may go.
  const lift: PlannedEffect[] =
    d.throttled_at !== null && f.startedAt > d.throttled_at ? [{ kind: "lift_throttle", startedAt: f.startedAt }] : [];
  const neutral = (): PlannedEffect[] => (f.probe ? [{ kind: "clear_probe" }] : []);
  const retry = (
    klass: string,
    counted: boolean,
    delay: number,
    also: PlannedEffect[],
    error?: string,
  ): OutcomePlan => {
    const next = now + delay;
    return {
      mark: { kind: "retry", nextAttemptAt: next, attempt: record(klass, counted, error) },
      effects: [...(klass !== "transport" ? neutral() : []), ...(klass !== "throttle" ? lift : []), ...also],
      recorded: { applied: true, state: "retry", klass, nextAttemptAt: next },
    };
  };
  const dead = (
    klass: string,
    counted: boolean,
    reasonClass: "permanent" | "poison" | "exhausted",
    deadReason: DeadReason,
    error?: string,
  ): OutcomePlan => ({
    mark: { kind: "dead", deadReason, attempt: record(klass, counted, error) },
    effects: [
      ...neutral(),
      ...lift,
      {
        kind: "raise",
        issue: issue(
          reasonClass,
          `${error ?? o.reason}; batch ${f.batchId} is dead (${deadReason}): hookspool show ${f.batchId} ` +
            `--attempts, then hookspool replay ${f.batchId}`,
        ),
      },
    ],
    recorded: { applied: true, state: "dead", klass, deadReason },
  });

  if (f.unsent !== undefined) {
    return {
      mark: { kind: "delivered", attempt: { ...record(null, false, null), hits: 0 }, emits: [], result: f.unsent },
      effects: neutral(),
      recorded: { applied: true, state: "delivered", klass: null },
    };
  }

  if (o.kind === "ok") {
    const effects: PlannedEffect[] = [
      { kind: "success" },
      ...TRANSIENT.map((r): PlannedEffect => ({ kind: "resolve", fingerprint: `delivery:${dest}:${r}` })),
      { kind: "resolve", fingerprint: `config:delivery:${dest}` },
      ...lift,
    ];
    if (o.answer !== "ignored") effects.push({ kind: "resolve", fingerprint: `delivery:${dest}:ignored` });
    else if ((f.ignoredIssueAfter ?? 0) > 0 && facts.ignoredRun + 1 >= (f.ignoredIssueAfter ?? 0)) {
      const why = o.ignoredReason ? ` (its ${o.ignoredReason})` : "";
      effects.push({
        kind: "raise",
        issue: issue(
          "ignored",
          `the gateway ignored the last ${facts.ignoredRun + 1} deliveries${why}: the route's events filter or ` +
            `script vetoes what hookspool sends; check the route in the Hermes subscriptions file`,
        ),
      });
    }
    // An ignored delivery keeps the gateway's reason on its attempt; other deliveries keep no error.
    const said = o.answer === "ignored" ? o.detail : null;
    // The receiver took the batch and started its run: the batch awaits the run's outcome,
    // which is the counted attempt (the 2xx is not), its key held until it comes.
    if (f.awaitOutcomeS !== undefined && startsRun(o)) {
      const awaitUntil = now + f.awaitOutcomeS;
      return {
        mark: {
          kind: "delivered",
          attempt: record(AWAIT_CLASS, false, said),
          emits: f.emits,
          result: resultOf(o),
          awaitUntil,
        },
        effects,
        recorded: { applied: true, state: "awaiting", klass: null, nextAttemptAt: awaitUntil },
      };
    }
    return {
      mark: { kind: "delivered", attempt: record(null, !f.probe, said), emits: f.emits, result: resultOf(o) },
      effects,
      recorded: { applied: true, state: "delivered", klass: null },
    };
  }

  // The receiver said no, unless the destination knows better: a processor's own verdict, or
  // a bound of ours the batch can never meet.
  if (o.kind === "dead") return dead("permanent", false, "permanent", o.deadReason ?? "rejected");

  switch (o.klass) {
    case "transport": {
      // A batch that keeps failing while the destination delivers others is poison; it dies
      // uncounted and does not count against the breaker, so the destination drains.
      if (d.state === "closed" && facts.strikes >= POISON_STRIKES) {
        return dead(
          "poison",
          false,
          "poison",
          "poison",
          `poison: ${o.reason}, ${POISON_STRIKES + 1} failures in a row while the destination delivered other batches`,
        );
      }
      const n = d.state === "closed" ? d.consecutive_failures + 1 : Math.max(1, d.consecutive_failures);
      const failure: FailureInput = {
        now,
        startedAt: f.startedAt,
        tripAfter: policy.tripAfter,
        cooldownInitialS: policy.cooldownInitialS,
        cooldownMaxS: policy.cooldownMaxS,
        error: o.reason,
      };
      // After a re-trip the text names the probe's batch, which an operator may exclude or split
      // if every probe fails on it (a poison payload on a destination fed by one batch looks like an outage).
      const onTrip = (retripped: boolean) =>
        issue(
          transportReasonClass(o),
          retripped
            ? `breaker open again: the probe (batch ${f.batchId}) failed with ${o.reason}; if probes keep failing ` +
                `on one batch, see hookspool show ${f.batchId} --attempts`
            : `breaker open after ${o.reason} (batch ${f.batchId} failed last; the next probe after the cooldown ` +
                `carries the oldest batch due)`,
        );
      return retry(
        "transport",
        false,
        retryDelayS(backoffS(n, policy.backoffBaseS, policy.backoffCapS, rng), o.retryAfterS),
        [{ kind: "transport_failure", failure, onTrip }],
      );
    }
    case "throttle": {
      // A hint in the future is honoured (capped at 1 h) and gates the destination: no delivery
      // to it starts before then. Without one, the destination is gated for its rate's window
      // (THROTTLE_GATE_S without a rate), then one delivery goes as a probe; a probe throttled
      // again doubles the gate, up to the backoff cap (or the window, when longer). Either way
      // the batch is due when the gate ends, still the head of its key; a throttle counts
      // toward neither poison nor the breaker.
      if (o.retryAfterS !== null && o.retryAfterS > 0) {
        const delay = retryDelayS(0, o.retryAfterS);
        return retry("throttle", false, delay, [{ kind: "retry_after", until: now + delay }]);
      }
      const base = f.throttleGateS ?? THROTTLE_GATE_S;
      const current = d.throttled_at !== null ? (d.throttle_s ?? base) : base;
      const probeAgain = d.throttled_at !== null && f.startedAt > d.throttled_at;
      const gateS = probeAgain ? Math.min(Math.max(base, policy.backoffCapS), current * 2) : Math.max(base, current);
      return retry("throttle", false, gateS, [{ kind: "throttle", until: now + gateS, throttleS: gateS }]);
    }
    case "batch": {
      const attempts = facts.batch.attempts + 1;
      if (o.badEmit && facts.previousBadEmit)
        return dead("permanent", true, "permanent", "bad_emit", `bad emit twice: ${o.reason}`);
      if (attempts >= policy.maxAttempts)
        return dead(
          "batch",
          true,
          "exhausted",
          "exhausted",
          `${o.reason}; ${attempts} counted attempts (max_attempts)`,
        );
      const error = o.badEmit ? `bad emit: ${o.detail}` : o.detail;
      const streak: PlannedEffect[] =
        attempts >= 3
          ? [
              {
                kind: "raise",
                issue: issue(
                  f.script ? "script_exit" : "batch",
                  `${o.reason} (${attempts} counted attempts on batch ${f.batchId})`,
                ),
              },
            ]
          : [];
      return retry(
        "batch",
        true,
        retryDelayS(backoffS(attempts, policy.backoffBaseS, policy.backoffCapS, rng), o.retryAfterS),
        streak,
        error,
      );
    }
    case "config":
      // A fault no retry mends (the gateway serves no such route): the destination pauses itself,
      // and its batches wait, sealed, for the fix and `hookspool resume`.
      if (o.pause) {
        return retry("config", false, retryDelayS(policy.backoffCapS, o.retryAfterS), [
          { kind: "pause", by: `hookspool (${o.pause})` },
          {
            kind: "raise",
            issue: issue("paused", `paused by hookspool: ${o.detail}; fix it, then hookspool resume ${dest}`),
          },
        ]);
      }
      // The operator's to fix and often transient: retried at the backoff cap, uncounted, made
      // due at once by a successful reload.
      return retry("config", false, retryDelayS(policy.backoffCapS, o.retryAfterS), [
        {
          kind: "raise",
          issue: {
            fingerprint: `config:delivery:${dest}`,
            kind: "config",
            destination: dest,
            route: facts.batch.route,
            batchId: f.batchId,
            error: o.reason,
            now,
          },
        },
      ]);
    default:
      return retry("transport", false, backoffS(1, policy.backoffBaseS, policy.backoffCapS, rng), []);
  }
}
