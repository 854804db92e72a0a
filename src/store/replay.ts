// replay and retry: a dead batch back into its queue (due now, attempts reset), a quarantine
// batch's requests classified again, a batch in retry due now.
import type { Database } from "bun:sqlite";
import { HookspoolError } from "../errors.ts";
import { type BatchHead, batchWhere, notApplicable, replayDeadTx, requireBatchTx } from "./batches.ts";
import { prepared, type Spool } from "./db.ts";
import { enqueueTx, type EnqueueResult, type NewEvent, resolveQuarantineIssuesTx } from "./enqueue.ts";
import { resolveDeadIssuesTx } from "./issues.ts";
import { journalTx } from "./journal.ts";

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
/** What a stored request becomes now: its events, or none when the plugin ignores or answers it. */
export type Reclassify = (req: StoredRequest) => readonly NewEvent[];

export type ReplayResult =
  | { batchId: number; kind: "replayed" }
  | { batchId: number; kind: "reclassified"; results: EnqueueResult[]; ignored: number };

const QUARANTINED = "SELECT id, source, received_at, raw, headers, url FROM events WHERE batch_id = ? ORDER BY id";
const RECLASSIFIED = `UPDATE batches SET state = 'delivered', delivered_at = $now, result = 'reclassified', dead_reason = NULL
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
 * quarantine batch is marked delivered with result 'reclassified'.
 */
export function replayBatch(spool: Spool, id: number, now: number, reclassify?: Reclassify): ReplayResult {
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
      if (!reclassify) throw new HookspoolError("E_CONFIG", `batch ${id} is a quarantine batch; replaying it needs the source plugin`);
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

export interface DeadFilter {
  destination?: string;
  source?: string;
  /** Only batches whose last event arrived at or after this time. */
  since?: number;
  /** Only batches that died for this reason. */
  reason?: string;
}

/** The WHERE terms of `replay --dead`'s selection (both backends): quarantine only when asked for by destination. */
export function deadWhere(f: DeadFilter): { where: string[]; params: Record<string, string | number> } {
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
  if (f.reason !== undefined) {
    where.push("dead_reason = $reason");
    params.reason = f.reason;
  }
  return { where, params };
}

/** The dead batches `replay --dead` would take, oldest first. */
export function deadBatchIds(spool: Spool, f: DeadFilter): number[] {
  const { where, params } = deadWhere(f);
  return prepared<{ id: number }, Record<string, string | number>>(spool.db, `SELECT id FROM batches WHERE ${where.join(" AND ")} ORDER BY first_at, id`)
    .all(params)
    .map((r) => r.id);
}

const RESEND = `UPDATE batches SET state = 'retry', attempts = 0, next_attempt_at = $now, not_before = $now,
    delivered_at = NULL, result = NULL, last_class = NULL, last_error = NULL
  WHERE id = $id AND state = 'delivered' AND destination <> 'quarantine'`;

/**
 * delivered -> retry, due now: the batch is delivered once more, its content unchanged, under a
 * new delivery id (the first delivery's attempt stays in the audit trail). Throws E_NOTHING
 * for a batch that is not delivered (or a reclassified quarantine batch).
 */
export function resendDelivered(spool: Spool, id: number, now: number): void {
  spool.db
    .transaction(() => {
      const b = requireBatchTx(spool.db, id);
      if (b.state !== "delivered" || b.destination === "quarantine") throw notApplicable(b, "replay --delivered", "delivered");
      prepared(spool.db, RESEND).run({ id, now });
      journalTx(spool.db, "retry", id, now, { detail: { resend: true } });
    })
    .immediate();
}

/** The delivered batches `replay --delivered` would take, oldest first. */
export function deliveredBatchIds(spool: Spool, f: Omit<DeadFilter, "reason">): number[] {
  const { where, params } = batchWhere({ state: "delivered", destination: f.destination, source: f.source, since: f.since });
  where.push("destination <> 'quarantine'");
  return prepared<{ id: number }, Record<string, string | number>>(spool.db, `SELECT id FROM batches WHERE ${where.join(" AND ")} ORDER BY first_at, id`)
    .all(params)
    .map((r) => r.id);
}

/** retry -> due now, skipping the backoff. */
export function retryNow(spool: Spool, id: number, now: number): void {
  spool.db
    .transaction(() => {
      const b = requireBatchTx(spool.db, id);
      if (b.state !== "retry") throw notApplicable(b, "retry", "retry");
      prepared(spool.db, "UPDATE batches SET next_attempt_at = $now WHERE id = $id AND state = 'retry'").run({ id, now });
    })
    .immediate();
}

