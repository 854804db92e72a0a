// hookspool watch on SQLite: a position is the journal's row id (one writer at a time hands
// them out in order). A reader holds no transaction between pages, and reads again only when
// the database changed (PRAGMA data_version moved: another connection committed; or this
// connection's own total_changes() moved, which data_version never counts) or it has not yet
// caught up.
import { HookspoolError } from "../../errors.ts";
import type { JournalWatch } from "../api.ts";
import { prepared, type SqliteSpool } from "./db.ts";
import { dataVersion, journalAfter, journalBounds } from "./journal.ts";

/** What moves when anyone commits: other connections' commits and this one's own changes. */
function changeMark(spool: SqliteSpool): string {
  const own = prepared<{ n: number }, []>(spool.db, "SELECT total_changes() AS n").get()?.n ?? 0;
  return `${dataVersion(spool)}:${own}`;
}

export function sqliteJournalWatch(spool: SqliteSpool): JournalWatch {
  // Where the last read found nothing new, and the data_version it saw then.
  let caughtUp: { cursor: string; version: string } | null = null;
  return {
    journalCursor: async (since) => {
      const bounds = journalBounds(spool);
      if (since === undefined) return String(bounds.issued);
      if (!/^\d+$/.test(since))
        throw new HookspoolError("E_USAGE", `--since must be a cursor (a whole number), got "${since.slice(0, 60)}"`);
      const cursor = Number(since);
      if (cursor > bounds.issued)
        throw new HookspoolError("E_USAGE", `cursor ${cursor} was never given (the newest is ${bounds.issued})`);
      // Rows after the cursor were pruned by retention: a gap would be silent, so say it.
      const oldestKept = bounds.oldest > 0 ? bounds.oldest - 1 : bounds.issued;
      if (cursor < oldestKept) {
        throw new HookspoolError(
          "E_NOTHING",
          `cursor reset required: cursor ${cursor} is older than the journal keeps; the oldest position is ` +
            `${oldestKept}`,
          { hint: `go on with --since ${oldestKept}, after checking what the gap lost (hookspool list --since)` },
        );
      }
      return String(cursor);
    },
    journalAfter: async (cursor, filter, limit) => {
      const version = changeMark(spool);
      if (caughtUp && caughtUp.cursor === cursor && caughtUp.version === version)
        return { rows: [], cursor, full: false };
      const rows = journalAfter(spool, Number(cursor), filter, limit).map((r) => ({ ...r, cursor: String(r.id) }));
      const next = rows.length ? rows[rows.length - 1].cursor : cursor;
      caughtUp = rows.length < limit ? { cursor: next, version } : null;
      return { rows, cursor: next, full: rows.length >= limit };
    },
  };
}
