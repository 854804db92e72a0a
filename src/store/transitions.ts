// The two batch transitions other store modules share: seal (open -> sealed) and replay (dead -> retry).
import type { Database } from "bun:sqlite";
import { computeContentHashTx } from "./content.ts";
import { prepared } from "./db.ts";

const SEAL = `UPDATE batches SET state = 'sealed', sealed_at = $now, content_hash = $hash
  WHERE id = $id AND state = 'open'`;

/** Seal an open batch: its content freezes and content_hash is set (spec 4.1). */
export function sealBatchTx(db: Database, batchId: number, now: number): boolean {
  const hash = computeContentHashTx(db, batchId);
  return prepared(db, SEAL).run({ id: batchId, now, hash }).changes === 1;
}

const REPLAY = `UPDATE batches SET state = 'retry', attempts = 0, next_attempt_at = $now, not_before = $now
  WHERE id = $id AND state = 'dead' AND destination <> 'quarantine'`;

/**
 * dead -> retry, due now, attempts = 0 (spec 4.1). The content stays frozen; the batch
 * re-enters its group's queue by first_at, so it delivers out of order (spec 6.1).
 */
export function replayDeadTx(db: Database, batchId: number, now: number): boolean {
  return prepared(db, REPLAY).run({ id: batchId, now }).changes === 1;
}
