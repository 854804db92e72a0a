// hookspool prune [--vacuum] and hookspool export: retention by hand, and a JSONL copy.
import type { CommandDef } from "citty";
import { bodiesDir, sweepBodies } from "../bodies.ts";
import { HookspoolError } from "../errors.ts";
import { diskFreeBytes, spoolBytes } from "../obs/disk.ts";
import type { ExportFilter, ExportRecord } from "../store/export.ts";
import { FILTER_ARGS, filterOf } from "./filters.ts";
import { policyFromConfig, type RetentionCounts } from "../store/retention.ts";
import { humanBytes, visible } from "./format.ts";
import { type Cli, GLOBAL_ARGS, loadFor, loadForReading, openOperatorStore, positiveInt } from "./context.ts";

function plural(n: number, one: string, many = `${one}s`): string {
  return `${n} ${n === 1 ? one : many}`;
}

/** What a prune deleted: the rows, and the body files no event names any more. */
type PruneCounts = RetentionCounts & { body_files: number; body_bytes: number };

function describeCounts(c: PruneCounts): string {
  if (Object.values(c).every((n) => n === 0)) return "nothing to delete";
  return (
    `deleted ${plural(c.batches, "batch", "batches")} (${plural(c.events, "event")}), ` +
    `${plural(c.attempts, "attempt")}, ${plural(c.dedup, "dedup row")}, ${plural(c.issues, "issue")}` +
    (c.body_files > 0 ? `, ${plural(c.body_files, "body file")} (${humanBytes(c.body_bytes)})` : "")
  );
}

function pruneCommand(cli: Cli): CommandDef {
  return {
    meta: {
      name: "prune",
      description:
        "run retention now: delete delivered and dropped batches, attempts, " +
        "expired dedup rows and closed issues past their [retention] ages (dead batches are kept); " +
        "--vacuum then rebuilds the file (needs ~2x its size free, blocks writers while it runs)",
    },
    args: {
      ...GLOBAL_ARGS,
      vacuum: { type: "boolean", description: "VACUUM after the pass to give the freed space back to the filesystem" },
    },
    async run({ args }) {
      const loaded = loadFor(cli);
      const store = await openOperatorStore(cli, loaded);
      try {
        // A server's spool: its autovacuum gives the space back, and the pass runs in small transactions.
        const file = store.spoolFile;
        if (args.vacuum && file === null) {
          throw new HookspoolError(
            "E_USAGE",
            "--vacuum applies to a SQLite spool; " +
              "on PostgreSQL the server's autovacuum gives the space back (or run VACUUM there)",
          );
        }
        const rows = await store.runRetention(policyFromConfig(loaded.config), cli.clock.now());
        const freed = await sweepBodies(bodiesDir(loaded.paths.home), (h) => store.namedBodies(h), cli.clock.now());
        const counts: PruneCounts = { ...rows, body_files: freed.files, body_bytes: freed.bytes };
        const printCounts = () => cli.io.out(cli.globals.json ? JSON.stringify(counts) : describeCounts(counts));
        if (!args.vacuum || file === null) {
          printCounts();
          return 0;
        }
        const before = spoolBytes(file);
        const free = diskFreeBytes(file);
        cli.io.err(
          "hookspool: warning: VACUUM rewrites the whole database; " +
            `it needs about twice its size free (${humanBytes(2 * before)}) ` +
            "and holds the write lock while it runs",
        );
        if (free !== null && free < 2 * before) {
          // The pass itself is done; say what it deleted before refusing the rebuild (with
          // --json the error object is the only output).
          if (!cli.globals.json) printCounts();
          throw new HookspoolError(
            "E_SPOOL",
            `only ${humanBytes(free)} free next to ${file}; VACUUM needs about ${humanBytes(2 * before)}`,
            {
              hint: "free some space, or copy the spool elsewhere with VACUUM INTO",
            },
          );
        }
        await store.vacuum();
        const after = spoolBytes(file);
        if (cli.globals.json) {
          cli.io.out(JSON.stringify({ ...counts, vacuum: { bytes_before: before, bytes_after: after } }));
        } else {
          cli.io.out(describeCounts(counts));
          cli.io.out(`vacuum: ${humanBytes(before)} -> ${humanBytes(after)}`);
        }
        return 0;
      } finally {
        await store.close();
      }
    },
  };
}

function exportCommand(cli: Cli): CommandDef {
  return {
    meta: {
      name: "export",
      description: "batches with their events (payloads included) and attempts as JSONL on stdout, oldest first",
    },
    args: {
      ...GLOBAL_ARGS,
      ...FILTER_ARGS,
      limit: {
        type: "string",
        description: "at most this many batches (default: every one); stderr says the --after that goes on",
        valueHint: "n",
      },
      after: {
        type: "string",
        description: "only batches after this id (where an export cut short by --limit stopped)",
        valueHint: "ID",
      },
    },
    async run({ args, rawArgs }) {
      const filter: ExportFilter = {
        ...filterOf(args, cli.clock.now(), rawArgs),
        ...(args.after !== undefined ? { after: positiveInt(args.after, "--after") } : {}),
      };
      const limit = args.limit === undefined ? Number.POSITIVE_INFINITY : positiveInt(args.limit, "--limit");
      const store = await openOperatorStore(cli, loadForReading(cli));
      let n = 0;
      let events = 0;
      let last = 0;
      let more = false;
      /** Print one record; false once the limit is reached and another record was there. */
      const put = (rec: ExportRecord): boolean => {
        if (n >= limit) {
          more = true;
          return false;
        }
        cli.io.out(JSON.stringify(rec));
        n++;
        last = rec.batch.id;
        events += rec.events.length;
        return true;
      };
      try {
        for await (const rec of store.exportBatches(filter)) if (!put(rec)) break;
      } finally {
        await store.close();
      }
      // stdout holds only the records; the count (and where to go on) goes to stderr.
      cli.io.err(visible(`exported ${plural(n, "batch", "batches")} (${plural(events, "event")})`));
      if (more) cli.io.err(`more: --after ${last}`);
      return 0;
    },
  };
}

/** The maintenance verbs, for the root command's subCommands. */
export function maintenanceCommands(cli: Cli): Record<string, CommandDef> {
  return { prune: pruneCommand(cli), export: exportCommand(cli) };
}
