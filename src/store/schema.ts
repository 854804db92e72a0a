// hookspool migrate on either backend: what it would apply (a dry run changes nothing and
// takes no lock, so it may look while services run), or the migrations applied. SQLite migrates
// under dispatch.lock (refused while the dispatcher runs), creating the spool where it is
// missing; PostgreSQL under the database's own migrate lock, so running dispatchers may stay up.
// Then the payload indexes: one for each path a bobbin the config instantiates has `indexed`,
// whichever instances use it (a query names a path, not a source), and none for a path no
// bobbin of the config indexes any more (store/where.ts names them; each dialect's where.ts
// builds them).
import { randomBytes } from "node:crypto";
import { chmodSync, existsSync, mkdirSync } from "node:fs";
import { dirname } from "node:path";
import type { Clock } from "../clock.ts";
import type { Env } from "../config/load.ts";
import type { Config } from "../config/types.ts";
import { HookspoolError } from "../errors.ts";
import { acquireLock } from "../lock.ts";
import type { Backend } from "./api.ts";
import { openPgPool } from "./open.ts";
import { migratePg, PG_LATEST_SCHEMA, PG_MIGRATIONS, pgSchemaVersion } from "./pg/migrate.ts";
import { openSpool } from "./sqlite/db.ts";
import { migrate, pendingMigrations } from "./sqlite/migrate.ts";
import { plannedIndexes, syncPayloadIndexes } from "./sqlite/where.ts";
import { plannedIndexesPg, syncPayloadIndexesPg } from "./pg/where.ts";
import type { IndexChanges } from "./where.ts";

export type MigrateOutcome =
  /** A dry run: the schema now and what would be applied; `missing`: SQLite's file, not there yet. */
  (
    | { dryRun: true; backend: Backend; from: number; pending: string[]; missing?: string }
    | { dryRun: false; backend: Backend; result: { from: number; to: number; applied: string[] } }
  ) & {
    /** The payload indexes built and dropped (a dry run: that would be). */
    indexes: IndexChanges;
  };

/**
 * The payload paths the config's bobbin instances have indexed (each expanded source's
 * `indexed`), each once, in order: what migrate keeps an index for.
 */
export function indexedPaths(config: Config): string[] {
  return [...new Set(Object.values(config.sources).flatMap((s) => s.indexed ?? []))].sort();
}

export interface MigrateOptions {
  paths: { spoolFile: string; lock: string };
  /** No config file was found: a SQLite home nobody made is then a typo, not a wish. */
  noConfigFile: boolean;
  env: Env;
  clock: Clock;
  dryRun: boolean;
}

export async function migrateStore(config: Config, o: MigrateOptions): Promise<MigrateOutcome> {
  return config.spool.backend === "postgres" ? migratePostgres(config, o) : migrateSqlite(o, indexedPaths(config));
}

async function migratePostgres(config: Config, o: MigrateOptions): Promise<MigrateOutcome> {
  const pg = openPgPool(config, o.env);
  try {
    await pg.ping();
    if (o.dryRun) {
      const from = await pgSchemaVersion(pg);
      if (from > PG_LATEST_SCHEMA)
        throw new HookspoolError(
          "E_SCHEMA",
          `the PostgreSQL spool is at schema ${from}, newer than this build (${PG_LATEST_SCHEMA}); run the newer ` +
            `hookspool`,
        );
      // A database not migrated yet has no events table to look at: every index is to build.
      const indexes =
        from === 0
          ? { created: plannedIndexesPg(indexedPaths(config)), dropped: [] }
          : await syncPayloadIndexesPg(pg, indexedPaths(config), { dryRun: true });
      return {
        dryRun: true,
        backend: "postgres",
        from,
        pending: PG_MIGRATIONS.filter((m) => m.version > from).map((m) => m.name),
        indexes,
      };
    }
    const result = await migratePg(pg, randomBytes(6).toString("hex"));
    return {
      dryRun: false,
      backend: "postgres",
      result,
      indexes: await syncPayloadIndexesPg(pg, indexedPaths(config)),
    };
  } finally {
    await pg.close();
  }
}

function migrateSqlite(o: MigrateOptions, paths: readonly string[]): MigrateOutcome {
  const file = o.paths.spoolFile;
  const dir = dirname(file);
  // A home nobody made is a typo far more often than a wish: init makes homes, and a config
  // that names a spool elsewhere is the user's word that its directory should exist.
  if (!existsSync(dir) && o.noConfigFile) {
    throw new HookspoolError("E_NOT_FOUND", `no hookspool home at ${dir}`, {
      hint: "hookspool init makes one; or point --home or HOOKSPOOL_HOME at yours",
    });
  }
  if (o.dryRun) {
    if (!existsSync(file))
      return {
        dryRun: true,
        backend: "sqlite",
        from: 0,
        pending: pendingMigrations(0).map((m) => m.name),
        missing: file,
        indexes: { created: plannedIndexes(paths), dropped: [] },
      };
    const spool = openSpool(file, { create: false, clock: o.clock });
    try {
      // The store's dry run refuses a newer schema, as the real one does.
      const { from, applied: pending } = migrate(spool, { dryRun: true });
      const indexes =
        from === 0
          ? { created: plannedIndexes(paths), dropped: [] }
          : syncPayloadIndexes(spool, paths, { dryRun: true });
      return { dryRun: true, backend: "sqlite", from, pending, indexes };
    } finally {
      spool.close();
    }
  }
  if (!existsSync(dir)) {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    chmodSync(dir, 0o700);
  }
  const lock = acquireLock(o.paths.lock);
  try {
    const spool = openSpool(file, { create: true, clock: o.clock });
    try {
      const result = migrate(spool);
      return { dryRun: false, backend: "sqlite", result, indexes: syncPayloadIndexes(spool, paths) };
    } finally {
      spool.close();
    }
  } finally {
    lock.release();
  }
}

/** init: a new home's SQLite spool, created and migrated (the caller holds dispatch.lock); its schema. */
export function createSpool(file: string, clock: Clock): number {
  const spool = openSpool(file, { create: true, clock });
  try {
    return migrate(spool).to;
  } finally {
    spool.close();
  }
}
