// The ends of attempts, written together: deliveries that finish in the same turn of the event
// loop share one outcome transaction (one fsync for all of them) instead of one each, and one
// now_eff, which the store reads as it writes the transaction (on PostgreSQL in the statement
// that reads its facts; a worker that read it itself would wait a round trip first and miss its
// turn's transaction). Each is still decided alone, behind its own lease fence.
import type { DispatchStore } from "../store/api.ts";
import type { OutcomeEnd, Recorded } from "../store/outcome-plan.ts";
import { dispatchCounters } from "../obs/counters.ts";

/** At most this many outcomes in one transaction; the rest go in the next. */
const MAX_PER_COMMIT = 64;

interface Pending {
  input: OutcomeEnd;
  resolve: (r: Recorded) => void;
  reject: (e: unknown) => void;
}

export class OutcomeWriter {
  private pending: Pending[] = [];
  private scheduled = false;
  /**
   * A transaction is being written: the next waits for it (one at a time, never two that could lock each other's rows).
   */
  private flushing = false;
  /** Transactions written and outcomes in them (for the benchmark and tests). */
  readonly stats = { commits: 0, outcomes: 0 };

  constructor(private readonly store: Pick<DispatchStore, "recordEnds">) {}

  /** Resolves once the transaction holding this outcome has committed; rejects when it failed. */
  record(input: OutcomeEnd): Promise<Recorded> {
    return new Promise<Recorded>((resolve, reject) => {
      this.pending.push({ input, resolve, reject });
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.scheduled || this.flushing) return;
    this.scheduled = true;
    // setImmediate, not a microtask: the other deliveries whose responses arrived in this turn
    // of the event loop get to finish first and join.
    setImmediate(() => void this.flush());
  }

  private async flush(): Promise<void> {
    this.scheduled = false;
    this.flushing = true;
    const take = this.pending.splice(0, MAX_PER_COMMIT);
    let recorded: (Recorded | Error)[];
    try {
      recorded = await this.store.recordEnds(take.map((p) => p.input));
    } catch (e) {
      for (const p of take) p.reject(e);
      return;
    } finally {
      this.flushing = false;
      // What arrived meanwhile (or did not fit) goes in the next transaction.
      if (this.pending.length > 0) this.schedule();
    }
    this.stats.commits++;
    this.stats.outcomes += take.length;
    dispatchCounters.outcomeCommits++;
    dispatchCounters.outcomes += take.length;
    take.forEach((p, i) => {
      const r = recorded[i];
      if (r instanceof Error) p.reject(r);
      else p.resolve(r);
    });
  }
}
