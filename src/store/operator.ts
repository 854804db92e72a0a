// Operator transitions (spec 4.1, 16): replay, retry, split, exclude, drop. Automatic code never
// calls drop, split or exclude.
import type { Database } from "bun:sqlite";
import { HookspoolError } from "../errors.ts";
import { batchContentTx, computeContentHashTx, contentHash } from "./content.ts";
import type { Spool } from "./db.ts";
import { enqueueTx, type EnqueueResult, type NewEvent, resolveQuarantineIssuesTx } from "./enqueue.ts";
import { resolveDeadIssuesTx } from "./issues.ts";
import { replayDeadTx } from "./transitions.ts";
import { prepared } from "./db.ts";

interface BatchHead {
  id: number;
  state: string;
  destination: string;
  source: string;
}

function head(db: Database, id: number): BatchHead {
  const b = prepared<BatchHead, [number]>(db, "SELECT id, state, destination, source FROM batches WHERE id = ?").get(id);
  if (!b) throw new HookspoolError("E_NOT_FOUND", `no batch ${id}`);
  return b;
}

function wrongState(b: BatchHead, verb: string, allowed: string): HookspoolError {
  return new HookspoolError("E_NOTHING", `batch ${b.id} is ${b.state}; ${verb} applies to ${allowed} batches`);
}

/** A quarantined request as stored, for the plugin to classify again. */
export interface StoredRequest {
  eventId: number;
  source: string;
  receivedAt: number;
  raw: Uint8Array;
  headers: Record<string, string>;
  /** Path and query as received (secret-bearing parameters removed); null before schema 4. */
  url: string | null;
}

/**
 * Classify a stored request again through the (fixed) plugin: the event it becomes, or null
 * when the plugin now ignores it or answers it as a handshake (nothing to queue). Throws when
 * it still cannot be classified.
 */
export type Reclassify = (req: StoredRequest) => NewEvent | null;

export type ReplayResult =
  | { batchId: number; kind: "replayed" }
  | { batchId: number; kind: "reclassified"; results: EnqueueResult[]; ignored: number };

const QUARANTINED = "SELECT id, source, received_at, raw, headers, url FROM events WHERE batch_id = ? ORDER BY id";
const RECLASSIFIED = `UPDATE batches SET state = 'delivered', delivered_at = $now, result = 'reclassified'
  WHERE id = $id AND state = 'dead' AND destination = 'quarantine'`;

type QuarantinedRow = { id: number; source: string; received_at: number; raw: Uint8Array | null; headers: string; url: string | null };

function storedRequest(r: QuarantinedRow): StoredRequest {
  return { eventId: r.id, source: r.source, receivedAt: r.received_at, raw: r.raw ?? new Uint8Array(), headers: JSON.parse(r.headers), url: r.url };
}

/** The requests a quarantine batch holds, oldest first (a replay classifies them before it writes). */
export function quarantinedRequests(spool: Spool, batchId: number): StoredRequest[] {
  const db = spool.db;
  return prepared<QuarantinedRow, [number]>(db, QUARANTINED).all(batchId).map(storedRequest);
}

/**
 * Replay a dead batch: -> retry, due now, attempts = 0. A quarantine batch is classified
 * again instead: each stored request becomes a normal event (with its copies), and the
 * quarantine batch is marked delivered with result 'reclassified' (spec 9).
 */
export function replayBatch(spool: Spool, id: number, now: number, reclassify?: Reclassify): ReplayResult {
  const db = spool.db;
  return db
    .transaction((): ReplayResult => {
      const b = head(db, id);
      if (b.state !== "dead") throw wrongState(b, "replay", "dead");
      if (b.destination !== "quarantine") {
        replayDeadTx(db, id, now);
        resolveDeadIssuesTx(db, b.destination, now);
        return { batchId: id, kind: "replayed" };
      }
      if (!reclassify) throw new HookspoolError("E_CONFIG", `batch ${id} is a quarantine batch; replaying it needs the source plugin`);
      const results: EnqueueResult[] = [];
      let ignored = 0;
      for (const r of prepared<QuarantinedRow, [number]>(db, QUARANTINED).all(id)) {
        const event = reclassify(storedRequest(r));
        if (event === null) ignored++;
        else results.push(enqueueTx(db, event, now));
      }
      prepared(db, RECLASSIFIED).run({ id, now });
      resolveQuarantineIssuesTx(db, b.source, now);
      return { batchId: id, kind: "reclassified", results, ignored };
    })
    .immediate();
}

