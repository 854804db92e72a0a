// Which delivery ids a source has already spooled: the dedup table, read for a sweep that must
// not ask a sender to redeliver what arrived.
import { prepared, type Spool } from "./db.ts";

/** The ids among `ids` the source has a dedup row for (spooled within its dedup window). */
export function spooledDedupIds(spool: Spool, source: string, ids: readonly string[]): Set<string> {
  const q = prepared<{ dedup_id: string }>(spool.db, "SELECT dedup_id FROM dedup WHERE source = ? AND dedup_id = ?");
  const out = new Set<string>();
  for (const id of ids) if (q.get(source, id)) out.add(id);
  return out;
}
