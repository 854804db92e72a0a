// Export on PostgreSQL: the same records as SQLite's export (every batch with its events,
// payloads, headers, raw bodies and attempts, oldest first), paged by id so a large spool
// streams and batches written meanwhile are picked up once, with SQLite's filter terms.
import { type BatchRow, batchWhere } from "../batches.ts";
import { EXPORT_PAGE, type ExportFilter, type ExportRecord } from "../export.ts";
import { numbered, type PgSpool } from "./db.ts";
import { batchRowOf, attemptOf, exportEventOf } from "./reads.ts";
import { pgPayloadSql } from "./where.ts";

export async function* exportBatchesPg(
  spool: PgSpool,
  filter: ExportFilter = {},
  pageSize = EXPORT_PAGE,
): AsyncGenerator<ExportRecord> {
  const filtered = batchWhere(filter, pgPayloadSql);
  const where = ["id > $after", ...filtered.where];
  let after = filter.after ?? 0;
  for (;;) {
    const q = numbered(`SELECT * FROM batches WHERE ${where.join(" AND ")} ORDER BY id LIMIT $limit`, {
      ...filtered.params,
      after,
      limit: pageSize,
    });
    const rows = ((await spool.sql.unsafe(q.text, q.values)) as Record<string, unknown>[]).map(batchRowOf);
    for (const batch of rows) yield await record(spool, batch);
    if (rows.length < pageSize) return;
    after = rows[rows.length - 1].id;
  }
}

async function record(spool: PgSpool, batch: BatchRow): Promise<ExportRecord> {
  const events =
    (await spool.sql`SELECT id, event_type, received_at, dedup_id, size, excluded_at, route, trace, version, payload,
      headers, raw, raw_is_payload
      FROM events WHERE batch_id = ${batch.id}::bigint ORDER BY id`) as Record<string, unknown>[];
  const attempts = (await spool.sql`SELECT * FROM attempts WHERE batch_id = ${batch.id}::bigint ORDER BY id`) as Record<
    string,
    unknown
  >[];
  return { batch, events: events.map(exportEventOf), attempts: attempts.map(attemptOf) };
}