export interface DeadFilter {
  destination?: string;
  source?: string;
  /** Only batches whose last event arrived at or after this time. */
  since?: number;
}

/** The dead batches `replay --dead` would take, oldest first. Quarantine only when asked for by destination. */
export function deadBatchIds(spool: Spool, f: DeadFilter): number[] {
  const db = spool.db;
  const where = ["state = 'dead'"];
  const params: Record<string, string | number> = {};
  if (f.destination !== undefined) {
    where.push("destination = $destination");
    params.destination = f.destination;
  } else {
    where.push("destination <> 'quarantine'");
  }
  if (f.source !== undefined) {
    where.push("source = $source");
    params.source = f.source;
  }
  if (f.since !== undefined) {
    where.push("last_at >= $since");
    params.since = f.since;
  }
  return prepared<{ id: number }, Record<string, string | number>>(db, `SELECT id FROM batches WHERE ${where.join(" AND ")} ORDER BY first_at, id`)
    .all(params)
    .map((r) => r.id);
}

/** retry -> due now, skipping the backoff. */
export function retryNow(spool: Spool, id: number, now: number): void {
  spool.db
    .transaction(() => {
      const b = head(spool.db, id);
      if (b.state !== "retry") throw wrongState(b, "retry", "retry");
      prepared(spool.db, "UPDATE batches SET next_attempt_at = $now WHERE id = $id AND state = 'retry'").run({ id, now });
    })
    .immediate();
}

const DROP = `UPDATE batches SET state = 'dropped', delivered_at = $now, result = $result, last_error = $why,
    next_attempt_at = NULL, not_before = NULL
  WHERE id = $id AND state IN ('open', 'sealed', 'retry', 'dead')`;

function dropTx(db: Database, b: BatchHead, now: number, result: string, why: string): void {
  if (prepared(db, DROP).run({ id: b.id, now, result, why }).changes !== 1) throw wrongState(b, "drop", "open, sealed, retry or dead");
}

/**
 * -> dropped, for each batch (all or none). delivered_at records when the batch left the
 * queue, which is what dropped-batch retention counts from. Never automatic (spec 4.1).
 */
export function dropBatches(spool: Spool, ids: number[], now: number): void {
  const db = spool.db;
  db.transaction(() => {
    const sources = new Set<string>();
    const destinations = new Set<string>();
    for (const id of ids) {
      const b = head(db, id);
      dropTx(db, b, now, "dropped", "dropped by operator");
      if (b.destination === "quarantine") sources.add(b.source);
      else destinations.add(b.destination);
    }
    for (const d of destinations) resolveDeadIssuesTx(db, d, now);
    for (const s of sources) resolveQuarantineIssuesTx(db, s, now);
  }).immediate();
}

export interface SplitOptions {
  maxEvents?: number;
  maxBytes?: number;
  /** The first event of the second piece. */
  at?: number;
}

interface SplitEvent {
  id: number;
  size: number;
  received_at: number;
}

function pieces(events: SplitEvent[], o: SplitOptions): SplitEvent[][] {
  if (o.at !== undefined) {
    const i = events.findIndex((e) => e.id === o.at);
    if (i < 0) throw new HookspoolError("E_NOT_FOUND", `event ${o.at} is not in this batch`);
    return [events.slice(0, i), events.slice(i)].filter((p) => p.length > 0);
  }
  const out: SplitEvent[][] = [];
  let cur: SplitEvent[] = [];
  let bytes = 0;
  for (const e of events) {
    const full = o.maxEvents !== undefined ? cur.length >= o.maxEvents : cur.length > 0 && bytes + e.size > (o.maxBytes as number);
    if (full) {
      out.push(cur);
      cur = [];
      bytes = 0;
    }
    cur.push(e);
    bytes += e.size;
  }
  if (cur.length > 0) out.push(cur);
  return out;
}

const PIECE = `INSERT INTO batches (route, source, destination, key, state, first_at, last_at, quiet_s, max_s, max_events,
    max_bytes, not_before, count, bytes, sealed_at, content_hash)
  SELECT route, source, destination, key, 'sealed', $first, $last, quiet_s, max_s, max_events, max_bytes, $now, $count, $bytes, $now, $hash
  FROM batches WHERE id = $id`;

