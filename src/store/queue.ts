// The dispatcher's queue as both backends hand it over: a candidate (a deliverable batch that
// heads its (route, key) group), what a claim asks and what it returns, and lease recovery's
// options.
import type { Rate } from "../pacing.ts";

export interface Candidate {
  id: number;
  route: string;
  source: string;
  destination: string;
  key: string;
  state: "sealed" | "retry";
  first_at: number;
  attempts: number;
  count: number;
  bytes: number;
}

export interface ClaimInput {
  batchId: number;
  destination: string;
  now: number;
  /** now + destination timeout_s + lease_grace_s. */
  leaseUntil: number;
  host: string;
  pid: number;
  /** A probe's claim also records last_probe_batch_id and probe_until = lease_until. */
  probe?: boolean;
  /**
   * The destination's max_inflight, from a dispatcher. SQLite's one dispatcher counts its own
   * deliveries; on PostgreSQL, where several share a destination, a claim that gives it checks
   * the gate again under the destination's claim lock, counting every dispatcher's leases.
   */
  maxInflight?: number;
  /** The delivery id for this attempt, from the attempt id and number, and how often the batch was delivered before. */
  deliveryId?: (attemptId: number, n: number, resend: number) => string;
  /**
   * A paced destination's rate and the requests this attempt reserves in its window (recorded
   * on the attempt row; its end sets what it really sent). PostgreSQL checks the window again
   * under the destination's claim lock.
   */
  rate?: Rate;
  hits?: number;
  /**
   * The destination's run budgets: PostgreSQL, where several dispatchers share a destination,
   * counts their spends again under the destination's claim lock (SQLite's one dispatcher
   * checked them in its tick).
   */
  budget?: Rate | null;
  keyBudget?: Rate | null;
}

export interface Claim {
  attemptId: number;
  n: number;
  owner: string;
  leaseUntil: number;
  deliveryId: string | null;
  /** How many times the batch was delivered before this attempt (0 unless resent). */
  resend: number;
}

export interface RecoverOptions {
  now: number;
  /** Startup: every leased row belongs to a dead process (the flock guarantees it). */
  all: boolean;
  /** lease_owner values of this process's live workers: never recovered. */
  live?: ReadonlySet<string>;
}
