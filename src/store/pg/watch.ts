// hookspool watch on PostgreSQL. Several processes write the journal at once, so a position is
// a (transaction, row) pair, printed "<xid>:<id>", and a reader takes only the rows of
// transactions older than every one still running: no row can appear behind a cursor already
// handed out. The price: a transaction left open on the database holds the tail back.
import { HookspoolError } from "../../errors.ts";
import type { JournalWatch } from "../api.ts";
import type { PgSpool } from "./db.ts";
import { formatPgCursor, journalAfterPg, journalHeadPg, parsePgCursor, PG_CURSOR_START } from "./journal.ts";

export function pgJournalWatch(spool: PgSpool): JournalWatch {
  return {
    journalCursor: async (since) => {
      if (since === undefined) return formatPgCursor(await journalHeadPg(spool));
      const given = parsePgCursor(since);
      if (given === null)
        throw new HookspoolError(
          "E_USAGE",
          `--since must be a cursor as watch prints it on PostgreSQL (<xid>:<id>, or 0), got "${since.slice(0, 60)}"`,
        );
      return formatPgCursor(given);
    },
    // The journal is read a page at a time and filtered here: the cursor passes the rows left out.
    journalAfter: async (cursor, filter, limit) => {
      const page = await journalAfterPg(spool, parsePgCursor(cursor) ?? PG_CURSOR_START, limit);
      const wanted = (r: { source: string; destination: string; key: string }) =>
        (filter.source === undefined || r.source === filter.source) &&
        (filter.destination === undefined || r.destination === filter.destination) &&
        (filter.key === undefined || r.key === filter.key);
      const rows = page.rows
        .filter(wanted)
        .map(({ xid: _xid, ...r }) => ({ ...r, cursor: formatPgCursor({ xid: _xid, id: r.id }) }));
      return { rows, cursor: formatPgCursor(page.cursor), full: page.rows.length >= limit };
    },
  };
}
