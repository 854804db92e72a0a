// What the source kit reads back after each request it sends, and the one switch it throws:
// refusing every write on a connection, the way a full disk refuses them, so it can see the
// intake answer 503 without filling a disk.
import { prepared, type SqliteSpool } from "./db.ts";

export interface StoredEvent {
  key: string;
  event_type: string;
  headers: string;
  dedup_id: string | null;
  payload: string;
  version: number | null;
}

export interface QuarantinedEvent {
  headers: string;
  raw: Uint8Array;
  state: string;
  last_error: string | null;
}

export function eventCount(spool: SqliteSpool): number {
  return (prepared<{ n: number }>(spool.db, "SELECT COUNT(*) AS n FROM events").get() as { n: number }).n;
}

/** The newest event routed to a destination (not quarantined), with its batch's key. */
export function newestEvent(spool: SqliteSpool): StoredEvent | null {
  return prepared<StoredEvent>(
    spool.db,
    "SELECT b.key, e.event_type, e.headers, e.dedup_id, CAST(e.payload AS TEXT) AS payload, e.version FROM events e " +
      "JOIN batches b ON b.id = e.batch_id WHERE b.destination <> 'quarantine' ORDER BY e.id DESC LIMIT 1",
  ).get();
}

export function newestQuarantined(spool: SqliteSpool): QuarantinedEvent | null {
  return prepared<QuarantinedEvent>(
    spool.db,
    "SELECT e.headers, e.raw, b.state, b.last_error FROM events e JOIN batches b ON b.id = e.batch_id " +
      "WHERE b.destination = 'quarantine' ORDER BY e.id DESC LIMIT 1",
  ).get();
}

export function openIssueCount(spool: SqliteSpool, fingerprint: string): number {
  return (
    prepared<{ n: number }>(spool.db, "SELECT COUNT(*) AS n FROM issues WHERE fingerprint = ? AND state = 'open'").get(
      fingerprint,
    ) as { n: number }
  ).n;
}

/** The first table and column any of whose values holds `needle`, or null. */
export function findText(spool: SqliteSpool, needle: string): { table: string; column: string } | null {
  const tables = spool.db.query("SELECT name FROM sqlite_master WHERE type = 'table'").all() as { name: string }[];
  const decoder = new TextDecoder();
  for (const { name } of tables) {
    for (const row of spool.db.query(`SELECT * FROM "${name.replaceAll('"', '""')}"`).iterate() as IterableIterator<
      Record<string, unknown>
    >) {
      for (const [column, v] of Object.entries(row)) {
        const text = v instanceof Uint8Array ? decoder.decode(v) : String(v);
        if (text.includes(needle)) return { table: name, column };
      }
    }
  }
  return null;
}

/** Refuse (or allow again) every write on this connection: SQLite answers SQLITE_READONLY. */
export function refuseWrites(spool: SqliteSpool, refuse: boolean): void {
  spool.db.run(`PRAGMA query_only = ${refuse ? 1 : 0}`);
}
