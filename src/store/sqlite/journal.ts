// The journal `hookspool watch` follows: each change to a batch, written in the same
// transaction as the change, so a reader never sees one that did not commit and never misses
// one that did. A row's id is its cursor. Retention keeps it as long as delivered batches.
import type { Database } from "bun:sqlite";
import { prepared, type SqliteSpool } from "./db.ts";
import type { JournalKind, JournalRow, JournalFilter } from "../journal.ts";

const WRITE = `INSERT INTO journal (at, kind, batch_id, event_id, attempt_id, source, destination, key, detail)
  SELECT $at, $kind, id, $event, $attempt, source, destination, key, $detail FROM batches WHERE id = $batch`;

/** Journal one change to batch `batchId` inside the caller's transaction. */
export function journalTx(
  db: Database,
  kind: JournalKind,
  batchId: number,
  at: number,
  o: { event?: number; attempt?: number; detail?: Record<string, unknown> } = {},
): void {
  prepared(db, WRITE).run({
    at,
    kind,
    batch: batchId,
    event: o.event ?? null,
    attempt: o.attempt ?? null,
    detail: o.detail ? JSON.stringify(o.detail) : null,
  });
}

/** Rows after `cursor`, oldest first, at most `limit`. */
export function journalAfter(spool: SqliteSpool, cursor: number, f: JournalFilter, limit: number): JournalRow[] {
  return prepared<JournalRow, Record<string, string | number | null>>(
    spool.db,
    `SELECT j.*, a.n AS attempt_n FROM journal j LEFT JOIN attempts a ON a.id = j.attempt_id
      WHERE j.id > $cursor AND ($source IS NULL OR j.source = $source) AND ($destination IS NULL
        OR j.destination = $destination) AND ($key IS NULL OR j.key = $key)
      ORDER BY j.id LIMIT $limit`,
  ).all({ cursor, source: f.source ?? null, destination: f.destination ?? null, key: f.key ?? null, limit });
}

/** The oldest and newest cursor kept (0, 0 when the journal is empty), and the newest ever given. */
export function journalBounds(spool: SqliteSpool): { oldest: number; newest: number; issued: number } {
  const r = prepared<{ oldest: number | null; newest: number | null }, []>(
    spool.db,
    "SELECT MIN(id) AS oldest, MAX(id) AS newest FROM journal",
  ).get();
  const seq = prepared<{ seq: number }, []>(spool.db, "SELECT seq FROM sqlite_sequence WHERE name = 'journal'").get();
  return { oldest: r?.oldest ?? 0, newest: r?.newest ?? 0, issued: seq?.seq ?? 0 };
}

/** SQLite's data_version: it changes when another connection commits (what a watcher waits for). */
export function dataVersion(spool: SqliteSpool): number {
  return prepared<{ data_version: number }, []>(spool.db, "PRAGMA data_version").get()?.data_version ?? 0;
}

/** Retention: journal rows older than `before`, in one statement. */
export function pruneJournalTx(db: Database, before: number): number {
  return prepared(db, "DELETE FROM journal WHERE at < ?").run(before).changes;
}
