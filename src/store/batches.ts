// A batch: its row and the reads of it (events, payloads, attempts), and the seal and replay
// transitions other store operations share. The dispatcher's side before an attempt ends
// (readiness, candidates, claims, lease recovery) is queue.ts; how an attempt ends is marks.ts
// and outcome.ts; the operator's verbs are replay.ts, split.ts and drop.ts.
import type { Database } from "bun:sqlite";
import { HookspoolError } from "../errors.ts";
import { computeContentHashTx } from "./content.ts";
import { prepared, type Spool } from "./db.ts";
import { journalTx } from "./journal.ts";

export const BATCH_STATES = ["open", "sealed", "leased", "retry", "awaiting", "delivered", "dead", "dropped"] as const;
export type BatchState = (typeof BATCH_STATES)[number];
/** The class of a batch's last outcome (last_class), as the schema's CHECK lists them. */
export const LAST_CLASSES = ["transport", "throttle", "batch", "config", "permanent", "poison", "quarantine", "agent"] as const;

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
  /** Why a dead batch died (rejected, exhausted, poison, ...); null unless dead. */
  dead_reason: string | null;
}

export interface BatchFilter {
  state?: BatchState;
  source?: string;
  destination?: string;
  /** Only dead batches that died for this reason. */
  reason?: string;
  key?: string;
  /** Only batches whose last attempt ended with this HTTP status or exit code. */
  status?: number;
  /** Only batches whose last event arrived in [since, until]. */
  since?: number;
  until?: number;
}

export interface ListFilter extends BatchFilter {
  /** A page's cursor: only batches with a smaller id (the list is newest first). */
  before?: number;
  limit?: number;
}

/** The WHERE terms and parameters of a filter, for list and export alike. */
export function batchWhere(f: BatchFilter): { where: string[]; params: Record<string, string | number> } {
  const where: string[] = [];
  const params: Record<string, string | number> = {};
  const eq = (column: string, name: string, value: string | number | undefined) => {
    if (value === undefined) return;
    where.push(`${column} = $${name}`);
    params[name] = value;
  };
  eq("state", "state", f.state);
  eq("source", "source", f.source);
  eq("destination", "destination", f.destination);
  eq("key", "key", f.key);
  if (f.reason !== undefined) {
    where.push("state = 'dead' AND dead_reason = $reason");
    params.reason = f.reason;
  }
  if (f.status !== undefined) {
    where.push("(SELECT a.status FROM attempts a WHERE a.batch_id = batches.id ORDER BY a.id DESC LIMIT 1) = $status");
    params.status = f.status;
  }
  if (f.since !== undefined) {
    where.push("last_at >= $since");
    params.since = f.since;
  }
  if (f.until !== undefined) {
    where.push("last_at <= $until");
    params.until = f.until;
  }
  return { where, params };
}

/** Batches, newest first. */
export function listBatches(spool: Spool, f: ListFilter = {}): BatchRow[] {
  const db = spool.db;
  const { where, params } = batchWhere(f);
  params.limit = f.limit ?? 50;
  if (f.before !== undefined) {
    where.push("id < $before");
    params.before = f.before;
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
  /** Why the event's copy went here (the routing trace), or null for an event stored before traces. */
  trace: Record<string, unknown> | null;
}

/** A stored trace as an object (null when absent or unreadable). */
export function parseTrace(text: string | null): Record<string, unknown> | null {
  if (!text) return null;
  try {
    const v = JSON.parse(text);
    return v && typeof v === "object" && !Array.isArray(v) ? v : null;
  } catch {
    return null;
  }
}

/** A batch's events without payloads: ids, types, sizes, dedup ids, exclusion and routing trace. */
export function batchEvents(spool: Spool, batchId: number): EventListing[] {
  const db = spool.db;
  return prepared<Omit<EventListing, "trace"> & { trace: string | null }, [number]>(db, "SELECT id, event_type, received_at, dedup_id, size, excluded_at, route, trace FROM events WHERE batch_id = ? ORDER BY id")
    .all(batchId)
    .map((e) => ({ ...e, trace: parseTrace(e.trace) }));
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

const SEAL = `UPDATE batches SET state = 'sealed', sealed_at = $now, content_hash = $hash
  WHERE id = $id AND state = 'open'`;

/** Seal an open batch: its content freezes and content_hash is set. */
export function sealBatchTx(db: Database, batchId: number, now: number): boolean {
  const hash = computeContentHashTx(db, batchId);
  const sealed = prepared(db, SEAL).run({ id: batchId, now, hash }).changes === 1;
  if (sealed) journalTx(db, "sealed", batchId, now);
  return sealed;
}

const REPLAY = `UPDATE batches SET state = 'retry', attempts = 0, next_attempt_at = $now, not_before = $now, dead_reason = NULL
  WHERE id = $id AND state = 'dead' AND destination <> 'quarantine'`;

/**
 * dead -> retry, due now, attempts = 0. The content stays frozen; the batch re-enters its
 * group's queue by first_at, so it delivers out of order.
 */
export function replayDeadTx(db: Database, batchId: number, now: number): boolean {
  const replayed = prepared(db, REPLAY).run({ id: batchId, now }).changes === 1;
  if (replayed) journalTx(db, "retry", batchId, now, { detail: { replayed: true } });
  return replayed;
}

/** The little of a batch an operator verb checks before it acts. */
export interface BatchHead {
  id: number;
  state: string;
  destination: string;
  source: string;
}

/** The batch an operator named, or E_NOT_FOUND. */
export function requireBatchTx(db: Database, id: number): BatchHead {
  const b = prepared<BatchHead, [number]>(db, "SELECT id, state, destination, source FROM batches WHERE id = ?").get(id);
  if (!b) throw new HookspoolError("E_NOT_FOUND", `no batch ${id}`);
  return b;
}

/** The verb that does apply to a batch in this state, where one of its neighbours was asked for. */
const INSTEAD: Record<string, Record<string, (id: number) => string>> = {
  replay: { delivered: (id) => `hookspool replay --delivered ${id} resends it under a new delivery id`, retry: (id) => `hookspool retry ${id} makes it due now` },
  "replay --delivered": { dead: (id) => `hookspool replay ${id} puts it back into retry` },
  retry: { dead: (id) => `hookspool replay ${id} puts it back into retry`, delivered: (id) => `hookspool replay --delivered ${id} resends it under a new delivery id` },
};

/** A verb that does not apply to the batch's state: nothing to do (exit 1), and what would. */
export function notApplicable(b: BatchHead, verb: string, allowed: string): HookspoolError {
  const instead = b.destination === "quarantine" ? undefined : INSTEAD[verb]?.[b.state];
  return new HookspoolError("E_NOTHING", `batch ${b.id} is ${b.state}; ${verb} applies to ${allowed} batches`, instead ? { hint: instead(b.id) } : {});
}
