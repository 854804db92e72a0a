// split and exclude: the operator's edits of a batch's content, each recomputing content_hash.
import type { Database } from "bun:sqlite";
import { HookspoolError } from "../errors.ts";
import { notApplicable, requireBatchTx } from "./batches.ts";
import { batchContentTx, computeContentHashTx, type ContentEvent, contentHash, documentShare } from "./content.ts";
import { prepared, type Spool } from "./db.ts";
import { dropBatchTx } from "./drop.ts";

export interface SplitOptions {
  maxEvents?: number;
  maxBytes?: number;
  /** The first event of the second piece. */
  at?: number;
}

export interface SplitEvent {
  id: number;
  size: number;
  received_at: number;
}

/**
 * A batch's events for a split, each sized as the join rule sizes it: its share of the document
 * (payload and event_meta), 0 for an excluded event, which no document carries.
 */
export function splitEvents(rows: readonly { id: number; received_at: number }[], content: readonly ContentEvent[]): SplitEvent[] {
  const share = new Map(content.map((e) => [e.id, documentShare(e)]));
  return rows.map((r) => ({ id: r.id, received_at: r.received_at, size: share.get(r.id) ?? 0 }));
}

/** The consecutive pieces a split cuts (shared with the PostgreSQL store). */
export function pieces(events: SplitEvent[], o: SplitOptions): SplitEvent[][] {
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
 * sealed, not open: the join rule needs at most one open batch per group, and an
 * operator's piece must not take in new events. Returns the new batch ids, in order.
 */
/** A split's options, checked before anything is read (shared with the PostgreSQL store). */
export function checkSplitOptions(o: SplitOptions): void {
  const given = [o.maxEvents, o.maxBytes, o.at].filter((x) => x !== undefined).length;
  if (given !== 1) throw new HookspoolError("E_USAGE", "split needs exactly one of --max-events, --max-bytes, --at");
  if ((o.maxEvents !== undefined && o.maxEvents < 1) || (o.maxBytes !== undefined && o.maxBytes < 1)) {
    throw new HookspoolError("E_USAGE", "--max-events and --max-bytes must be at least 1");
  }
}

export function splitBatch(spool: Spool, id: number, o: SplitOptions, now: number): number[] {
  checkSplitOptions(o);
  const db = spool.db;
  return db
    .transaction(() => {
      const b = requireBatchTx(db, id);
      if (!["sealed", "retry", "dead"].includes(b.state)) throw notApplicable(b, "split", "sealed, retry or dead");
      if (b.destination === "quarantine") throw new HookspoolError("E_NOTHING", `batch ${id} is a quarantine batch; replay or drop it`);
      // The hash covers ids, types, times, dedup ids and payloads, never batch_id, so it can be
      // computed from the original's content before the events move.
      const content = batchContentTx(db, id);
      const events = splitEvents(prepared<{ id: number; received_at: number }, [number]>(db, "SELECT id, received_at FROM events WHERE batch_id = ? ORDER BY id").all(id), content);
      const parts = pieces(events, o);
      if (parts.length < 2) throw new HookspoolError("E_NOTHING", `batch ${id} already fits; nothing to split`);
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
      dropBatchTx(db, b, now, "split", `split into ${ids.map((x) => `#${x}`).join(", ")} by operator`);
      return ids;
    })
    .immediate();
}

/**
 * Exclude events from a batch that has not been delivered: they stay stored and listed, are
 * left out of the document, and content_hash is recomputed.
 */
export function excludeEvents(spool: Spool, batchId: number, eventIds: number[], now: number): void {
  const db = spool.db;
  db.transaction(() => {
    const b = requireBatchTx(db, batchId);
    if (!["open", "sealed", "retry", "dead"].includes(b.state)) throw notApplicable(b, "exclude", "open, sealed, retry or dead");
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
