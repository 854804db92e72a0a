// Group commit at the intake, one class for both backends. Requests whose verification and
// classification finished in the same turn of the event loop (under load: those that arrived
// while the last COMMIT ran) share one transaction, so the fsyncs per request fall below one.
// Each request's enqueue (its dedup check, join rule and tee copies) runs in a SAVEPOINT of its
// own: one that fails is rolled back alone and only its caller sees the error. Every caller's
// promise settles after the COMMIT that holds its rows returned; a failed COMMIT rejects every
// caller in it, so the intake answers 503 to exactly those requests. A lone request commits at
// once. What differs per backend is the commit step (the dialect's transaction) and how many
// transactions may be in flight at once.
import type { EnqueueResult, NewEvent } from "./enqueue.ts";

/** The most one transaction holds: events, and their payload plus raw body bytes. */
export interface GroupLimits {
  events: number;
  bytes: number;
}

export const GROUP_LIMITS: GroupLimits = { events: 256, bytes: 16 * 1024 * 1024 };

/** One request waiting for its group's commit. */
export interface GroupJob {
  /** One request's events: one, or several when its source split it; all or none are queued. */
  evs: readonly NewEvent[];
  now: number;
  bytes: number;
  /** When it was handed in (performance.now()): a wait for the write lock counts from here. */
  queuedAt: number;
  resolve(r: EnqueueResult[]): void;
  reject(e: unknown): void;
}

/** One request's part of a committed group: its results, or the error its savepoint rolled back on. */
export type JobOutcome = { ok: EnqueueResult[] } | { error: unknown };

/**
 * The dialect's transaction over one group: each job's events in a savepoint of its own, in
 * order, one outcome per job. It throws (or rejects) when the transaction as a whole failed.
 */
export type CommitStep = (group: readonly GroupJob[]) => JobOutcome[] | Promise<JobOutcome[]>;

/** The next group from the front of `pending` (removed from it): at least one job, then as many as the limits allow. */
export function takeGroup(pending: GroupJob[], limits: GroupLimits): GroupJob[] {
  let bytes = pending[0].bytes;
  let n = 1;
  while (n < pending.length && n < limits.events && bytes + pending[n].bytes <= limits.bytes)
    bytes += pending[n++].bytes;
  return pending.splice(0, n);
}

export interface GroupOptions {
  /**
   * Transactions in flight at once. SQLite's step commits in the turn that takes its group, or,
   * when another process holds the lock, waits in the connection's line, groups in arrival
   * order (sqlite/wait.ts); PostgreSQL's holds a pooled connection each.
   */
  parallel?: number;
  limits?: GroupLimits;
}

export class GroupCommit {
  private pending: GroupJob[] = [];
  private inFlight = 0;
  private scheduled = false;
  private readonly parallel: number;
  private readonly limits: GroupLimits;
  /** Transactions committed and events they held (the bench and tests read them). */
  readonly stats = { commits: 0, events: 0 };

  constructor(
    private readonly step: CommitStep,
    o: GroupOptions = {},
  ) {
    this.parallel = o.parallel ?? Number.POSITIVE_INFINITY;
    this.limits = o.limits ?? GROUP_LIMITS;
  }

  /** Enqueue one event; resolves once its rows are committed. */
  async enqueue(ev: NewEvent, now: number): Promise<EnqueueResult> {
    return (await this.enqueueAll([ev], now))[0];
  }

  /** Enqueue one request's events under one savepoint (all or none); resolves once they are committed. */
  enqueueAll(evs: readonly NewEvent[], now: number): Promise<EnqueueResult[]> {
    return new Promise((resolve, reject) => {
      const bytes = evs.reduce((n, ev) => n + ev.payload.length + (ev.raw?.length ?? 0), 0);
      this.pending.push({ evs, now, bytes, queuedAt: performance.now(), resolve, reject });
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.scheduled || this.inFlight >= this.parallel || this.pending.length === 0) return;
    this.scheduled = true;
    // After this turn's other requests have been read and verified: they join this commit.
    setImmediate(() => {
      this.scheduled = false;
      while (this.pending.length > 0 && this.inFlight < this.parallel)
        void this.commit(takeGroup(this.pending, this.limits));
    });
  }

  private async commit(group: GroupJob[]): Promise<void> {
    this.inFlight++;
    try {
      let outcomes: JobOutcome[];
      try {
        outcomes = await this.step(group);
      } catch (e) {
        for (const job of group) job.reject(e);
        return;
      }
      this.stats.commits++;
      this.stats.events += group.reduce((n, job) => n + job.evs.length, 0);
      group.forEach((job, i) => {
        const o = outcomes[i];
        if ("ok" in o) job.resolve(o.ok);
        else job.reject(o.error);
      });
    } finally {
      this.inFlight--;
      this.schedule();
    }
  }
}
