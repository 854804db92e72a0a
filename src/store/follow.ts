// What `hookspool send --follow` reads from either backend: each state the next event's batch
// takes. The walk is written once here; a dialect gives its two reads (the batch of the first
// event after a given id, and that batch's state) and, where it has one, a cheap check that
// anything was written since it last looked (SQLite's data_version), so an idle wait reads nothing.
export interface FollowStep {
  batch: number;
  state: string;
  /** The last error or class of a retry or a dead batch, the result of a delivered one. */
  detail?: string;
}

/** The columns of a followed batch that its steps show. */
export interface FollowedBatch {
  state: string;
  last_class: string | null;
  dead_reason: string | null;
  result: string | null;
}

/** A dialect's reads for the walk. */
export interface FollowReads {
  /** The batch of the first event of `source` with an id above `after`, or null while there is none. */
  firstBatchAfter(source: string, after: number): Promise<number | null>;
  batchState(id: number): Promise<FollowedBatch | null>;
  /** False when nothing was written since the last call (this turn's reads are skipped); absent: always read. */
  changed?(): boolean;
  /** How long to wait between looks. */
  pauseMs: number;
}

/** A followed batch ends when it is delivered, dead or dropped. */
export const FOLLOW_TERMINAL: ReadonlySet<string> = new Set(["delivered", "dead", "dropped"]);

/** What a step says beside the state: a dead batch's reason, a retry's class, a delivered batch's result. */
export function followDetail(b: FollowedBatch): string | undefined {
  const detail =
    b.state === "dead" ? b.dead_reason : b.state === "retry" ? b.last_class : b.state === "delivered" ? b.result : null;
  return detail ?? undefined;
}

/**
 * Each state the next event of `o.source` after `o.after` takes in its batch, until it is
 * delivered, dead or dropped, or `o.timeoutMs` ran out.
 */
export async function* followEvent(
  reads: FollowReads,
  o: { source: string; after: number; timeoutMs: number },
): AsyncGenerator<FollowStep> {
  const until = performance.now() + o.timeoutMs;
  let batch: number | null = null;
  let last = "";
  while (performance.now() < until) {
    if (!reads.changed || reads.changed()) {
      if (batch === null) batch = await reads.firstBatchAfter(o.source, o.after);
      const b = batch === null ? null : await reads.batchState(batch);
      if (batch !== null && b && b.state !== last) {
        last = b.state;
        const detail = followDetail(b);
        yield detail ? { batch, state: b.state, detail } : { batch, state: b.state };
        if (FOLLOW_TERMINAL.has(b.state)) return;
      }
    }
    await Bun.sleep(reads.pauseMs);
  }
}
