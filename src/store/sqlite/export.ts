// Export on SQLite: batches and their events as JSON lines records (hookspool export), read a
// page at a time so a large spool never sits in memory.
import { type BatchRow, batchWhere, type EventListing, type EventPayload, parseTrace } from "../batches.ts";
import { batchAttempts } from "./reads.ts";
import { prepared, type SqliteSpool } from "./db.ts";
import { storedRaw } from "../enqueue.ts";
import { EXPORT_PAGE, type ExportEvent, type ExportFilter, type ExportRecord } from "../export.ts";
import { sqlitePayloadSql } from "./where.ts";

/** An event row with its payload, headers and raw body: the listing plus the payload columns. */
type StoredEvent = Omit<EventListing, "trace"> & { trace: string | null; raw_is_payload: number } & Pick<
    EventPayload,
    "payload" | "headers" | "raw"
  >;

const EVENTS = `SELECT id, event_type, received_at, dedup_id, size, excluded_at, route, trace, version, payload,
    headers, raw, raw_is_payload
  FROM events WHERE batch_id = ? ORDER BY id`;

function parseHeaders(text: string): Record<string, string> {
  try {
    const v = JSON.parse(text);
    return v && typeof v === "object" && !Array.isArray(v) ? v : {};
  } catch {
    return {};
  }
}

function exportEvent(e: StoredEvent): ExportEvent {
  const { headers, raw, raw_is_payload, trace, ...rest } = e;
  const body = storedRaw({ payload: rest.payload, raw, raw_is_payload });
  return {
    ...rest,
    trace: parseTrace(trace),
    headers: parseHeaders(headers),
    raw_base64: body ? Buffer.from(body).toString("base64") : null,
  };
}

/**
 * The batches matching `filter`, oldest (lowest id) first, each with its events in order and
 * its attempts. Pages by id, so batches written while the export runs are picked up and
 * none is yielded twice; each page is its own read, so the WAL is never held for the whole run.
 */
export function* exportBatches(
  spool: SqliteSpool,
  filter: ExportFilter = {},
  pageSize = EXPORT_PAGE,
): Generator<ExportRecord> {
  const db = spool.db;
  const filtered = batchWhere(filter, sqlitePayloadSql);
  const where = ["id > $after", ...filtered.where];
  const params: Record<string, string | number> = { ...filtered.params, limit: pageSize };
  const text = `SELECT * FROM batches WHERE ${where.join(" AND ")} ORDER BY id LIMIT $limit`;
  // A page with --where's paths in its text is this export's own statement, finalized at its end.
  const once = Boolean(filter.where?.length);
  const page = once
    ? db.prepare<BatchRow, Record<string, string | number>>(text)
    : prepared<BatchRow, Record<string, string | number>>(db, text);
  const events = prepared<StoredEvent, [number]>(db, EVENTS);
  let after = filter.after ?? 0;
  try {
    for (;;) {
      const rows = page.all({ ...params, after });
      for (const batch of rows) {
        yield { batch, events: events.all(batch.id).map(exportEvent), attempts: batchAttempts(spool, batch.id) };
      }
      if (rows.length < pageSize) return;
      after = rows[rows.length - 1].id;
    }
  } finally {
    if (once) page.finalize();
  }
}
