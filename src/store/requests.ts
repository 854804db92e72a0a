// What `hookspool route test` reads: the requests stored events came from, each with the copies
// it became (route, destination, the batch's window). Copies of one request share its source,
// arrival time and payload; each copy is its own events row. Reads only, narrowed by --where.
import { storedRaw } from "./enqueue.ts";
import type { PayloadCondition, PayloadSql } from "./where.ts";

export interface StoredCopy {
  eventId: number;
  route: string;
  destination: string;
  window: { quiet_s: number; max_s: number; max_events: number; max_bytes: number };
}

export interface StoredRequestRow {
  source: string;
  eventType: string;
  receivedAt: number;
  payload: string;
  raw: Uint8Array | null;
  headers: Record<string, string>;
  copies: StoredCopy[];
}

export type StoredEventRow = {
  id: number;
  source: string;
  event_type: string;
  received_at: number;
  payload: string;
  raw: Uint8Array | null;
  raw_is_payload: number;
  headers: string;
  dedup_id: string | null;
  route: string;
  destination: string;
  quiet_s: number;
  max_s: number;
  max_events: number;
  max_bytes: number;
};

/**
 * The statement both backends read stored requests with ($since, $source, $limit), and the
 * term of --where's conditions on each event's payload, in the dialect's SQL, when there are any.
 */
export function storedRequestsSql(
  conds: readonly PayloadCondition[] | undefined,
  payload: PayloadSql,
  params: Record<string, string | number | null>,
): string {
  const values: Record<string, string | number> = {};
  const matching = conds?.length ? `AND ${payload.event(conds, "e.payload", values)}` : "";
  Object.assign(params, values);
  return `SELECT e.id, e.source, e.event_type, e.received_at, e.payload, e.raw,
  e.raw_is_payload, e.headers, e.dedup_id,
    b.route, b.destination, b.quiet_s, b.max_s, b.max_events, b.max_bytes
  FROM events e JOIN batches b ON b.id = e.batch_id
  WHERE e.received_at >= $since AND e.source = COALESCE($source, e.source) AND b.destination <> 'quarantine'
    AND e.payload IS NOT NULL ${matching}
  ORDER BY e.id LIMIT $limit`;
}

/** What route test reads: since when, whose, at most how many event rows, and --where's conditions. */
export interface StoredRequestsQuery {
  since: number;
  source?: string;
  limit: number;
  where?: PayloadCondition[];
}

/** Event rows (one per copy) as the requests they came from, in order. */
export function groupRequests(rows: readonly StoredEventRow[]): StoredRequestRow[] {
  const byRequest = new Map<string, StoredRequestRow>();
  for (const r of rows) {
    // The copies of one request: one source, one arrival, one payload (and dedup id when it has one).
    const id = JSON.stringify([r.source, r.received_at, r.dedup_id ?? r.payload]);
    let req = byRequest.get(id);
    if (!req) {
      req = {
        source: r.source,
        eventType: r.event_type,
        receivedAt: r.received_at,
        payload: r.payload,
        raw: storedRaw(r),
        headers: JSON.parse(r.headers) as Record<string, string>,
        copies: [],
      };
      byRequest.set(id, req);
    }
    req.copies.push({
      eventId: r.id,
      route: r.route,
      destination: r.destination,
      window: { quiet_s: r.quiet_s, max_s: r.max_s, max_events: r.max_events, max_bytes: r.max_bytes },
    });
  }
  return [...byRequest.values()];
}
