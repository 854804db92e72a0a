// Retention: delete finished work past its age in small BEGIN IMMEDIATE transactions,
// yielding to the event loop between them, so the intake never waits long for the write lock.

/** How long each kind of finished row is kept. Dead batches have no entry: never. */
export interface RetentionPolicy {
  deliveredDays: number;
  attemptsDays: number;
  droppedDays: number;
  issuesDays: number;
  /** The source's dedup_window_s; sources no longer in the config get the default. */
  dedupWindowS: (source: string) => number;
}

/** Rows one pass deleted, per table (batches counts delivered and dropped together). */
export interface RetentionCounts {
  batches: number;
  events: number;
  attempts: number;
  dedup: number;
  issues: number;
}

export interface RetentionOptions {
  /** Rows deleted per transaction at most: small, so the intake never waits long for the lock. */
  batchSize?: number;
}

/** The dedup window of a source that does not set dedup_window_s (or is gone from the config). */
export const DEFAULT_DEDUP_WINDOW_S = 86400;

export const RETENTION_BATCH_SIZE = 1000;

export const DAY_S = 86400;

/** The parts of a loaded config the policy reads; Config satisfies it. */
export interface RetentionSettings {
  retention: { delivered_days: number; attempts_days: number; dropped_days: number; issues_days: number };
  sources: Record<string, { dedup_window_s?: number }>;
  bobbins?: Record<string, { dedup_window_s?: number }>;
}

/** The policy of a config: its retention section and each source's (or bobbin instance's) window. */
export function policyFromConfig(cfg: RetentionSettings): RetentionPolicy {
  const r = cfg.retention;
  return {
    deliveredDays: r.delivered_days,
    attemptsDays: r.attempts_days,
    droppedDays: r.dropped_days,
    issuesDays: r.issues_days,
    dedupWindowS: (source) =>
      cfg.sources[source]?.dedup_window_s ?? cfg.bobbins?.[source]?.dedup_window_s ?? DEFAULT_DEDUP_WINDOW_S,
  };
}

/**
 * Run `chunk` (one transaction, which returns how many rows it deleted) until one deletes
 * nothing, letting timers and requests run between two: a pass never holds the database long.
 */
export async function inChunks(chunk: () => number | Promise<number>): Promise<void> {
  while ((await chunk()) > 0) await new Promise<void>((resolve) => setImmediate(resolve));
}

/** A finished batch retention may delete, with how many events it holds. */
export interface FinishedBatch {
  id: number;
  events: number;
}

/** What one transaction of a finished-batch pass deletes. */
export interface FinishedChunk {
  /** Batches that go whole, with their events. */
  batches: number[];
  /**
   * A batch with more events than a whole transaction may delete: `limit` of its events go
   * now (oldest first), the batch itself in a later transaction once the rest fits.
   */
  someEventsOf?: { id: number; limit: number };
}

/**
 * Of the finished batches (oldest first), what one transaction of at most `size` rows deletes:
 * each batch with its events while they fit; the first that does not fit ends the chunk, and if
 * even a whole transaction could not hold it, a transaction's worth of its events goes instead.
 */
export function planFinishedChunk(rows: readonly FinishedBatch[], size: number): FinishedChunk {
  const chunk: FinishedChunk = { batches: [] };
  let budget = size;
  for (const r of rows) {
    if (r.events + 1 > budget) {
      if (budget === size) chunk.someEventsOf = { id: r.id, limit: budget };
      break;
    }
    chunk.batches.push(r.id);
    budget -= r.events + 1;
  }
  return chunk;
}
