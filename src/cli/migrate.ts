// hookspool migrate [--dry-run]: apply pending schema migrations under dispatch.lock.
import { chmodSync, existsSync, mkdirSync } from "node:fs";
import { dirname } from "node:path";
import type { CommandDef } from "citty";
import { openSpool } from "../store/sqlite/db.ts";
import { acquireLock } from "../store/sqlite/lock.ts";
import { migrate, pendingMigrations } from "../store/sqlite/migrate.ts";
import { type Cli, GLOBAL_ARGS, loadFor } from "./context.ts";
import { randomBytes } from "node:crypto";
import { isPostgres, openPgSpool } from "../config/backend.ts";
import type { Config } from "../config/types.ts";
import { HookspoolError } from "../errors.ts";
import { migratePg, PG_LATEST_SCHEMA, PG_MIGRATIONS, pgSchemaVersion } from "../store/pg/migrate.ts";

/** migrate on PostgreSQL: under the database's migrate lock (dispatch.lock is SQLite's), so running dispatchers may stay up. */
async function migratePostgres(cli: Cli, config: Config, dryRun: boolean, say: (json: object, text: string) => void): Promise<number> {
  const pg = openPgSpool(config, cli.io.env);
  try {
    await pg.ping();
    if (dryRun) {
      const from = await pgSchemaVersion(pg);
      if (from > PG_LATEST_SCHEMA) throw new HookspoolError("E_SCHEMA", `the PostgreSQL spool is at schema ${from}, newer than this build (${PG_LATEST_SCHEMA}); run the newer hookspool`);
      const pending = PG_MIGRATIONS.filter((m) => m.version > from).map((m) => m.name);
      say({ from, pending, backend: "postgres" }, pending.length ? `would apply ${pending.join(", ")} (PostgreSQL schema ${from})` : `PostgreSQL schema ${from} is current; nothing to apply`);
      return 0;
    }
    const r = await migratePg(pg, randomBytes(6).toString("hex"));
    say({ ...r, backend: "postgres" }, r.applied.length ? `applied ${r.applied.join(", ")} (PostgreSQL schema ${r.from} -> ${r.to})` : `PostgreSQL schema ${r.to} is current; nothing to apply`);
    return 0;
  } finally {
    await pg.close();
  }
}

/**
 * What migrate would apply, read without dispatch.lock: a dry run changes nothing, so it may look
 * while the dispatcher runs. The store's dry run refuses a newer schema, as the real one does.
 */
function dryRun(cli: Cli, file: string, say: (json: object, text: string) => void): number {
  if (!existsSync(file)) {
    const pending = pendingMigrations(0).map((m) => m.name);
    say({ from: 0, pending }, `no spool at ${file}; migrate would create it and apply ${pending.join(", ")}`);
    return 0;
  }
  const spool = openSpool(file, { create: false, clock: cli.clock });
  try {
    const { from, applied: pending } = migrate(spool, { dryRun: true });
    say({ from, pending }, pending.length ? `would apply ${pending.join(", ")} (schema ${from})` : `schema ${from} is current; nothing to apply`);
    return 0;
  } finally {
    spool.close();
  }
}

export function migrateCommand(cli: Cli): CommandDef {
  return {
    meta: { name: "migrate", description: "apply pending schema migrations (takes dispatch.lock; refuses while the dispatcher runs)" },
    args: {
      ...GLOBAL_ARGS,
      "dry-run": { type: "boolean", description: "say what would be applied, change nothing" },
    },
    async run({ args }) {
      const loaded = loadFor(cli);
      const { paths, config } = loaded;
      const say = (json: object, text: string) => cli.io.out(cli.globals.json ? JSON.stringify(json) : text);
      if (isPostgres(config)) return migratePostgres(cli, config, Boolean(args["dry-run"]), say);
      const dir = dirname(paths.spoolFile);
      // A home nobody made is a typo far more often than a wish: init makes homes, and a config
      // that names a spool elsewhere is the user's word that its directory should exist.
      if (!existsSync(dir) && loaded.paths.config === null) {
        throw new HookspoolError("E_NOT_FOUND", `no hookspool home at ${dir}`, { hint: "hookspool init makes one; or point --home or HOOKSPOOL_HOME at yours" });
      }
      if (args["dry-run"]) return dryRun(cli, paths.spoolFile, say);
      if (!existsSync(dir)) {
        mkdirSync(dir, { recursive: true, mode: 0o700 });
        chmodSync(dir, 0o700);
      }
      const lock = acquireLock(paths.lock);
      try {
        const spool = openSpool(paths.spoolFile, { create: true, clock: cli.clock });
        try {
          const r = migrate(spool);
          say(r, r.applied.length ? `applied ${r.applied.join(", ")} (schema ${r.from} -> ${r.to})` : `schema ${r.to} is current; nothing to apply`);
          return 0;
        } finally {
          spool.close();
        }
      } finally {
        lock.release();
      }
    },
  };
}
