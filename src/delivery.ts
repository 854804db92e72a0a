// The seam between the dispatcher and the destinations: what a destination is given (the
// document, the stored events, a deadline) and what it answers (an Outcome). The dispatcher
// and every destination type import it; neither imports the other.
import type { Clock } from "./clock.ts";
import type { Logger } from "./log.ts";
import type { Rate } from "./pacing.ts";

/** How a batch attempt ended. */
export type OutcomeKind = "ok" | "retry" | "dead";

/** Why a batch is dead: the receiver's verdict, or a fault of the pipeline (never mixed). */
export const DEAD_REASONS = [
  "rejected",
  "exhausted",
  "poison",
  "processor_permanent",
  "bad_emit",
  "config",
  "quarantined",
  "agent_failed",
] as const;
export type DeadReason = (typeof DEAD_REASONS)[number];
export type OutcomeClass = "transport" | "throttle" | "batch" | "config" | "permanent";

/** What a receiver may say of a delivery it took, in its own words (Hermes's statuses). */
export const ANSWERS = ["accepted", "coalesced", "delivered", "duplicate", "ignored"] as const;
export type Answer = (typeof ANSWERS)[number];

/** One {"enqueue": {...}} line a script printed, before validation. */
export interface EmitRequest {
  source: string;
  key: string;
  event_type?: string;
  dedup_id?: string | null;
  /** Send to this destination instead of the source's routes (a processor's output mapping). */
  destination?: string;
  payload: unknown;
}

export interface Outcome {
  kind: OutcomeKind;
  klass: OutcomeClass | null;
  /** HTTP status or exit code. */
  status: number | null;
  /** Safe for logs and alerts: a short fixed phrase ("connection refused", "http 503", "exit 3"). */
  reason: string;
  /** Stored in last_error (scrubbed to 500 characters); never logged. */
  detail: string;
  /** Seconds from a Retry-After answer (capped at 1 h by the dispatcher). */
  retryAfterS: number | null;
  /** A script's emits, enqueued in the same transaction as the mark. */
  emits: EmitRequest[];
  /** An emit line that could not be read (invalid JSON or UTF-8): the attempt failed as "bad emit". */
  badEmit: boolean;
  /**
   * The receiver's own word for a delivery, apart from its status (Hermes: accepted, coalesced,
   * delivered, duplicate, ignored); null when it has none.
   */
  answer: Answer | null;
  /** A duplicate that proves only that the receiver saw the id before, not that it ran anything. */
  unconfirmed: boolean;
  /** The receiver's short reason for an ignored delivery (Hermes: filter, script, event). */
  ignoredReason: string | null;
  /**
   * A configuration fault no retry can mend (Hermes 404: no such route or profile): the
   * destination pauses itself with an issue saying this, instead of retrying for nothing.
   */
  pause: string | null;
  /**
   * Unwrap: the events the receiver has taken, in order, counting those an earlier attempt got
   * through; the event whose request failed; and the requests this attempt sent.
   */
  eventsDelivered: number | null;
  failedEventId: number | null;
  sent: number | null;
  /** For a dead outcome that is not the receiver's refusal: a processor's permanent, or our own bound. */
  deadReason?: DeadReason;
}

/** Build an Outcome with the defaults filled in. */
export function outcome(o: Pick<Outcome, "kind" | "reason"> & Partial<Outcome>): Outcome {
  return {
    klass: null,
    status: null,
    detail: o.reason,
    retryAfterS: null,
    emits: [],
    badEmit: false,
    answer: null,
    unconfirmed: false,
    ignoredReason: null,
    pause: null,
    eventsDelivered: null,
    failedEventId: null,
    sent: null,
    ...o,
  };
}

/** Where an unwrap delivery's earlier attempts left off (DeliveryContext.resume). */
export interface Resume {
  /** An event id: every event of the batch before it got through. */
  before: number;
  unconfirmed: boolean;
}

/** A stored event as an unwrap delivery sends it. */
export interface StoredEvent {
  id: number;
  eventType: string;
  dedupId: string | null;
  /** events.payload, byte for byte; when its route set expose, only the paths it delivers. */
  payload: string;
  /** Older than its key's last delivered version, and its route marks such events (docs/receiving.md). */
  stale?: true;
}

/** Why an attempt ran out of time: its destination's timeout_s, or the worker deadline before its lease ends. */
export type DeadlineCause = "timeout" | "worker deadline";

const PASSED = Symbol("deadline passed");
export type Passed = typeof PASSED;

export function isPassed(x: unknown): x is Passed {
  return x === PASSED;
}

/**
 * The one deadline of an attempt, made by the dispatcher when it starts the attempt: the
 * destination's timeout_s from now, or the worker deadline (lease_until - 5 s) when that comes
 * sooner. Every request, body read and child process of the attempt shares it (an unwrap
 * attempt's requests together stay inside it), and the dispatcher ends it early when the clock
 * jumps past it. One timer; dispose() releases it.
 */
export class Deadline {
  private readonly controller = new AbortController();
  private readonly timer: ReturnType<typeof setTimeout>;
  private endedBy: DeadlineCause | null = null;
  /** When it passes (Unix seconds, on the clock it was made with). */
  readonly at: number;
  /** Seconds it allowed from its start. */
  readonly budgetS: number;
  private readonly bound: DeadlineCause;
  private readonly workerAt: number;
  /** Resolves (never rejects) when the deadline passes. */
  readonly passed: Promise<Passed>;

