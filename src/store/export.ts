// Export: every batch with its events (payloads, headers, raw bodies) and attempts,
// one record per batch, read a page at a time so a large spool streams.
import type { AttemptRow, BatchFilter, BatchRow, EventListing } from "./batches.ts";

/** What export takes: the filter list has (since and until on batches.last_at), and where to start. */
export type ExportFilter = BatchFilter & {
  /** Only batches with a higher id (a later page of an export cut short by --limit). */
  after?: number;
};

/** An event as exported: its listing (as `show --events` has it) and its payload columns. */
export interface ExportEvent extends EventListing {
  /** The JSON text the destination receives; null for a quarantined request. */
  payload: string | null;
  headers: Record<string, string>;
  /** The original body, base64; null when the source does not store raw bodies. */
  raw_base64: string | null;
}

export interface ExportRecord {
  batch: BatchRow;
  events: ExportEvent[];
  attempts: AttemptRow[];
}

/** Batch rows per read; a batch's events are read only when its record is yielded. */
export const EXPORT_PAGE = 500;
