// drop: an operator discards a batch on purpose, and the audit trail says so (never automatic).
import type { Database } from "bun:sqlite";
import { HookspoolError } from "../../errors.ts";
import { computeContentHashTx, enqueueTx, resolveQuarantineIssuesTx, batchContentTx } from "./enqueue.ts";
import { prepared, type SqliteSpool } from "./db.ts";
import { journalTx } from "./journal.ts";
import { type BatchHead, notApplicable } from "../batches.ts";
import type { EnqueueResult } from "../enqueue.ts";
import { resolveDeadIssuesTx } from "./issues.ts";
import { contentHash } from "../content.ts";
import { type SplitOptions, splitEvents, pieces, checkSplitOptions } from "../split.ts";
import type { ReplayResult, Reclassify } from "../replay.ts";
import { QUARANTINED, type QuarantinedRow, storedRequest } from "./reads.ts";

const REPLAY = `UPDATE batches
  SET state = 'retry', attempts = 0, next_attempt_at = $now, not_before = $now, dead_reason = NULL,
    stale_floor = NULL, floor_at = NULL
  WHERE id = $id AND state = 'dead' AND destination <> 'quarantine'`;

/**
 * dead -> retry, due now, attempts = 0. The content stays frozen; the batch re-enters its
 * group's queue by first_at, so it delivers out of order. Its next lease judges its events'
 * versions again, against what its key delivered meanwhile (store/stale-plan.ts).
 */
export function replayDeadTx(db: Database, batchId: number, now: number): boolean {
  const replayed = prepared(db, REPLAY).run({ id: batchId, now }).changes === 1;
  if (replayed) journalTx(db, "retry", batchId, now, { detail: { replayed: true } });
  return replayed;
}

/** The batch an operator named, or E_NOT_FOUND. */
export function requireBatchTx(db: Database, id: number): BatchHead {
  const b = prepared<BatchHead, [number]>(db, "SELECT id, state, destination, source FROM batches WHERE id = ?").get(
    id,
  );
  if (!b) throw new HookspoolError("E_NOT_FOUND", `no batch ${id}`);
  return b;
}

const RECLASSIFIED = `UPDATE batches
  SET state = 'delivered', delivered_at = $now, result = 'reclassified', dead_reason = NULL
  WHERE id = $id AND state = 'dead' AND destination = 'quarantine'`;

/**
 * Replay a dead batch: -> retry, due now, attempts = 0. A quarantine batch is classified
 * again instead: each stored request becomes a normal event (with its copies), and the
 * quarantine batch is marked delivered with result 'reclassified'.
 */
export function replayBatch(spool: SqliteSpool, id: number, now: number, reclassify?: Reclassify): ReplayResult {
  const db = spool.db;
  return db
    .transaction((): ReplayResult => {
      const b = requireBatchTx(db, id);
      if (b.state !== "dead") throw notApplicable(b, "replay", "dead");
      if (b.destination !== "quarantine") {
        replayDeadTx(db, id, now);
        resolveDeadIssuesTx(db, b.destination, now);
        return { batchId: id, kind: "replayed" };
      }
      if (!reclassify)
        throw new HookspoolError("E_CONFIG", `batch ${id} is a quarantine batch; replaying it needs the source plugin`);
      const results: EnqueueResult[] = [];
      let ignored = 0;
      for (const r of prepared<QuarantinedRow, [number]>(db, QUARANTINED).all(id)) {
        const events = reclassify(storedRequest(r));
        if (events.length === 0) ignored++;
        for (const event of events) results.push(enqueueTx(db, event, now));
      }
      prepared(db, RECLASSIFIED).run({ id, now });
      journalTx(db, "delivered", id, now, { detail: { reclassified: results.length } });
      resolveQuarantineIssuesTx(db, b.source, now);
      return { batchId: id, kind: "reclassified", results, ignored };
    })
    .immediate();
}

const RESEND = `UPDATE batches SET state = 'retry', attempts = 0, next_attempt_at = $now, not_before = $now,
    delivered_at = NULL, result = NULL, last_class = NULL, last_error = NULL
  WHERE id = $id AND state = 'delivered' AND destination <> 'quarantine'`;

/**
 * delivered -> retry, due now: the batch is delivered once more, its content unchanged, under a
 * new delivery id (the first delivery's attempt stays in the audit trail). Throws E_NOTHING
 * for a batch that is not delivered (or a reclassified quarantine batch).
 */
export function resendDelivered(spool: SqliteSpool, id: number, now: number): void {
  spool.db
    .transaction(() => {
      const b = requireBatchTx(spool.db, id);
      if (b.state !== "delivered" || b.destination === "quarantine")
        throw notApplicable(b, "replay --delivered", "delivered");
      prepared(spool.db, RESEND).run({ id, now });
      journalTx(spool.db, "retry", id, now, { detail: { resend: true } });
    })
    .immediate();
}

