// drop: an operator discards a batch on purpose, and the audit trail says so (never automatic).
import type { Database } from "bun:sqlite";
import { type BatchHead, notApplicable, requireBatchTx } from "./batches.ts";
import { journalTx } from "./journal.ts";
import { prepared, type Spool } from "./db.ts";
import { resolveQuarantineIssuesTx } from "./enqueue.ts";
import { resolveDeadIssuesTx } from "./issues.ts";

const DROP = `UPDATE batches SET state = 'dropped', delivered_at = $now, result = $result, last_error = $why, dead_reason = NULL,
    next_attempt_at = NULL, not_before = NULL
  WHERE id = $id AND state IN ('open', 'sealed', 'retry', 'awaiting', 'dead')`;

/** -> dropped inside the caller's transaction; `result` says why ("dropped", "split"). */
export function dropBatchTx(db: Database, b: BatchHead, now: number, result: string, why: string): void {
  if (prepared(db, DROP).run({ id: b.id, now, result, why }).changes !== 1) throw notApplicable(b, "drop", "open, sealed, retry, awaiting or dead");
  journalTx(db, "dropped", b.id, now, { detail: { result } });
}

/**
 * -> dropped, for each batch (all or none). delivered_at records when the batch left the
 * queue, which is what dropped-batch retention counts from. Never automatic.
 */
export function dropBatches(spool: Spool, ids: number[], now: number): void {
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

