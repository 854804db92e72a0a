// What a reported outcome does to an awaiting batch, decided without touching the database.
// A destination with outcome = "await" leaves each batch it took `awaiting` (its key held); the
// batch ends when its run's outcome is reported (the CLI's `hookspool outcome`, a signed POST
// /outcomes/<webhook-id>) or overdue. From the facts a backend read in its transaction (the
// awaited attempt, the batch, its poison run) this plans the mark and the issues; SQLite
// (sqlite/awaiting.ts) and PostgreSQL (pg/awaiting.ts) apply it. Every outcome is an attempt row of
// class "agent" carrying the awaited delivery's id, and a journal step.
import type { DeadReason } from "../delivery.ts";
import { backoffS } from "./backoff.ts";
import type { RaiseIssue } from "./issues.ts";
import { POISON_STRIKES, type Policy } from "./outcome-plan.ts";

/** What the receiver says of the run: it succeeded, it failed, or (the dispatcher's own) it never said. */
export type RunStatus = "ok" | "failed" | "timeout";

/** The attempt class of a reported outcome (attempts.klass, batches.last_class on a failure). */
export const AGENT_CLASS = "agent";

/** A reported reason is kept this long at most (the receiver's words, stored, never logged). */
export const REASON_MAX = 200;

export interface ReportInput {
  /** The webhook-id of the delivery whose run ended. */
  deliveryId: string;
  status: RunStatus;
  reason: string | null;
  /** A failure no retry mends: the batch is dead (agent_failed) instead of retried. */
  permanent: boolean;
  /** Who said it: the CLI, the intake's /outcomes endpoint, or the dispatcher's timeout. */
  via: "cli" | "http" | "timeout";
  now: number;
  /** Uniform in [0, 1): the backoff's jitter, drawn by the caller. */
  jitter: number;
  policy: Policy;
  /** A timeout: what the destination's on_timeout says (retry unless told). */
  onTimeout?: "retry" | "delivered";
}

export type Reported =
  | {
      kind: "settled";
      batchId: number;
      destination: string;
      state: "delivered" | "retry" | "dead";
      nextAttemptAt?: number;
      deadReason?: DeadReason;
    }
  /** No delivery of ours has this id (or its attempts were pruned). */
  | { kind: "unknown" }
  /** The delivery's outcome is in already (or the batch has moved on: replayed, dropped, delivered again). */
  | { kind: "settled_already"; batchId: number; state: string };

/**
 * Where a webhook-id points: its batch and destination, whether that delivery awaits its
 * outcome, and whether its request is still in flight (a receiver may report the run's outcome
 * before the dispatcher has recorded the 2xx that started it).
 */
export interface AwaitedDelivery {
  batchId: number;
  destination: string;
  state: string;
  awaiting: boolean;
  inFlight: boolean;
}

/** The facts the plan needs, read in the transaction. */
export interface AwaitingFacts {
  /** The delivery's accepted attempt (class "await") and when it ended. */
  attemptId: number;
  acceptedAt: number;
  batch: { id: number; state: string; destination: string; route: string; attempts: number };
  /** Whether that attempt is the batch's newest accepted one (an older delivery's outcome settles nothing). */
  newest: boolean;
  /** The batch's poison run before this failure (read for a failure only). */
  strikes: number;
  /** The batch's attempt rows so far (the outcome's row is number count + 1). */
  attemptRows: number;
}

/** What the outcome's attempt row records. */
export interface OutcomeAttempt {
  n: number;
  outcome: "ok" | "retry" | "dead";
  /** The status word: ok, failed, timeout. */
  answer: RunStatus;
  error: string | null;
  counted: boolean;
  /** From the 2xx to the outcome. */
  durationMs: number;
}

export type AwaitingMark =
  | { kind: "delivered"; result: string }
  | { kind: "retry"; nextAttemptAt: number; error: string }
  | { kind: "dead"; deadReason: DeadReason; error: string };

export interface AwaitingPlan {
  mark: AwaitingMark;
  attempt: OutcomeAttempt;
  raise: RaiseIssue[];
  resolve: string[];
}

/** Whether the facts let this outcome settle anything: the batch awaits, on this very delivery. */
export function settles(f: AwaitingFacts): boolean {
  return f.batch.state === "awaiting" && f.newest;
}

/** A reason as stored: one line, at most REASON_MAX characters; null when empty. */
export function cleanReason(reason: string | null | undefined): string | null {
  if (reason === null || reason === undefined) return null;
  const s = reason
    .replace(/[\u0000-\u001f\u007f]+/g, " ")
    .trim()
    .slice(0, REASON_MAX);
  return s === "" ? null : s;
}

