// hookspool watch on PostgreSQL. Several processes write the journal at once, so a position is
// a (transaction, row) pair, printed "<xid>:<id>", and a reader takes only the rows of
// transactions older than every one still running: no row can appear behind a cursor already
// handed out. The price: a transaction left open on the database holds the tail back.
import type { Config } from "../config/types.ts";
import { HookspoolError } from "../errors.ts";
import type { JournalFilter } from "../store/journal.ts";
import { formatPgCursor, journalAfterPg, journalHeadPg, parsePgCursor } from "../store/pg/journal.ts";
import { type Cli, withPg } from "./context.ts";
import { detailOf, lineOf, PAGE } from "./watch.ts";

export interface WatchOptions {
  filter: JournalFilter;
  count: number;
  seconds: number;
  since: string | undefined;
}

export async function watchPg(cli: Cli, config: Config, o: WatchOptions): Promise<number> {
  const given = o.since === undefined ? null : parsePgCursor(String(o.since));
  if (o.since !== undefined && given === null) throw new HookspoolError("E_USAGE", `--since must be a cursor as watch prints it on PostgreSQL (<xid>:<id>, or 0), got "${String(o.since).slice(0, 60)}"`);
  return withPg(cli, config, async (pg) => {
    let cursor = given ?? (await journalHeadPg(pg));
    const wanted = (r: { source: string; destination: string; key: string }) =>
      (o.filter.source === undefined || r.source === o.filter.source) && (o.filter.destination === undefined || r.destination === o.filter.destination) && (o.filter.key === undefined || r.key === o.filter.key);
    const until = performance.now() + o.seconds * 1000;
    let shown = 0;
    while (shown < o.count && performance.now() < until) {
      const page = await journalAfterPg(pg, cursor, PAGE);
      cursor = page.cursor;
      const rows = page.rows.filter(wanted).slice(0, o.count - shown);
      const out = rows.map((r) => {
        const at = formatPgCursor(r);
        return cli.globals.json ? JSON.stringify({ ...detailOf(r), cursor: at, at: r.at, kind: r.kind, batch: r.batch_id, event: r.event_id, attempt: r.attempt_id, source: r.source, destination: r.destination, key: r.key }) : lineOf(r, cli.io.isTTY, at);
      });
      if (out.length) cli.io.out(out.join("\n"));
      shown += rows.length;
      if (page.rows.length < PAGE && shown < o.count) await Bun.sleep(50);
    }
    return 0;
  });
}
