// hookspool watch: the spool's changes as they commit (events queued, batches sealed, leased,
// awaiting an outcome, delivered, retried, dead, dropped), for one source, destination or key, or all. Each line
// carries its cursor; --since <cursor> goes on after it, at least once (a consumer dedups on the
// cursor, which the store gives: SQLite's row id, PostgreSQL's "<xid>:<id>"). It reads the
// journal between commits, holding no transaction; the store says when to look again.
import type { CommandDef } from "citty";
import { HookspoolError } from "../errors.ts";
import type { JournalRow } from "../store/journal.ts";
import { type Cli, GLOBAL_ARGS, loadForReading, openOperatorStore, positiveInt } from "./context.ts";
import { isoTime, visible } from "./format.ts";

export const PAGE = 500;
const COLOUR: Record<string, string> = {
  delivered: "\u001b[32m",
  dead: "\u001b[31m",
  retry: "\u001b[33m",
  awaiting: "\u001b[36m",
  dropped: "\u001b[90m",
};

export function detailOf(r: JournalRow): Record<string, unknown> {
  try {
    return r.detail ? (JSON.parse(r.detail) as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}

export function lineOf(r: JournalRow, tty: boolean, cursor: string = String(r.id)): string {
  const d = detailOf(r);
  // A lease's detail carries its number too: said once, as "attempt N".
  if (r.attempt_n !== null) delete d.n;
  const facts = Object.entries(d)
    .map(([k, v]) => `${k}=${typeof v === "string" ? v : JSON.stringify(v)}`)
    .join(" ");
  const kind = tty && COLOUR[r.kind] ? `${COLOUR[r.kind]}${r.kind}\u001b[0m` : r.kind;
  // An attempt by its number within the batch, as show --attempts numbers them (its row id is in --json).
  const what =
    r.kind === "event"
      ? `event ${r.event_id}`
      : r.attempt_id !== null
        ? r.attempt_n !== null
          ? `attempt ${r.attempt_n}`
          : ""
        : "";
  // Every field but the colour is someone's text: escaped before it reaches the terminal.
  const rest = ` batch ${r.batch_id}${what ? ` ${what}` : ""} ${r.source} -> ${r.destination} key=${r.key}`;
  return `${visible(`${cursor} ${isoTime(r.at)} `)}${kind}${visible(`${rest}${facts ? ` ${facts}` : ""}`)}`;
}

/** A cursor in --json: a whole number as a number (SQLite's row ids), any other as its text. */
const jsonCursor = (c: string): number | string => (/^\d{1,15}$/.test(c) ? Number(c) : c);

export function watchCommand(cli: Cli): CommandDef {
  return {
    meta: {
      name: "watch",
      description:
        "follow the spool's changes as they commit, each line with its cursor; --since CURSOR goes on after it",
    },
    args: {
      ...GLOBAL_ARGS,
      source: { type: "string", description: "only this source's batches" },
      destination: { type: "string", description: "only this destination's batches" },
      key: { type: "string", description: "only batches of this coalesce key", valueHint: "K" },
      since: {
        type: "string",
        description: "go on after this cursor (0: from the oldest kept); default: from now",
        valueHint: "CURSOR",
      },
      count: { type: "string", description: "stop after this many lines", valueHint: "N" },
      for: { type: "string", description: "stop after this many seconds", valueHint: "S" },
    },
    async run({ args }) {
      const filter = {
        source: args.source as string | undefined,
        destination: args.destination as string | undefined,
        key: args.key as string | undefined,
      };
      const count = args.count === undefined ? Number.POSITIVE_INFINITY : positiveInt(args.count, "--count");
      const seconds = args.for === undefined ? Number.POSITIVE_INFINITY : Number(args.for);
      if (!(seconds > 0)) throw new HookspoolError("E_USAGE", "--for must be a number of seconds above 0");
      const store = await openOperatorStore(cli, loadForReading(cli));
      try {
        let cursor = await store.journalCursor(args.since === undefined ? undefined : String(args.since));
        const until = performance.now() + seconds * 1000;
        let shown = 0;
        while (shown < count && performance.now() < until) {
          const page = await store.journalAfter(cursor, filter, Math.min(PAGE, count - shown));
          cursor = page.cursor;
          // One write per page, not per line: a watcher under load costs the host less.
          const out = page.rows.map((r) =>
            cli.globals.json
              ? JSON.stringify({
                  ...detailOf(r),
                  cursor: jsonCursor(r.cursor),
                  at: r.at,
                  kind: r.kind,
                  batch: r.batch_id,
                  event: r.event_id,
                  attempt: r.attempt_id,
                  attempt_n: r.attempt_n,
                  source: r.source,
                  destination: r.destination,
                  key: r.key,
                })
              : lineOf(r, cli.io.isTTY, r.cursor),
          );
          if (out.length) cli.io.out(out.join("\n"));
          shown += page.rows.length;
          if (!page.full && shown < count) await Bun.sleep(50);
        }
        return 0;
      } finally {
        await store.close();
      }
    },
  };
}
