// An attempt's record and its mark as both backends make it: what a fenced mark takes and
// returns, the attempt outcomes, an error scrubbed before it is stored (no query string, no
// secret, bounded), and the facts an outcome's plan reads of an attempt.
import type { EnqueueResult } from "./enqueue.ts";

/** What one attempt did, recorded on its attempt row. */
export interface AttemptRecord {
  klass: string | null;
  status: number | null;
  /** Short, scrubbed; never a body or a secret. */
  error: string | null;
  durationMs: number;
  counted: boolean;
  eventsDelivered?: number | null;
  failedEventId?: number | null;
  /** Requests it made that count against a paced destination's rate (kept only where the claim reserved some). */
  hits?: number;
  /** The receiver's own word, and whether a duplicate proved nothing (attempts.answer, attempts.unconfirmed). */
  answer?: string | null;
  unconfirmed?: boolean;
}

export interface MarkBase {
  batchId: number;
  attemptId: number;
  /** The claim's lease_owner: the fence every mark checks. */
  owner: string;
  now: number;
  attempt: AttemptRecord;
}

export type MarkResult = { applied: true; emitted: EnqueueResult[] } | { applied: false };

/** last_error and attempt errors: one line, at most 500 characters. */
export function scrubError(s: string | null | undefined): string | null {
  if (s === null || s === undefined) return null;
  return s.replace(/[\u0000-\u001f\u007f]+/g, " ").slice(0, 500);
}

/** How an attempt row ends, as the schema's CHECK lists them (discarded: its lease was lost). */
export const ATTEMPT_OUTCOMES = ["ok", "retry", "dead", "discarded"] as const;

export type AttemptOutcome = (typeof ATTEMPT_OUTCOMES)[number];

/** What the journal (and so watch) says of an attempt: its class, status, answer and time, never its error text. */
export function attemptFacts(a: AttemptRecord): Record<string, unknown> {
  return {
    ...(a.klass ? { class: a.klass } : {}),
    ...(a.status !== null ? { status: a.status } : {}),
    ...(a.answer ? { answer: a.answer } : {}),
    ...(a.unconfirmed ? { unconfirmed: true } : {}),
    duration_ms: Math.round(a.durationMs),
  };
}
