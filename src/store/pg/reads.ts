// What the operator's verbs read on PostgreSQL, as SQLite's reads give it (list, show, the ids
// replay --dead and --delivered take, a quarantine batch's requests, issues), and the issue
// verbs (ack, resolve, ignore) with SQLite's rules.
import { storedRaw } from "../enqueue.ts";
import {
  type BatchRow,
  type AttemptRow,
  listStatement,
  type EventListing,
  type EventPayload,
  type ListFilter,
  parseTrace,
} from "../batches.ts";
import { num, numOrNull, type PgSpool, numbered } from "./db.ts";
import type { ContentEvent } from "../content.ts";
import { contentEventOf } from "./enqueue-set.ts";
import type { ExportEvent } from "../export.ts";
import type { FollowedBatch, FollowReads } from "../follow.ts";
import { groupRequests, storedRequestsSql, type StoredRequestRow, type StoredRequestsQuery } from "../requests.ts";
import { type DeadFilter, deadWhere, deliveredWhere, replayIdsSql, type StoredRequest } from "../replay.ts";
import { pgPayloadSql } from "./where.ts";

/** A batches row with SQLite's types: BIGINT columns arrive as strings. */
export function batchRowOf(r: Record<string, unknown>): BatchRow {
  return {
    ...(r as unknown as BatchRow),
    id: num(r.id),
    first_at: Number(r.first_at),
    last_at: Number(r.last_at),
    quiet_s: Number(r.quiet_s),
    max_s: Number(r.max_s),
    max_events: Number(r.max_events),
    max_bytes: num(r.max_bytes),
    not_before: numOrNull(r.not_before),
    count: Number(r.count),
    bytes: num(r.bytes),
    sealed_at: numOrNull(r.sealed_at),
    attempts: Number(r.attempts),
    next_attempt_at: numOrNull(r.next_attempt_at),
    lease_until: numOrNull(r.lease_until),
    delivered_at: numOrNull(r.delivered_at),
    stale_floor: numOrNull(r.stale_floor),
    floor_at: numOrNull(r.floor_at),
  };
}

export async function getBatchPg(spool: PgSpool, id: number): Promise<BatchRow | null> {
  const [r] = await spool.sql`SELECT * FROM batches WHERE id = ${id}::bigint`;
  return r ? batchRowOf(r) : null;
}

/**
 * A batch ($1) and its content in one statement: the row beside each of its events (or alone,
 * when it has none), the events in id order, as contentOfBatchesPg reads them.
 */
export const DELIVERY_OF = `SELECT b.*, e.id AS e_id, e.event_type AS e_event_type, e.received_at AS e_received_at,
    e.dedup_id AS e_dedup_id, e.payload AS e_payload, e.headers AS e_headers, e.trace AS e_trace,
    e.version AS e_version, e.body_file AS e_body_file
  FROM batches b LEFT JOIN events e ON e.batch_id = b.id AND e.excluded_at IS NULL
  WHERE b.id = $1 ORDER BY e.id`;

/** What a worker delivers: the batch's row and its content (DELIVERY_OF). */
export async function deliveryOfPg(
  spool: PgSpool,
  id: number,
): Promise<{ batch: BatchRow; content: ContentEvent[] } | null> {
  const rows = (await spool.sql.unsafe(DELIVERY_OF, [id])) as Record<string, unknown>[];
  if (rows.length === 0) return null;
  // The batch's own columns (no column of batches starts with e_).
  const own = Object.fromEntries(Object.entries(rows[0]).filter(([k]) => !k.startsWith("e_")));
  return {
    batch: batchRowOf(own),
    content: rows.filter((r) => r.e_id !== null).map((r) => contentEventOf(r, "e_")),
  };
}

export function eventListingOf(r: Record<string, unknown>): EventListing {
  return {
    id: num(r.id),
    event_type: String(r.event_type),
    received_at: Number(r.received_at),
    dedup_id: (r.dedup_id as string | null) ?? null,
    size: num(r.size),
    excluded_at: numOrNull(r.excluded_at),
    route: String(r.route),
    trace: parseTrace((r.trace as string | null) ?? null),
    version: numOrNull(r.version),
  };
}

function headersOf(text: unknown): Record<string, string> {
  try {
    const v = JSON.parse(String(text ?? "{}"));
    return v && typeof v === "object" && !Array.isArray(v) ? v : {};
  } catch {
    return {};
  }
}

export function exportEventOf(r: Record<string, unknown>): ExportEvent {
  const raw = storedRaw({
    payload: r.payload as string | null,
    raw: r.raw as Uint8Array | null,
    raw_is_payload: Number(r.raw_is_payload),
  });
  return {
    ...eventListingOf(r),
    payload: (r.payload as string | null) ?? null,
    headers: headersOf(r.headers),
    raw_base64: raw ? Buffer.from(raw).toString("base64") : null,
  };
}

export function attemptOf(r: Record<string, unknown>): AttemptRow {
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
    hits: numOrNull(r.hits),
    unconfirmed: Number(r.unconfirmed ?? 0),
  };
}

async function query(
  spool: PgSpool,
  sql: string,
  params: Record<string, string | number | null>,
): Promise<Record<string, unknown>[]> {
  const q = numbered(sql, params);
  return (await spool.sql.unsafe(q.text, q.values)) as Record<string, unknown>[];
}

/** Batches, newest first (list's filters and its --before cursor). */
export async function listBatchesPg(spool: PgSpool, f: ListFilter = {}): Promise<BatchRow[]> {
  const { sql, params } = listStatement(f, pgPayloadSql);
  return (await query(spool, sql, params)).map(batchRowOf);
}

