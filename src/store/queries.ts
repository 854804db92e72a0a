// Read-only queries for the operator CLI and status: batches, events, attempts, counts. No payloads
// unless a caller asks for them by name.
import type { Database } from "bun:sqlite";
import { prepared, type Spool } from "./db.ts";

export type BatchState = "open" | "sealed" | "leased" | "retry" | "delivered" | "dead" | "dropped";
export const BATCH_STATES: readonly BatchState[] = ["open", "sealed", "leased", "retry", "delivered", "dead", "dropped"];

export interface BatchRow {
  id: number;
  route: string;
  source: string;
  destination: string;
  key: string;
  state: BatchState;
  first_at: number;
  last_at: number;
  quiet_s: number;
  max_s: number;
  max_events: number;
  max_bytes: number;
  not_before: number | null;
  count: number;
  bytes: number;
  sealed_at: number | null;
  content_hash: string | null;
  attempts: number;
  next_attempt_at: number | null;
  lease_until: number | null;
  lease_owner: string | null;
  last_error: string | null;
  last_class: string | null;
  delivered_at: number | null;
  result: string | null;
}

export interface ListFilter {
  state?: BatchState;
  source?: string;
  destination?: string;
  limit?: number;
}

/** Batches, newest first. */
export function listBatches(spool: Spool, f: ListFilter = {}): BatchRow[] {
  const db = spool.db;
  const where: string[] = [];
  const params: Record<string, string | number> = { limit: f.limit ?? 50 };
  if (f.state) {
    where.push("state = $state");
    params.state = f.state;
  }
  if (f.source) {
    where.push("source = $source");
    params.source = f.source;
  }
  if (f.destination) {
    where.push("destination = $destination");
    params.destination = f.destination;
  }
  const sql = `SELECT * FROM batches ${where.length ? `WHERE ${where.join(" AND ")}` : ""} ORDER BY id DESC LIMIT $limit`;
  return prepared<BatchRow, Record<string, string | number>>(db, sql).all(params);
}

export function getBatch(spool: Spool, id: number): BatchRow | null {
  const db = spool.db;
  return prepared<BatchRow, [number]>(db, "SELECT * FROM batches WHERE id = ?").get(id);
}

export interface EventListing {
  id: number;
  event_type: string;
  received_at: number;
  dedup_id: string | null;
  size: number;
  excluded_at: number | null;
  route: string;
}

/** A batch's events without payloads: ids, types, sizes, dedup ids and exclusion (spec 16). */
export function batchEvents(spool: Spool, batchId: number): EventListing[] {
  const db = spool.db;
  return prepared<EventListing, [number]>(db, "SELECT id, event_type, received_at, dedup_id, size, excluded_at, route FROM events WHERE batch_id = ? ORDER BY id")
    .all(batchId);
}

export interface EventPayload {
  id: number;
  payload: string | null;
  raw: Uint8Array | null;
  headers: string;
}

/** Payloads, only for `show --payload`. */
export function batchPayloads(spool: Spool, batchId: number): EventPayload[] {
  const db = spool.db;
  return prepared<EventPayload, [number]>(db, "SELECT id, payload, raw, headers FROM events WHERE batch_id = ? ORDER BY id").all(batchId);
}

export interface AttemptRow {
  id: number;
  batch_id: number;
  n: number;
  destination: string;
  started_at: number;
  finished_at: number | null;
  outcome: string | null;
  klass: string | null;
  status: number | null;
  error: string | null;
  duration_ms: number | null;
  probe: number;
  counted: number;
  delivery_id: string | null;
  events_delivered: number | null;
  failed_event_id: number | null;
}

export function batchAttempts(spool: Spool, batchId: number): AttemptRow[] {
  const db = spool.db;
  return prepared<AttemptRow, [number]>(db, "SELECT * FROM attempts WHERE batch_id = ? ORDER BY id").all(batchId);
}

export type StateCounts = Record<BatchState | "quarantined", number>;