  /** `timeoutS` from now, or `workerAt` if sooner. */
  constructor(o: { timeoutS: number; workerAt: number; clock: Clock }) {
    const now = o.clock.now();
    this.workerAt = o.workerAt;
    this.bound = o.workerAt - now < o.timeoutS ? "worker deadline" : "timeout";
    this.budgetS = Math.max(0, Math.min(o.timeoutS, o.workerAt - now));
    this.at = now + this.budgetS;
    this.passed = new Promise((resolve) =>
      this.controller.signal.addEventListener("abort", () => resolve(PASSED), { once: true }),
    );
    this.timer = setTimeout(() => this.end(this.bound), this.budgetS * 1000);
    // Out of time before starting: nothing is tried, not even a race against a zero timer.
    if (this.budgetS <= 0) this.end(this.bound);
  }

  /** Aborted when the deadline passes: hand it to fetch and friends. */
  get signal(): AbortSignal {
    return this.controller.signal;
  }

  get expired(): boolean {
    return this.controller.signal.aborted;
  }

  /** What ended it (null while running). */
  get cause(): DeadlineCause | null {
    return this.endedBy;
  }

  /** End it now (the clock jumped past the worker deadline); a second end changes nothing. */
  end(cause: DeadlineCause = "worker deadline"): void {
    if (this.endedBy !== null) return;
    this.endedBy = cause;
    clearTimeout(this.timer);
    this.controller.abort();
  }

  /**
   * End it if `now` (the dispatcher's effective time) is past the worker deadline: the timer
   * runs in real time, so a clock that jumped forward would otherwise let the lease end first.
   * timeout_s is a duration and a jump does not shorten it.
   */
  endIfPast(now: number): void {
    if (now >= this.workerAt) this.end("worker deadline");
  }

  /** Race work against the deadline: the work's value, or Passed. */
  race<T>(work: Promise<T>): Promise<T | Passed> {
    return Promise.race([work, this.passed]);
  }

  /** The transport outcome of running out of time (a worker deadline is transport too). */
  outcome(): Outcome {
    const reason = this.endedBy ?? this.bound;
    return outcome({
      kind: "retry",
      klass: "transport",
      reason,
      detail: `${reason}: no complete answer within ${this.budgetS.toFixed(1)} s`,
    });
  }

  dispose(): void {
    clearTimeout(this.timer);
  }
}

export interface DeliveryContext {
  batchId: number;
  /** The attempt number n (X-Hookspool-Attempt). */
  attempt: number;
  /** For per-batch and per-attempt idempotency; unwrap derives per-event ids from it. */
  deliveryId: string;
  /** How many times this batch was delivered before (a resend: replay --delivered); 0 normally. */
  resend?: number;
  /**
   * Unwrap, on a retry: where the earlier attempts of this delivery left off. The events before
   * event `before` got through to the receiver (accepted, or admitted as a duplicate);
   * `unconfirmed` when one of them was admitted only as a duplicate that nothing of ours confirms.
   */
  resume?: Resume;
  /** The attempt's one deadline; deliver must not outlive it. */
  deadline: Deadline;
  /** The batch's events, oldest first, excluded ones omitted. */
  events: StoredEvent[];
  /** The source's event_header (e.g. X-GitHub-Event), for hermes and unwrap. */
  eventHeader: string | null;
  clock: Clock;
  log: Logger;
}

export type Idempotency = "per-batch" | "per-attempt" | "per-event";

/** The rate a destination is paced to, and where it comes from, in words (check and status say it). */
export interface Pace {
  rate: Rate;
  from: string;
}

export interface Destination {
  /** "hermes:github-ci", "script:calendar", "audit" */
  readonly name: string;
  readonly type: "hermes" | "http" | "script";
  readonly timeoutS: number;
  /** What the receiver accepts; check bounds max_bytes by it. */
  readonly maxBodyBytes: number;
  readonly maxInflight: number;
  /** Fixed by the type: per-event when unwrap is on. */
  readonly idempotency: Idempotency;
  readonly unwrap: boolean;
  /**
   * The rate it is paced to, or null when it is not: its `rate`, or for hermes the gateway's own
   * (the route's rate_limit in the subscriptions file, else [hermes] rate_limit per minute).
   * Asked when the dispatcher gates it, so it must be cheap.
   */
  pace(): Pace | null;
  /** Hermes: open an issue after this many ignored answers in a row (0: never). */
  readonly ignoredIssueAfter?: number;
  /** Deliver one batch document (`body` is its JSON text). */
  deliver(body: string, ctx: DeliveryContext): Promise<Outcome>;
  /**
   * The secrets a reported outcome must be signed with (the ones its deliveries are signed with,
   * current first), read now; empty when it signs nothing (a script, an unsigned http), so only
   * the CLI can report its outcomes. Never logged.
   */
  outcomeSecrets(): string[];
  /** Config and secret problems, for hookspool check. */
  check(): string[];
}

/** The pace of a destination whose rate its own table sets (null or undefined: not paced). */
export function configuredPace(rate: Rate | null | undefined): Pace | null {
  return rate ? { rate, from: "its rate" } : null;
}

/** The delivery id: per batch, per attempt (hermes) or per event (unwrap). */
export function deliveryId(
  idempotency: Idempotency,
  instanceId: string,
  batchId: number,
  attemptId: number,
  eventId?: number,
  resend = 0,
): string {
  // A resend of delivered work is new to a receiver that deduplicates: its ids say which time it is.
  const again = resend > 0 ? `_r${resend}` : "";
  if (idempotency === "per-attempt") return `hs_${instanceId}_${batchId}_${attemptId}`;
  if (idempotency === "per-event" && eventId !== undefined) return `hs_${instanceId}_${batchId}_${eventId}${again}`;
  return `hs_${instanceId}_${batchId}${again}`;
}