export async function batchEventsPg(spool: PgSpool, batchId: number): Promise<EventListing[]> {
  const rows =
    (await spool.sql`SELECT id, event_type, received_at, dedup_id, size, excluded_at, route, trace, version FROM events
      WHERE batch_id = ${batchId}::bigint ORDER BY id`) as Record<string, unknown>[];
  return rows.map(eventListingOf);
}

export async function batchPayloadsPg(spool: PgSpool, batchId: number): Promise<EventPayload[]> {
  const rows = (await spool.sql`SELECT id, payload, raw, raw_is_payload, headers FROM events
      WHERE batch_id = ${batchId}::bigint ORDER BY id`) as Record<string, unknown>[];
  return rows.map((r) => {
    const payload = (r.payload as string | null) ?? null;
    const raw = r.raw ? new Uint8Array(r.raw as Uint8Array) : null;
    return {
      id: num(r.id),
      payload,
      raw: storedRaw({ payload, raw, raw_is_payload: Number(r.raw_is_payload) }),
      headers: String(r.headers),
    };
  });
}

export async function batchAttemptsPg(spool: PgSpool, batchId: number): Promise<AttemptRow[]> {
  return (
    (await spool.sql`SELECT * FROM attempts WHERE batch_id = ${batchId}::bigint ORDER BY id`) as Record<
      string,
      unknown
    >[]
  ).map(attemptOf);
}

/** The dead batches `replay --dead` takes, oldest first (SQLite's terms). */
export async function deadBatchIdsPg(spool: PgSpool, f: DeadFilter): Promise<number[]> {
  const { where, params } = deadWhere(f, pgPayloadSql);
  return (await query(spool, replayIdsSql(where), params)).map((r) => num(r.id));
}

/** The delivered batches `replay --delivered` takes, oldest first. */
export async function deliveredBatchIdsPg(spool: PgSpool, f: Omit<DeadFilter, "reason">): Promise<number[]> {
  const { where, params } = deliveredWhere(f, pgPayloadSql);
  return (await query(spool, replayIdsSql(where), params)).map((r) => num(r.id));
}

/** The requests a quarantine batch holds, oldest first. */
export async function quarantinedRequestsPg(spool: PgSpool, batchId: number): Promise<StoredRequest[]> {
  const rows =
    (await spool.sql`SELECT id, source, received_at, raw, headers, url FROM events WHERE batch_id = ${batchId}::bigint
      ORDER BY id`) as Record<string, unknown>[];
  return rows.map((r) => ({
    eventId: num(r.id),
    source: String(r.source),
    receivedAt: Number(r.received_at),
    raw: r.raw ? new Uint8Array(r.raw as Uint8Array) : new Uint8Array(),
    headers: JSON.parse(String(r.headers)),
    url: (r.url as string | null) ?? null,
  }));
}

/** The highest event id so far (0 for none): the request sent next makes a higher one. */
export async function newestEventIdPg(spool: PgSpool): Promise<number> {
  const [r] = await spool.sql`SELECT MAX(id) AS id FROM events`;
  return numOrNull(r?.id) ?? 0;
}

/** send --follow's reads (follow.ts walks them), looked at every 100 ms. */
export function followReadsPg(spool: PgSpool): FollowReads {
  return {
    pauseMs: 100,
    async firstBatchAfter(source, after) {
      const [e] = await spool.sql`
        SELECT batch_id FROM events WHERE source = ${source} AND id > ${after}::bigint ORDER BY id LIMIT 1`;
      return e ? num(e.batch_id) : null;
    },
    async batchState(id) {
      const [b] = await spool.sql`SELECT state, last_class, dead_reason, result FROM batches WHERE id = ${id}::bigint`;
      return b ? (b as FollowedBatch) : null;
    },
  };
}

/** The ids among `ids` the source has a dedup row for. */
export async function spooledDedupIdsPg(spool: PgSpool, source: string, ids: readonly string[]): Promise<Set<string>> {
  if (ids.length === 0) return new Set();
  const rows =
    (await spool.sql`SELECT dedup_id FROM dedup WHERE source = ${source} AND dedup_id = ANY(${[...ids]}::text[])`) as {
      dedup_id: string;
    }[];
  return new Set(rows.map((r) => r.dedup_id));
}

/**
 * Stored requests since `since` (of one source, or all, whose payloads match --where's conditions), oldest
 * first, at most `limit` event rows read (route test).
 */
export async function storedRequestsPg(spool: PgSpool, o: StoredRequestsQuery): Promise<StoredRequestRow[]> {
  const params: Record<string, string | number | null> = { since: o.since, source: o.source ?? null, limit: o.limit };
  const rows = await query(spool, storedRequestsSql(o.where, pgPayloadSql, params), params);
  return groupRequests(
    rows.map((r) => ({
      id: num(r.id),
      source: String(r.source),
      event_type: String(r.event_type),
      received_at: Number(r.received_at),
      payload: String(r.payload),
      raw: r.raw ? new Uint8Array(r.raw as Uint8Array) : null,
      raw_is_payload: Number(r.raw_is_payload),
      headers: String(r.headers),
      dedup_id: (r.dedup_id as string | null) ?? null,
      route: String(r.route),
      destination: String(r.destination),
      quiet_s: Number(r.quiet_s),
      max_s: Number(r.max_s),
      max_events: Number(r.max_events),
      max_bytes: num(r.max_bytes),
    })),
  );
}