/** Batches per state; quarantine batches are counted apart from dead (spec 11.1). */
export function countBatches(spool: Spool): StateCounts {
  const db = spool.db;
  const out = Object.fromEntries([...BATCH_STATES, "quarantined"].map((s) => [s, 0])) as StateCounts;
  const rows = prepared<{ state: BatchState; q: number; n: number }, []>(db, 
      "SELECT state, destination = 'quarantine' AS q, COUNT(*) AS n FROM batches GROUP BY state, destination = 'quarantine'",
    )
    .all();
  for (const r of rows) {
    if (r.q && r.state === "dead") out.quarantined += r.n;
    else out[r.state] += r.n;
  }
  return out;
}

/** The first_at of the oldest batch still to deliver, overall and per destination. */
export function oldestPending(spool: Spool): { overall: number | null; byDestination: Map<string, number> } {
  const db = spool.db;
  const rows = prepared<{ destination: string; first_at: number }, []>(db, 
      "SELECT destination, MIN(first_at) AS first_at FROM batches WHERE state IN ('open', 'sealed', 'leased', 'retry') AND destination <> 'quarantine' GROUP BY destination",
    )
    .all();
  const byDestination = new Map(rows.map((r) => [r.destination, r.first_at]));
  const overall = rows.length ? Math.min(...rows.map((r) => r.first_at)) : null;
  return { overall, byDestination };
}

export interface DestinationRow {
  name: string;
  state: "closed" | "open" | "half_open" | "paused";
  consecutive_failures: number;
  opened_at: number | null;
  cooldown_s: number | null;
  probe_until: number | null;
  last_probe_batch_id: number | null;
  paused_at: number | null;
  paused_by: string | null;
  last_ok_at: number | null;
  last_error: string | null;
  retry_after_until: number | null;
}

export function destinationRows(spool: Spool): DestinationRow[] {
  const db = spool.db;
  return prepared<DestinationRow, []>(db, "SELECT * FROM destinations ORDER BY name").all();
}

/** Destinations that have batches, with or without a runtime row. */
export function destinationNames(spool: Spool): string[] {
  const db = spool.db;
  return prepared<{ d: string }, []>(db, "SELECT DISTINCT destination AS d FROM batches WHERE destination <> 'quarantine' UNION SELECT name FROM destinations ORDER BY 1")
    .all()
    .map((r) => r.d);
}

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

/** The poll schedule (spec 14.4), with the state of each instance's last tick batch. */
export function pollRows(spool: Spool): PollRow[] {
  const db = spool.db;
  return prepared<PollRow, []>(db, "SELECT p.*, b.state AS last_batch_state FROM polls p LEFT JOIN batches b ON b.id = p.last_batch_id ORDER BY p.instance")
    .all();
}

/** Attempts started since `since`, per destination, outcome and class (metrics, spec 11.2). */
export function attemptCounts(spool: Spool, since: number): { destination: string; outcome: string; klass: string; n: number; duration_ms: number }[] {
  const db = spool.db;
  return prepared<{ destination: string; outcome: string; klass: string; n: number; duration_ms: number }, [number]>(db, 
      `SELECT destination, COALESCE(outcome, 'running') AS outcome, COALESCE(klass, '') AS klass, COUNT(*) AS n, COALESCE(SUM(duration_ms), 0) AS duration_ms
       FROM attempts WHERE started_at >= ? GROUP BY 1, 2, 3 ORDER BY 1, 2, 3`,
    )
    .all(since);
}

/** Batches delivered since `since`, per destination. */
export function deliveredCounts(spool: Spool, since: number): { destination: string; n: number }[] {
  const db = spool.db;
  return prepared<{ destination: string; n: number }, [number]>(db, "SELECT destination, COUNT(*) AS n FROM batches WHERE state = 'delivered' AND delivered_at >= ? GROUP BY 1 ORDER BY 1")
    .all(since);
}

/** Leased batches per destination: what is in flight, as any process can see it. */
export function leasedCounts(spool: Spool): Map<string, number> {
  const db = spool.db;
  const rows = prepared<{ destination: string; n: number }, []>(db, "SELECT destination, COUNT(*) AS n FROM batches WHERE state = 'leased' GROUP BY destination").all();
  return new Map(rows.map((r) => [r.destination, r.n]));
}
