// A batch as both backends keep it: its states and last classes, its row, the filters of
// `list` (with their WHERE clause, shared SQL, and the dialect's for --where), an event's
// listing and payload, an attempt's row, and the answer a verb gives when a batch is not in a
// state it applies to. Each dialect's reads are in sqlite/reads.ts and pg/reads.ts.
import { HookspoolError } from "../errors.ts";
import type { PayloadCondition, PayloadSql } from "./where.ts";

export const BATCH_STATES = ["open", "sealed", "leased", "retry", "awaiting", "delivered", "dead", "dropped"] as const;

export type BatchState = (typeof BATCH_STATES)[number];

/** The class of a batch's last outcome (last_class), as the schema's CHECK lists them. */
export const LAST_CLASSES = [
  "transport",
  "throttle",
  "batch",
  "config",
  "permanent",
  "poison",
  "quarantine",
  "agent",
] as const;

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
  /**
   * The last version its (route, key) had delivered when it was first leased (null: none), and
   * when that was (null: not leased yet); store/stale-plan.ts judges its events by them.
   */
  stale_floor: number | null;
  floor_at: number | null;
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
  /** Only batches with an event whose payload matches every one of these (store/where.ts). */
  where?: PayloadCondition[];
}

export interface ListFilter extends BatchFilter {
  /** A page's cursor: only batches with a smaller id (the list is newest first). */
  before?: number;
  limit?: number;
}

/**
 * The WHERE terms and parameters of a filter, for list and export alike; `payload` is the
 * dialect's SQL for --where (a filter with conditions and no dialect to read them is a bug).
 */
export function batchWhere(
  f: BatchFilter,
  payload?: PayloadSql,
): { where: string[]; params: Record<string, string | number> } {
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
  payloadWhere(where, params, f.where, payload);
  return { where, params };
}

/**
 * list's statement over a filter, newest first with its --before cursor and limit, in the
 * dialect's SQL for --where: both backends read with it, and the plans tests explain it.
 */
export function listStatement(
  f: ListFilter,
  payload: PayloadSql,
): { sql: string; params: Record<string, string | number> } {
  const { where, params } = batchWhere(f, payload);
  params.limit = f.limit ?? 50;
  if (f.before !== undefined) {
    where.push("id < $before");
    params.before = f.before;
  }
  const terms = where.length ? `WHERE ${where.join(" AND ")}` : "";
  return { sql: `SELECT * FROM batches ${terms} ORDER BY id DESC LIMIT $limit`, params };
}

/** Push the term of --where's conditions, when there are any, in the dialect's SQL. */
export function payloadWhere(
  where: string[],
  params: Record<string, string | number>,
  conds: readonly PayloadCondition[] | undefined,
  payload: PayloadSql | undefined,
): void {
  if (!conds?.length) return;
  if (!payload) throw new Error("a --where filter reached a read without the dialect's payload SQL");
  where.push(payload.batches(conds, params));
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
  /** Its version by the provider's clock (store/stale-plan.ts), or null. */
  version: number | null;
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

export interface EventPayload {
  id: number;
  payload: string | null;
  raw: Uint8Array | null;
  headers: string;
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
  /** The requests a paced destination's window counts for this attempt (null: not paced). */
  hits: number | null;
  /** What the receiver answered, as the destination read it (a Hermes gateway's word). */
  answer: string | null;
  /** 1 when the receiver's answer did not confirm the delivery (a duplicate it did not confirm). */
  unconfirmed: number;
}

/** The little of a batch an operator verb checks before it acts. */
export interface BatchHead {
  id: number;
  state: string;
  destination: string;
  source: string;
}

/** The verb that does apply to a batch in this state, where one of its neighbours was asked for. */
const INSTEAD: Record<string, Record<string, (id: number) => string>> = {
  replay: {
    delivered: (id) => `hookspool replay --delivered ${id} resends it under a new delivery id`,
    retry: (id) => `hookspool retry ${id} makes it due now`,
  },
  "replay --delivered": { dead: (id) => `hookspool replay ${id} puts it back into retry` },
  retry: {
    dead: (id) => `hookspool replay ${id} puts it back into retry`,
    delivered: (id) => `hookspool replay --delivered ${id} resends it under a new delivery id`,
  },
};

/** A verb that does not apply to the batch's state: nothing to do (exit 1), and what would. */
export function notApplicable(b: BatchHead, verb: string, allowed: string): HookspoolError {
  const instead = b.destination === "quarantine" ? undefined : INSTEAD[verb]?.[b.state];
  return new HookspoolError(
    "E_NOTHING",
    `batch ${b.id} is ${b.state}; ${verb} applies to ${allowed} batches`,
    instead ? { hint: instead(b.id) } : {},
  );
}
