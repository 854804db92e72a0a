// The journal on PostgreSQL: one row per change, in the change's transaction (what watch and
// the dashboard's live tail follow).
import type { JournalKind } from "../journal.ts";
import type { Tx } from "./db.ts";

export async function journalPg(tx: Tx, kind: JournalKind, batchId: number, at: number, o: { event?: number; attempt?: number; detail?: Record<string, unknown> } = {}): Promise<void> {
  await tx`INSERT INTO journal (at, kind, batch_id, event_id, attempt_id, source, destination, key, detail)
      SELECT ${at}, ${kind}, id, ${o.event ?? null}, ${o.attempt ?? null}, source, destination, key, ${o.detail ? JSON.stringify(o.detail) : null}
      FROM batches WHERE id = ${batchId}::bigint`;
}
