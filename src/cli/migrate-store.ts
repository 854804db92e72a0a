// hookspool migrate-store --to postgres [--url-env NAME]: move the SQLite spool (spool.db) into an
// empty PostgreSQL database in one step: dispatch.lock first (no SQLite dispatcher runs), the
// PostgreSQL schema migrated, every row copied with its id, verified, committed at once. The URL
// comes from [spool] url or, before the config is switched, from an environment variable; it is
// never printed.
import { existsSync } from "node:fs";
import type { CommandDef } from "citty";
import { pgUrl } from "../config/backend.ts";
import type { Config } from "../config/types.ts";
import { HookspoolError } from "../errors.ts";
import { type CopyReport, moveSpoolToPostgres, poolSize } from "../store/open.ts";
import { type Cli, GLOBAL_ARGS, loadFor } from "./context.ts";

/** Progress lines for a big table: one per this many rows, besides the line when it is done. */
const PROGRESS_EVERY = 100_000;

const NOUNS: Record<string, [string, string]> = {
  batches: ["batch", "batches"],
  events: ["event", "events"],
  attempts: ["attempt", "attempts"],
  dedup: ["dedup row", "dedup rows"],
  destinations: ["destination state", "destination states"],
  issues: ["issue", "issues"],
  alerts: ["alert limit", "alert limits"],
  polls: ["poll clock", "poll clocks"],
  journal: ["journal row", "journal rows"],
  actions: ["operator action", "operator actions"],
  delivered_versions: ["delivered version", "delivered versions"],
  meta: ["meta key", "meta keys"],
};

function counted(table: string, n: number): string {
  const [one, many] = NOUNS[table] ?? [`${table} row`, `${table} rows`];
  return `${n} ${n === 1 ? one : many}`;
}

/** The summary line: what moved, and what the operator does next. */
export function describeCopy(report: CopyReport): string {
  const parts = report.tables.filter((t) => t.name !== "meta").map((t) => counted(t.name, t.rows));
  return `copied ${parts.join(", ")} into PostgreSQL; set [spool] backend = "postgres" and start the services`;
}

/** The config whose [spool] url names the target: its own, or `--url-env NAME` instead. */
function targetConfig(config: Config, urlEnv: string | undefined): Config {
  if (urlEnv !== undefined) {
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(urlEnv))
      throw new HookspoolError(
        "E_USAGE",
        `--url-env needs an environment variable's name, got "${urlEnv.slice(0, 40)}"`,
      );
    return { ...config, spool: { ...config.spool, url: { env: urlEnv } } };
  }
  if (!config.spool.url) {
    throw new HookspoolError(
      "E_CONFIG",
      "migrate-store needs the PostgreSQL URL: set [spool] url " +
        '(a secret reference such as { env = "HOOKSPOOL_PG_URL" }) or pass --url-env NAME',
      { key: "spool.url" },
    );
  }
  return config;
}

/**
 * A client failure in words that never quote the URL or a row: its class and SQLSTATE only. Anything else (a bug) stays
 * itself.
 */
export function migrateStoreCommand(cli: Cli): CommandDef {
  return {
    meta: {
      name: "migrate-store",
      description:
        "move the SQLite spool into an empty PostgreSQL database: takes dispatch.lock, " +
        "migrates the PostgreSQL schema, copies every row with its id in one transaction and verifies it " +
        "(stop the SQLite services first; the URL comes from [spool] url, or --url-env)",
    },
    args: {
      ...GLOBAL_ARGS,
      to: { type: "string", description: "the store to move to: postgres", valueHint: "postgres" },
      "url-env": {
        type: "string",
        description:
          "read the PostgreSQL URL from this environment variable " +
          "instead of [spool] url (to move before switching the backend)",
        valueHint: "NAME",
      },
    },
    async run({ args }) {
      if (args.to !== "postgres")
        throw new HookspoolError(
          "E_USAGE",
          args.to
            ? `migrate-store can move a spool only to postgres, not "${String(args.to).slice(0, 40)}"`
            : "migrate-store needs --to postgres",
          { hint: "see hookspool migrate-store --help" },
        );
      const { config, paths } = loadFor(cli);
      if (!existsSync(paths.spoolFile)) {
        throw new HookspoolError("E_NOT_FOUND", `no SQLite spool at ${paths.spoolFile}; there is nothing to move`, {
          hint: "migrate-store copies the spool.db of --home (or [spool] home and db)",
        });
      }
      const target = targetConfig(config, args["url-env"] as string | undefined);
      // Resolve (and check) the URL before taking anything: a missing variable is one config line.
      const url = pgUrl(target, cli.io.env);
      const next = new Map<string, number>();
      const { report, schema } = await moveSpoolToPostgres({
        paths,
        url,
        pool: poolSize(config, "operator"),
        clock: cli.clock,
        onSchema: (from, to) => cli.io.err(`migrate-store: PostgreSQL schema ${from} -> ${to}`),
        onProgress: (table, copied, total) => {
          if (copied === total) cli.io.err(`migrate-store: ${table}: ${copied} of ${total} rows`);
          else if (copied >= (next.get(table) ?? PROGRESS_EVERY)) {
            cli.io.err(`migrate-store: ${table}: ${copied} of ${total} rows...`);
            next.set(table, copied + PROGRESS_EVERY);
          }
        },
      });
      cli.io.err("migrate-store: verified: every table holds the same rows and values on both sides");
      cli.io.out(cli.globals.json ? JSON.stringify({ ...report, backend: "postgres", schema }) : describeCopy(report));
      return 0;
    },
  };
}