/**
 * Cut a sealed, retry or dead batch into consecutive pieces in the same group, due now; the
 * original becomes dropped with result 'split' and names its pieces. The pieces are created
 * sealed, not open: the join rule needs at most one open batch per group (spec 4.1), and an
 * operator's piece must not take in new events. Returns the new batch ids, in order.
 */
export function splitBatch(spool: Spool, id: number, o: SplitOptions, now: number): number[] {
  const given = [o.maxEvents, o.maxBytes, o.at].filter((x) => x !== undefined).length;
  if (given !== 1) throw new HookspoolError("E_USAGE", "split needs exactly one of --max-events, --max-bytes, --at");
  if ((o.maxEvents !== undefined && o.maxEvents < 1) || (o.maxBytes !== undefined && o.maxBytes < 1)) {
    throw new HookspoolError("E_USAGE", "--max-events and --max-bytes must be at least 1");
  }
  const db = spool.db;
  return db
    .transaction(() => {
      const b = head(db, id);
      if (!["sealed", "retry", "dead"].includes(b.state)) throw wrongState(b, "split", "sealed, retry or dead");
      if (b.destination === "quarantine") throw new HookspoolError("E_NOTHING", `batch ${id} is a quarantine batch; replay or drop it`);
      const events = prepared<SplitEvent, [number]>(db, "SELECT id, size, received_at FROM events WHERE batch_id = ? ORDER BY id").all(id);
      const parts = pieces(events, o);
      if (parts.length < 2) throw new HookspoolError("E_NOTHING", `batch ${id} already fits; nothing to split`);
      // The hash covers ids, types, times, dedup ids and payloads, never batch_id, so it can be
      // computed from the original's content before the events move.
      const content = batchContentTx(db, id);
      const ids: number[] = [];
      for (const part of parts) {
        const members = new Set(part.map((e) => e.id));
        const newId = Number(
          prepared(db, PIECE).run({
            id,
            now,
            first: Math.min(...part.map((e) => e.received_at)),
            last: Math.max(...part.map((e) => e.received_at)),
            count: part.length,
            bytes: part.reduce((s, e) => s + e.size, 0),
            hash: contentHash(content.filter((e) => members.has(e.id))),
          }).lastInsertRowid,
        );
        const move = prepared(db, "UPDATE events SET batch_id = ? WHERE id = ?");
        for (const e of part) move.run(newId, e.id);
        ids.push(newId);
      }
      dropTx(db, b, now, "split", `split into ${ids.map((x) => `#${x}`).join(", ")} by operator`);
      return ids;
    })
    .immediate();
}

/**
 * Exclude events from a batch that has not been delivered: they stay stored and listed, are
 * left out of the document, and content_hash is recomputed (spec 3, 16).
 */
export function excludeEvents(spool: Spool, batchId: number, eventIds: number[], now: number): void {
  const db = spool.db;
  db.transaction(() => {
    const b = head(db, batchId);
    if (!["open", "sealed", "retry", "dead"].includes(b.state)) throw wrongState(b, "exclude", "open, sealed, retry or dead");
    if (b.destination === "quarantine") throw new HookspoolError("E_NOTHING", `batch ${batchId} is a quarantine batch; replay or drop it`);
    for (const eid of eventIds) {
      const e = prepared<{ batch_id: number }, [number]>(db, "SELECT batch_id FROM events WHERE id = ?").get(eid);
      if (!e || e.batch_id !== batchId) throw new HookspoolError("E_NOT_FOUND", `event ${eid} is not in batch ${batchId}`);
      prepared(db, "UPDATE events SET excluded_at = ? WHERE id = ? AND excluded_at IS NULL").run(now, eid);
    }
    const left = prepared<{ n: number }, [number]>(db, "SELECT COUNT(*) AS n FROM events WHERE batch_id = ? AND excluded_at IS NULL").get(batchId)?.n ?? 0;
    if (left === 0) throw new HookspoolError("E_NOTHING", `that would exclude every event of batch ${batchId}`, { hint: `drop it instead: hookspool drop ${batchId} --yes` });
    if (b.state !== "open") prepared(db, "UPDATE batches SET content_hash = ? WHERE id = ?").run(computeContentHashTx(db, batchId), batchId);
  }).immediate();
}
