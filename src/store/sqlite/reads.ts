// The operator's reads on SQLite: batches listed and shown (events, payloads, attempts), dead
// and delivered batch ids for replay and resend, a quarantine batch's stored requests, the
// requests `route test` replays, which delivery ids a source has already spooled (a sweep must
// not ask a sender to redeliver what arrived), and `send --follow`: the event a request became
// and its batch's state as it changes, looked at again only when the database changed (PRAGMA
// data_version), every 50 ms at most. Each is one statement: in WAL mode it never waits.
import { prepared, type SqliteSpool } from "./db.ts";
import { storedRaw } from "../enqueue.ts";
import {
  listStatement,
  type ListFilter,
  type EventListing,
  type EventPayload,
  type AttemptRow,
  type BatchRow,
  parseTrace,
} from "../batches.ts";
import {
  type StoredRequestRow,
  groupRequests,
  storedRequestsSql,
  type StoredEventRow,
  type StoredRequestsQuery,
} from "../requests.ts";
import { deadWhere, type DeadFilter, deliveredWhere, replayIdsSql, type StoredRequest } from "../replay.ts";
import type { FollowedBatch, FollowReads } from "../follow.ts";
import { sqlitePayloadSql } from "./where.ts";

/**
 * A read's statement: prepared once and kept when its text is fixed; one with --where's
 * conditions (their paths are in its text, so there are as many as operators type) is
 * prepared for this read alone and finalized after it.
 */
function readAll<R>(spool: SqliteSpool, sql: string, params: Record<string, string | number | null>, once: boolean) {
  if (!once) return prepared<R, Record<string, string | number | null>>(spool.db, sql).all(params);
  const st = spool.db.prepare<R, Record<string, string | number | null>>(sql);
  try {
    return st.all(params);
  } finally {
    st.finalize();
  }
}

/** Batches, newest first. */
export function listBatches(spool: SqliteSpool, f: ListFilter = {}): BatchRow[] {
  const { sql, params } = listStatement(f, sqlitePayloadSql);
  return readAll<BatchRow>(spool, sql, params, Boolean(f.where?.length));
}

export function getBatch(spool: SqliteSpool, id: number): BatchRow | null {
  const db = spool.db;
  return prepared<BatchRow, [number]>(db, "SELECT * FROM batches WHERE id = ?").get(id);
}

/** A batch's events without payloads: ids, types, sizes, dedup ids, exclusion and routing trace. */
export function batchEvents(spool: SqliteSpool, batchId: number): EventListing[] {
  const db = spool.db;
  return prepared<Omit<EventListing, "trace"> & { trace: string | null }, [number]>(
    db,
    "SELECT id, event_type, received_at, dedup_id, size, excluded_at, route, trace, version FROM events " +
      "WHERE batch_id = ? ORDER BY id",
  )
    .all(batchId)
    .map((e) => ({ ...e, trace: parseTrace(e.trace) }));
}

/** Payloads, only for `show --payload`. */
export function batchPayloads(spool: SqliteSpool, batchId: number): EventPayload[] {
  const db = spool.db;
  return prepared<EventPayload & { raw_is_payload: number }, [number]>(
    db,
    "SELECT id, payload, raw, raw_is_payload, headers FROM events WHERE batch_id = ? ORDER BY id",
  )
    .all(batchId)
    .map(({ raw_is_payload, ...r }) => ({ ...r, raw: storedRaw({ ...r, raw_is_payload }) }));
}

export function batchAttempts(spool: SqliteSpool, batchId: number): AttemptRow[] {
  const db = spool.db;
  return prepared<AttemptRow, [number]>(db, "SELECT * FROM attempts WHERE batch_id = ? ORDER BY id").all(batchId);
}

export const QUARANTINED =
  "SELECT id, source, received_at, raw, headers, url FROM events WHERE batch_id = ? ORDER BY id";

export type QuarantinedRow = {
  id: number;
  source: string;
  received_at: number;
  raw: Uint8Array | null;
  headers: string;
  url: string | null;
};

export function storedRequest(r: QuarantinedRow): StoredRequest {
  return {
    eventId: r.id,
    source: r.source,
    receivedAt: r.received_at,
    raw: r.raw ?? new Uint8Array(),
    headers: JSON.parse(r.headers),
    url: r.url,
  };
}

/** The requests a quarantine batch holds, oldest first (a replay classifies them before it writes). */
export function quarantinedRequests(spool: SqliteSpool, batchId: number): StoredRequest[] {
  const db = spool.db;
  return prepared<QuarantinedRow, [number]>(db, QUARANTINED).all(batchId).map(storedRequest);
}

/** The dead batches `replay --dead` would take, oldest first. */
export function deadBatchIds(spool: SqliteSpool, f: DeadFilter): number[] {
  return replayIds(spool, deadWhere(f, sqlitePayloadSql), Boolean(f.where?.length));
}

/** The delivered batches `replay --delivered` would take, oldest first. */
export function deliveredBatchIds(spool: SqliteSpool, f: Omit<DeadFilter, "reason">): number[] {
  return replayIds(spool, deliveredWhere(f, sqlitePayloadSql), Boolean(f.where?.length));
}

function replayIds(
  spool: SqliteSpool,
  w: { where: string[]; params: Record<string, string | number> },
  once: boolean,
): number[] {
  return readAll<{ id: number }>(spool, replayIdsSql(w.where), w.params, once).map((r) => r.id);
}

/**
 * Stored requests since `since` (of one source, or all, whose payloads match --where's
 * conditions), oldest first, at most `limit` event rows read.
 */
export function storedRequests(spool: SqliteSpool, o: StoredRequestsQuery): StoredRequestRow[] {
  const params: Record<string, string | number | null> = { since: o.since, source: o.source ?? null, limit: o.limit };
  const sql = storedRequestsSql(o.where, sqlitePayloadSql, params);
  return groupRequests(readAll<StoredEventRow>(spool, sql, params, Boolean(o.where?.length)));
}

/** The ids among `ids` the source has a dedup row for (spooled within its dedup window). */
export function spooledDedupIds(spool: SqliteSpool, source: string, ids: readonly string[]): Set<string> {
  const q = prepared<{ dedup_id: string }>(spool.db, "SELECT dedup_id FROM dedup WHERE source = ? AND dedup_id = ?");
  const out = new Set<string>();
  for (const id of ids) if (q.get(source, id)) out.add(id);
  return out;
}

/** The highest event id so far (0 for none): the request sent next makes a higher one. */
export function newestEventId(spool: SqliteSpool): number {
  return prepared<{ id: number | null }, []>(spool.db, "SELECT MAX(id) AS id FROM events").get()?.id ?? 0;
}

const FIRST_AFTER = "SELECT batch_id FROM events WHERE source = ? AND id > ? ORDER BY id LIMIT 1";

const BATCH = "SELECT state, last_class, dead_reason, result FROM batches WHERE id = ?";

/** send --follow's reads (follow.ts walks them), looked at every 50 ms once data_version moved. */
export function followReads(spool: SqliteSpool): FollowReads {
  let version = -1;
  return {
    pauseMs: 50,
    changed() {
      const v = prepared<{ data_version: number }, []>(spool.db, "PRAGMA data_version").get()?.data_version ?? 0;
      if (v === version) return false;
      version = v;
      return true;
    },
    async firstBatchAfter(source, after) {
      return (
        prepared<{ batch_id: number }, [string, number]>(spool.db, FIRST_AFTER).get(source, after)?.batch_id ?? null
      );
    },
    async batchState(id) {
      return prepared<FollowedBatch, [number]>(spool.db, BATCH).get(id);
    },
  };
}