/** retry -> due now, skipping the backoff. */
export function retryNow(spool: SqliteSpool, id: number, now: number): void {
  spool.db
    .transaction(() => {
      const b = requireBatchTx(spool.db, id);
      if (b.state !== "retry") throw notApplicable(b, "retry", "retry");
      prepared(spool.db, "UPDATE batches SET next_attempt_at = $now WHERE id = $id AND state = 'retry'").run({
        id,
        now,
      });
    })
    .immediate();
}

const PIECE = `INSERT
  INTO batches (route, source, destination, key, state, first_at, last_at, quiet_s, max_s, max_events,
    max_bytes, not_before, count, bytes, sealed_at, content_hash)
  SELECT route, source, destination, key, 'sealed', $first, $last, quiet_s, max_s, max_events, max_bytes, $now, $count,
    $bytes, $now, $hash
  FROM batches WHERE id = $id`;

export function splitBatch(spool: SqliteSpool, id: number, o: SplitOptions, now: number): number[] {
  checkSplitOptions(o);
  const db = spool.db;
  return db
    .transaction(() => {
      const b = requireBatchTx(db, id);
      if (!["sealed", "retry", "dead"].includes(b.state)) throw notApplicable(b, "split", "sealed, retry or dead");
      if (b.destination === "quarantine")
        throw new HookspoolError("E_NOTHING", `batch ${id} is a quarantine batch; replay or drop it`);
      // The hash covers ids, types, times, dedup ids and payloads, never batch_id, so it can be
      // computed from the original's content before the events move.
      const content = batchContentTx(db, id);
      const events = splitEvents(
        prepared<{ id: number; received_at: number }, [number]>(
          db,
          "SELECT id, received_at FROM events WHERE batch_id = ? ORDER BY id",
        ).all(id),
        content,
      );
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
export function excludeEvents(spool: SqliteSpool, batchId: number, eventIds: number[], now: number): void {
  const db = spool.db;
  db.transaction(() => {
    const b = requireBatchTx(db, batchId);
    if (!["open", "sealed", "retry", "dead"].includes(b.state))
      throw notApplicable(b, "exclude", "open, sealed, retry or dead");
    if (b.destination === "quarantine")
      throw new HookspoolError("E_NOTHING", `batch ${batchId} is a quarantine batch; replay or drop it`);
    for (const eid of eventIds) {
      const e = prepared<{ batch_id: number }, [number]>(db, "SELECT batch_id FROM events WHERE id = ?").get(eid);
      if (!e || e.batch_id !== batchId)
        throw new HookspoolError("E_NOT_FOUND", `event ${eid} is not in batch ${batchId}`);
      prepared(db, "UPDATE events SET excluded_at = ? WHERE id = ? AND excluded_at IS NULL").run(now, eid);
    }
    const left =
      prepared<{ n: number }, [number]>(
        db,
        "SELECT COUNT(*) AS n FROM events WHERE batch_id = ? AND excluded_at IS NULL",
      ).get(batchId)?.n ?? 0;
    if (left === 0)
      throw new HookspoolError("E_NOTHING", `that would exclude every event of batch ${batchId}`, {
        hint: `drop it instead: hookspool drop ${batchId} --yes`,
      });
    if (b.state !== "open")
      prepared(db, "UPDATE batches SET content_hash = ? WHERE id = ?").run(computeContentHashTx(db, batchId), batchId);
  }).immediate();
}

const DROP = `UPDATE batches
  SET state = 'dropped', delivered_at = $now, result = $result, last_error = $why, dead_reason = NULL,
    next_attempt_at = NULL, not_before = NULL
  WHERE id = $id AND state IN ('open', 'sealed', 'retry', 'awaiting', 'dead')`;

/** -> dropped inside the caller's transaction; `result` says why ("dropped", "split"). */
export function dropBatchTx(db: Database, b: BatchHead, now: number, result: string, why: string): void {
  if (prepared(db, DROP).run({ id: b.id, now, result, why }).changes !== 1)
    throw notApplicable(b, "drop", "open, sealed, retry, awaiting or dead");
  journalTx(db, "dropped", b.id, now, { detail: { result } });
}

/**
 * -> dropped, for each batch (all or none). delivered_at records when the batch left the
 * queue, which is what dropped-batch retention counts from. Never automatic.
 */
export function dropBatches(spool: SqliteSpool, ids: number[], now: number): void {
  const db = spool.db;
  db.transaction(() => {
    const sources = new Set<string>();
    const destinations = new Set<string>();
    for (const id of ids) {
      const b = requireBatchTx(db, id);
      dropBatchTx(db, b, now, "dropped", "dropped by operator");
      if (b.destination === "quarantine") sources.add(b.source);
      else destinations.add(b.destination);
    }
    for (const d of destinations) resolveDeadIssuesTx(db, d, now);
    for (const s of sources) resolveQuarantineIssuesTx(db, s, now);
  }).immediate();
}
