// Group commit at the intake. Requests whose verification and classification finished in the
// same turn of the event loop (under load: those that arrived while the last COMMIT ran) share
// one BEGIN IMMEDIATE ... COMMIT, so the fsyncs per request fall below one. Each request's
// enqueue (its dedup check, join rule and tee copies) runs in a SAVEPOINT of its own: one that
// fails is rolled back alone and only its caller sees the error. Every caller's promise settles
// after the COMMIT that holds its rows returned; a failed COMMIT rejects every caller in it, so
// the intake answers 503 to exactly those requests. A lone request commits at once.
import type { Spool } from "./db.ts";
import { type EnqueueResult, enqueueTx, type NewEvent } from "./enqueue.ts";
import { testHook } from "../testhook.ts";

/** The most one transaction holds: events, and their payload plus raw body bytes. */
export interface GroupLimits {
  events: number;
  bytes: number;
}

export const GROUP_LIMITS: GroupLimits = { events: 256, bytes: 16 * 1024 * 1024 };

/** The next group from the front of `pending` (removed from it): at least one job, then as many as the limits allow. */
export function takeGroup(pending: GroupJob[], limits: GroupLimits): GroupJob[] {
  let bytes = pending[0].bytes;
  let n = 1;
  while (n < pending.length && n < limits.events && bytes + pending[n].bytes <= limits.bytes) bytes += pending[n++].bytes;
  return pending.splice(0, n);
}

/** One request waiting for its group's commit (both backends' group commit). */
export interface GroupJob {
  /** One request's events: one, or several when its source split it; all or none are queued. */
  evs: readonly NewEvent[];
  now: number;
  bytes: number;
  resolve(r: EnqueueResult[]): void;
  reject(e: unknown): void;
}

type Outcome = { ok: EnqueueResult[] } | { error: unknown };

export class GroupCommit {
  private pending: GroupJob[] = [];
  private scheduled = false;
  /** Transactions committed and events they held (the bench and tests read them). */
  readonly stats = { commits: 0, events: 0 };

  constructor(
    private readonly spool: Spool,
    private readonly limits: GroupLimits = GROUP_LIMITS,
  ) {}

  /** Enqueue one event; resolves once its rows are committed. */
  async enqueue(ev: NewEvent, now: number): Promise<EnqueueResult> {
    return (await this.enqueueAll([ev], now))[0];
  }

  /** Enqueue one request's events under one savepoint (all or none); resolves once they are committed. */
  enqueueAll(evs: readonly NewEvent[], now: number): Promise<EnqueueResult[]> {
    return new Promise((resolve, reject) => {
      const bytes = evs.reduce((n, ev) => n + ev.payload.length + (ev.raw?.length ?? 0), 0);
      this.pending.push({ evs, now, bytes, resolve, reject });
      if (this.scheduled) return;
      this.scheduled = true;
      // After this turn's other requests have been read and verified: they join this commit.
      setImmediate(() => this.flush());
    });
  }

  private flush(): void {
    this.scheduled = false;
    while (this.pending.length > 0) this.commit(this.take());
  }

  private take(): GroupJob[] {
    return takeGroup(this.pending, this.limits);
  }

  private commit(group: GroupJob[]): void {
    const db = this.spool.db;
    let outcomes: Outcome[];
    try {
      outcomes = db
        .transaction(() => {
          const out = group.map((job): Outcome => {
            let o: Outcome;
            try {
              // Nested: a SAVEPOINT, rolled back alone when this event's enqueue throws.
              o = { ok: db.transaction(() => job.evs.map((ev) => enqueueTx(db, ev, job.now)))() };
            } catch (error) {
              // A full disk or an I/O error ends the whole transaction, not just this savepoint:
              // then nothing of the group may commit, and every request in it is refused.
              if (!db.inTransaction) throw error;
              o = { error };
            }
            // Outside the savepoint: a failure here undoes the whole group, and none is acked.
            testHook("enqueue.after_savepoint");
            return o;
          });
          testHook("enqueue.before_commit");
          return out;
        })
        .immediate();
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
  }
}
