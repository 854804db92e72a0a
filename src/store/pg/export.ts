// Export on PostgreSQL: the same records as SQLite's export (every batch with its events,
// payloads, headers, raw bodies and attempts, oldest first), paged by id so a large spool
// streams and batches written meanwhile are picked up once, with SQLite's filter terms.
import type { AttemptRow, BatchRow } from "../batches.ts";
import { batchWhere, parseTrace } from "../batches.ts";
import { EXPORT_PAGE, type ExportEvent, type ExportFilter, type ExportRecord } from "../export.ts";
import { num, numOrNull, type PgSpool } from "./db.ts";
import { batchRowOf } from "./queue.ts";

/** SQLite's `$name` terms with PostgreSQL's numbered parameters, in order. */
function numbered(sql: string, params: Record<string, string | number>): { text: string; values: (string | number)[] } {
  const values: (string | number)[] = [];
  const at = new Map<string, number>();
  const text = sql.replace(/\$([a-z_]+)/g, (_, name: string) => {
    if (!at.has(name)) {
      values.push(params[name]);
      at.set(name, values.length);
    }
    return `$${at.get(name)}`;
  });
  return { text, values };
}

function headersOf(text: unknown): Record<string, string> {
  try {
    const v = JSON.parse(String(text ?? "{}"));
    return v && typeof v === "object" && !Array.isArray(v) ? v : {};
  } catch {
    return {};
  }
}

function eventOf(r: Record<string, unknown>): ExportEvent {
  const raw = r.raw as Uint8Array | null;
  return {
    id: num(r.id),
    event_type: String(r.event_type),
    received_at: Number(r.received_at),
    dedup_id: (r.dedup_id as string | null) ?? null,
    size: num(r.size),
    excluded_at: numOrNull(r.excluded_at),
    route: String(r.route),
    trace: parseTrace((r.trace as string | null) ?? null),
    payload: (r.payload as string | null) ?? null,
    headers: headersOf(r.headers),
    raw_base64: raw ? Buffer.from(raw).toString("base64") : null,
  };
}

function attemptOf(r: Record<string, unknown>): AttemptRow {
  return {
    ...(r as unknown as AttemptRow),
    id: num(r.id),
    batch_id: num(r.batch_id),
    n: Number(r.n),
    started_at: Number(r.started_at),
    finished_at: numOrNull(r.finished_at),
    status: numOrNull(r.status),
    duration_ms: numOrNull(r.duration_ms),
    probe: Number(r.probe),
    counted: Number(r.counted),
    events_delivered: numOrNull(r.events_delivered),
    failed_event_id: numOrNull(r.failed_event_id),
  };
}

export async function* exportBatchesPg(spool: PgSpool, filter: ExportFilter = {}, pageSize = EXPORT_PAGE): AsyncGenerator<ExportRecord> {
  const filtered = batchWhere(filter);
  const where = ["id > $after", ...filtered.where];
  let after = 0;
  for (;;) {
    const q = numbered(`SELECT * FROM batches WHERE ${where.join(" AND ")} ORDER BY id LIMIT $limit`, { ...filtered.params, after, limit: pageSize });
    const rows = ((await spool.sql.unsafe(q.text, q.values)) as Record<string, unknown>[]).map(batchRowOf);
    for (const batch of rows) yield await record(spool, batch);
    if (rows.length < pageSize) return;
    after = rows[rows.length - 1].id;
  }
}

async function record(spool: PgSpool, batch: BatchRow): Promise<ExportRecord> {
  const events = (await spool.sql`SELECT id, event_type, received_at, dedup_id, size, excluded_at, route, trace, payload, headers, raw
      FROM events WHERE batch_id = ${batch.id}::bigint ORDER BY id`) as Record<string, unknown>[];
  const attempts = (await spool.sql`SELECT * FROM attempts WHERE batch_id = ${batch.id}::bigint ORDER BY id`) as Record<string, unknown>[];
  return { batch, events: events.map(eventOf), attempts: attempts.map(attemptOf) };
}