/** The plan for one outcome of an awaiting batch (the caller checked settles(facts)). Pure. */
export function planAwaiting(f: AwaitingFacts, r: ReportInput): AwaitingPlan {
  const dest = f.batch.destination;
  const reason = cleanReason(r.reason);
  const n = f.attemptRows + 1;
  const durationMs = Math.max(0, Math.round((r.now - f.acceptedAt) * 1000));
  const issue = (reasonClass: string, error: string): RaiseIssue => ({
    fingerprint: `delivery:${dest}:${reasonClass}`,
    kind: "delivery",
    destination: dest,
    route: f.batch.route,
    batchId: f.batch.id,
    error,
    now: r.now,
  });
  const okFingerprints = [`delivery:${dest}:agent_failed`, `delivery:${dest}:outcome_timeout`];

  if (r.status === "ok" || (r.status === "timeout" && r.onTimeout === "delivered")) {
    const timedOut = r.status === "timeout";
    return {
      mark: { kind: "delivered", result: timedOut ? "timeout" : "ok" },
      attempt: {
        n,
        outcome: "ok",
        answer: r.status,
        error: timedOut ? "no outcome in time; on_timeout = delivered" : reason,
        counted: true,
        durationMs,
      },
      raise: timedOut
        ? [
            issue(
              "outcome_timeout",
              `batch ${f.batch.id}: no outcome reported within outcome_timeout_s; taken as delivered (on_timeout = ` +
                `delivered). Does the receiver report outcomes? See docs/receiving.md`,
            ),
          ]
        : [],
      resolve: timedOut ? [] : okFingerprints,
    };
  }

  const said = r.status === "timeout" ? "no outcome in time" : `agent_failed${reason ? `: ${reason}` : ""}`;
  const attempt = (outcome: "retry" | "dead", counted: boolean): OutcomeAttempt => ({
    n,
    outcome,
    answer: r.status,
    error: said,
    counted,
    durationMs,
  });
  const dead = (deadReason: DeadReason, counted: boolean, why: string): AwaitingPlan => ({
    mark: { kind: "dead", deadReason, error: why },
    attempt: attempt("dead", counted),
    raise: [
      issue(
        deadReason === "agent_failed" ? "agent_failed" : deadReason,
        `${why}; batch ${f.batch.id} is dead (${deadReason}): hookspool show ${f.batch.id} --attempts, then ` +
          `hookspool replay ${f.batch.id}`,
      ),
    ],
    resolve: [],
  });
  if (r.status === "failed" && r.permanent) return dead("agent_failed", true, said);
  // A run that keeps failing while the destination's other runs succeed is poison, as a payload
  // that keeps crashing a receiver is: it dies uncounted, and the key moves on.
  if (f.strikes >= POISON_STRIKES)
    return dead(
      "poison",
      false,
      `poison: ${said}, ${POISON_STRIKES + 1} failed runs in a row while the destination's other runs succeeded`,
    );
  const attempts = f.batch.attempts + 1;
  if (attempts >= r.policy.maxAttempts)
    return dead("exhausted", true, `${said}; ${attempts} counted attempts (max_attempts)`);
  const next = r.now + backoffS(attempts, r.policy.backoffBaseS, r.policy.backoffCapS, { next: () => r.jitter });
  const raise: RaiseIssue[] = [];
  if (r.status === "timeout")
    raise.push(
      issue(
        "outcome_timeout",
        `batch ${f.batch.id}: no outcome reported within outcome_timeout_s; delivered again (on_timeout = retry). ` +
          `Does the receiver report outcomes? See docs/receiving.md`,
      ),
    );
  else if (attempts >= 3)
    raise.push(
      issue(
        "agent_failed",
        `the agent's run failed ${attempts} times on batch ${f.batch.id}${reason ? ` (last: ${reason})` : ""}`,
      ),
    );
  return {
    mark: { kind: "retry", nextAttemptAt: next, error: said },
    attempt: attempt("retry", true),
    raise,
    resolve: [],
  };
}

/** What the caller hears: the mark's state and, for a retry or a death, when and why. */
export function reportedOf(f: AwaitingFacts, plan: AwaitingPlan): Extract<Reported, { kind: "settled" }> {
  const m = plan.mark;
  const base = { kind: "settled" as const, batchId: f.batch.id, destination: f.batch.destination };
  if (m.kind === "delivered") return { ...base, state: "delivered" };
  if (m.kind === "retry") return { ...base, state: "retry", nextAttemptAt: m.nextAttemptAt };
  return { ...base, state: "dead", deadReason: m.deadReason };
}

/** An awaiting batch whose outcome is overdue, and the delivery it awaits. */
export interface OverdueOutcome {
  batchId: number;
  destination: string;
  deliveryId: string | null;
}
