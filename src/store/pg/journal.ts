// The journal on PostgreSQL: one row per change, in the change's transaction (what watch and
// the dashboard's live tail follow).
import type { JournalKind, JournalRow } from "../journal.ts";
import { num, numOrNull, type PgSpool, type Tx } from "./db.ts";

export async function journalPg(
  tx: Tx,
  kind: JournalKind,
  batchId: number,
  at: number,
  o: { event?: number; attempt?: number; detail?: Record<string, unknown> } = {},
): Promise<void> {
  await tx`INSERT INTO journal (at, kind, batch_id, event_id, attempt_id, source, destination, key, detail)
      SELECT ${at}, ${kind}, id, ${o.event ?? null}, ${o.attempt ?? null}, source, destination, key,
        ${o.detail ? JSON.stringify(o.detail) : null}
      FROM batches WHERE id = ${batchId}::bigint`;
}

/** A position in the PostgreSQL journal: the last (transaction, id) a reader saw. */
export interface PgCursor {
  xid: string;
  id: number;
}

export const PG_CURSOR_START: PgCursor = { xid: "0", id: 0 };

/**
 * Journal rows after `cursor`, in (xid, id) order, only of transactions older than every one
 * still running: a row a reader has not seen can never appear behind the cursor it holds.
 */
export async function journalAfterPg(
  spool: PgSpool,
  cursor: PgCursor,
  limit: number,
): Promise<{ rows: (JournalRow & { xid: string })[]; cursor: PgCursor }> {
  const rows = (await spool.sql`SELECT j.id, j.xid::text AS xid, j.at, j.kind, j.batch_id, j.event_id, j.attempt_id,
      a.n AS attempt_n, j.source, j.destination, j.key, j.detail
      FROM journal j LEFT JOIN attempts a ON a.id = j.attempt_id
      WHERE (j.xid, j.id) > (${cursor.xid}::xid8, ${cursor.id}::bigint)
        AND j.xid < pg_snapshot_xmin(pg_current_snapshot())
      ORDER BY j.xid, j.id LIMIT ${limit}`) as Record<string, unknown>[];
  const out = rows.map(journalRowOf);
  const last = out[out.length - 1];
  return { rows: out, cursor: last ? { xid: last.xid, id: last.id } : cursor };
}

/**
 * The last `limit` rows a reader may take now, oldest first, and the cursor after them (the live page's first screen).
 */
export async function journalLastPg(
  spool: PgSpool,
  limit: number,
): Promise<{ rows: (JournalRow & { xid: string })[]; cursor: PgCursor }> {
  const rows = (await spool.sql`SELECT j.id, j.xid::text AS xid, j.at, j.kind, j.batch_id, j.event_id, j.attempt_id,
      a.n AS attempt_n, j.source, j.destination, j.key, j.detail
      FROM journal j LEFT JOIN attempts a ON a.id = j.attempt_id
      WHERE j.xid < pg_snapshot_xmin(pg_current_snapshot())
      ORDER BY j.xid DESC, j.id DESC LIMIT ${limit}`) as Record<string, unknown>[];
  const out = rows.map(journalRowOf).reverse();
  const last = out[out.length - 1];
  return { rows: out, cursor: last ? { xid: last.xid, id: last.id } : PG_CURSOR_START };
}

function journalRowOf(r: Record<string, unknown>): JournalRow & { xid: string } {
  return {
    id: num(r.id),
    xid: String(r.xid),
    at: Number(r.at),
    kind: r.kind as JournalKind,
    batch_id: num(r.batch_id),
    event_id: numOrNull(r.event_id),
    attempt_id: numOrNull(r.attempt_id),
    attempt_n: numOrNull(r.attempt_n),
    source: String(r.source),
    destination: String(r.destination),
    key: String(r.key),
    detail: (r.detail as string | null) ?? null,
  };
}

/**
 * The newest position a reader may take now ("from now"): the last row of a transaction older than every running one.
 */
export async function journalHeadPg(spool: PgSpool): Promise<PgCursor> {
  const [r] =
    await spool.sql`SELECT xid::text AS xid, id FROM journal WHERE xid < pg_snapshot_xmin(pg_current_snapshot())
      ORDER BY xid DESC, id DESC LIMIT 1`;
  return r ? { xid: String(r.xid), id: num(r.id) } : PG_CURSOR_START;
}

/** A cursor as watch prints it ("<xid>:<id>"), and back. */
export const formatPgCursor = (c: PgCursor): string => `${c.xid}:${c.id}`;

export function parsePgCursor(text: string): PgCursor | null {
  if (text === "0") return PG_CURSOR_START;
  const m = /^(\d{1,20}):(\d{1,19})$/.exec(text);
  return m ? { xid: m[1], id: Number(m[2]) } : null;
}
