// The seam between the dispatcher and the destinations: what a destination is given (the
// document, the stored events, a deadline) and what it answers (an Outcome). The dispatcher
// and every destination type import it; neither imports the other.
import type { Clock } from "./clock.ts";
import type { Logger } from "./log.ts";

/** How a batch attempt ended (spec 6.5). */
export type OutcomeKind = "ok" | "retry" | "dead";
export type OutcomeClass = "transport" | "throttle" | "batch" | "config" | "permanent";

/** One {"enqueue": {...}} line a script printed (spec 6.6), before validation. */
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
  /** Opens an issue without changing the outcome (Hermes ignored/coalesced). */
  notice: string | null;
  /** Unwrap: events accepted, in order, in this attempt; and the event whose request failed. */
  eventsDelivered: number | null;
  failedEventId: number | null;
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
    notice: null,
    eventsDelivered: null,
    failedEventId: null,
    ...o,
  };
}

/** A stored event as an unwrap delivery sends it (spec 6.4.1). */
export interface StoredEvent {
  id: number;
  eventType: string;
  dedupId: string | null;
  /** events.payload, byte for byte. */
  payload: string;
}

export interface DeliveryContext {
  batchId: number;
  /** The attempt number n (X-Hookspool-Attempt). */
  attempt: number;
  /** For per-batch and per-attempt idempotency; unwrap derives per-event ids from it. */
  deliveryId: string;
  /** The worker deadline, lease_until - 5 s (Unix seconds); deliver must not outlive it. */
  deadline: number;
  /** Aborted at the deadline. */
  signal: AbortSignal;
  /** The batch's events, oldest first, excluded ones omitted. */
  events: StoredEvent[];
  /** The source's event_header (e.g. X-GitHub-Event), for hermes and unwrap. */
  eventHeader: string | null;
  clock: Clock;
  log: Logger;
}

export type Idempotency = "per-batch" | "per-attempt" | "per-event";

export interface Destination {
  /** "hermes:github-ci", "script:calendar", "audit" */
  readonly name: string;
  readonly type: "hermes" | "http" | "script";
  readonly timeoutS: number;
  /** What the receiver accepts; check bounds max_bytes by it. */
  readonly maxBodyBytes: number;
  readonly maxInflight: number;
  /** Fixed by the type (spec 6.4): per-event when unwrap is on. */
  readonly idempotency: Idempotency;
  readonly unwrap: boolean;
  /** Deliver one batch document (`body` is its JSON text). */
  deliver(body: string, ctx: DeliveryContext): Promise<Outcome>;
  /** Config and secret problems, for hookspool check. */
  check(): string[];
}

/** The delivery id of spec 6.4: per batch, per attempt (hermes) or per event (unwrap). */
export function deliveryId(idempotency: Idempotency, instanceId: string, batchId: number, attemptId: number, eventId?: number): string {
  if (idempotency === "per-attempt") return `hs_${instanceId}_${batchId}_${attemptId}`;
  if (idempotency === "per-event" && eventId !== undefined) return `hs_${instanceId}_${batchId}_${eventId}`;
  return `hs_${instanceId}_${batchId}`;
}
