// The shapes of the counts status and metrics read from either backend: batches per state, a
// poll's row.
import type { BatchState } from "./batches.ts";

export type StateCounts = Record<BatchState | "quarantined", number>;

export interface PollRow {
  instance: string;
  next_at: number;
  last_tick_at: number | null;
  last_batch_id: number | null;
  delivered_at: number | null;
  delivered_tick_at: number | null;
  skipped: number;
  created_at: number;
  /** The state of the last tick's batch, when it still exists. */
  last_batch_state: BatchState | null;
}
