// meta's times on PostgreSQL (last_enqueue_at, a source's last_event_at, last_tick_at): moved
// forward only, by several writers at once. A value that is not a number (written by hand) is
// read as none, as on SQLite, and the next write replaces it.
import type { Tx } from "./db.ts";

/** What a stored value must look like to be read as a number. */
const NUMERIC = "'^[-+]?[0-9]+([.][0-9]*)?([eE][-+]?[0-9]+)?$'";

/** The value of meta[key] (inside a statement over meta) as a number, or NULL. */
export const metaNumberSql = (tx: Tx, column: string) => tx.unsafe(`CASE WHEN ${column} ~ ${NUMERIC} THEN ${column}::float8 END`);

/** Each meta[key] = max(meta[key], at), in the caller's transaction. */
export async function advanceMetaTimesPg(tx: Tx, keys: readonly string[], at: number): Promise<void> {
  await tx`INSERT INTO meta (key, value) SELECT k, ${String(at)} FROM unnest(${keys}::text[]) AS k
      ON CONFLICT (key) DO UPDATE SET value = GREATEST(${metaNumberSql(tx, "meta.value")}, excluded.value::float8)::text`;
}
