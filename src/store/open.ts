// The one place that chooses a backend. A config names SQLite's spool.db under the home (the
// default) or a PostgreSQL database several hosts share; `openStores` opens it once for one
// process and hands out the roles of api.ts over that one handle, so a caller never asks which
// backend it is on. How it opens depends on who asks:
// - "dispatch" (dispatch, run): the one service that migrates. SQLite takes dispatch.lock first
//   (held: exit 3), refuses a corrupt file (exit 2) and migrates; PostgreSQL reaches the server
//   and migrates under the database's own lock (two dispatchers starting together apply once).
//   Both then build the payload indexes the config's bobbins declare (schema.ts).
// - "intake" and "operator": never migrate; another schema version is exit 2 ("run hookspool
//   migrate"). The intake's SQLite connection has the intake's busy timeout (10 s, then 503),
//   waited for off the event loop (sqlite/wait.ts), as every service's is.
// On either backend the operator's and the dashboard's roles read a pull lease's owner without
// its nonce (pull.ts): only the pull API's role sees the secret half of a lease id.
import { randomBytes } from "node:crypto";
import type { Clock } from "../clock.ts";
import { pgUrl } from "../config/backend.ts";
import type { Env } from "../config/load.ts";
import type { Config } from "../config/types.ts";
import type { Backend, DashboardStore, DispatchStore, IntakeStore, OperatorStore, PullStore } from "./api.ts";
import { PgSpool } from "./pg/db.ts";
import { migratePg, requirePgSchema } from "./pg/migrate.ts";
import { pgDashboardStore, pgDispatchStore, pgIntakeStore, pgOperatorStore, pgPullStore } from "./pg/store.ts";
import { openSpool, openVerified, requireCurrentSchema, type SqliteSpool, waitOffLoop } from "./sqlite/db.ts";
import { acquireLock, type FileLock } from "../lock.ts";
import type { MaintenanceStore, StatusStore } from "./api.ts";
import { pgMaintenanceStore, pgStatusStore } from "./pg/store.ts";
import { sqliteMaintenanceStore, sqliteStatusStore } from "./sqlite/store.ts";
import { migrate } from "./sqlite/migrate.ts";
import { syncPayloadIndexes } from "./sqlite/where.ts";
import { syncPayloadIndexesPg } from "./pg/where.ts";
import { indexedPaths } from "./schema.ts";
import { dashboardShown, operatorShown } from "./pull.ts";
import {
  sqliteDashboardStore,
  sqliteDispatchStore,
  sqliteIntakeStore,
  sqliteOperatorStore,
  sqlitePullStore,
} from "./sqlite/store.ts";

/** Who opens the store: only "dispatch" migrates (and, on SQLite, holds dispatch.lock). */
export type OpenMode = "dispatch" | "intake" | "operator";

export interface OpenOptions {
  mode: OpenMode;
  /** The home's spool.db and dispatch.lock (SQLite). */
  paths: { spoolFile: string; lock: string };
  env: Env;
  clock: Clock;
  /** SQLite's busy_timeout for this process's connection (default 30 s; the intake's is its own). */
  busyTimeoutS?: number;
}

/** One process's store: the roles of api.ts over one opened database. */
export interface Stores {
  readonly backend: Backend;
  intake(): IntakeStore;
  /** `holder` names this dispatcher where leadership shows (host:pid). */
  dispatch(holder: string): Promise<DispatchStore>;
  operator(): OperatorStore;
  /** Maintenance's chores (which dispatcher runs them is DispatchStore.leads's to say). */
  maintenance(): MaintenanceStore;
  /** What `hookspool metrics` reads (the intake's role has it too). */
  status(): StatusStore;
  /** The dashboard's reads and actions (its close is the process's: close()). */
  dashboard(): DashboardStore;
  /** What the intake's pull API leases and acks through. */
  pull(): Promise<PullStore>;
  /** Close the database (and, on SQLite, let dispatch.lock go). */
  close(): Promise<void>;
}

export const isPostgres = (config: Config): boolean => config.spool.backend === "postgres";

/** hookspool migrate on the config's backend (store/schema.ts). */
export { createSpool, migrateStore, type MigrateOutcome } from "./schema.ts";
/** hookspool check's database rules on the config's backend (store/check.ts). */
export { checkStore } from "./check.ts";

/** Which backend a config names. */
export const backendOf = (config: Config): Backend => (isPostgres(config) ? "postgres" : "sqlite");

/**
 * The connections a process keeps: spool.pool when set; else a dispatcher's (and run's) one per
 * worker, each reading its batch while the tick claims and the outcomes commit, and 4 for an
 * intake (two group commits in flight, health and metrics reads) or a CLI verb.
 */
export function poolSize(config: Config, mode: OpenMode): number {
  return config.spool.pool ?? (mode === "dispatch" ? config.dispatch.parallel + 2 : 4);
}

/** A pool on the config's PostgreSQL database (poolSize connections at most). */
export function openPgPool(config: Config, env: Env, mode: OpenMode = "operator"): PgSpool {
  return new PgSpool({ url: pgUrl(config, env) }, { max: poolSize(config, mode) });
}

export async function openStores(config: Config, o: OpenOptions): Promise<Stores> {
  return isPostgres(config) ? openPostgres(config, o) : openSqlite(o, indexedPaths(config));
}

async function openPostgres(config: Config, o: OpenOptions): Promise<Stores> {
  const pg = openPgPool(config, o.env, o.mode);
  try {
    await pg.ping();
    if (o.mode === "dispatch") {
      await migratePg(pg, randomBytes(6).toString("hex"));
      await syncPayloadIndexesPg(pg, indexedPaths(config));
    } else await requirePgSchema(pg);
    await pg.readPaths(indexedPaths(config));
  } catch (e) {
    await pg.close();
    throw e;
  }
  return pgStores(pg);
}

/** The roles over a PostgreSQL pool already open (and migrated or checked); close() ends the pool. */
export function pgStores(pg: PgSpool): Stores {
  return {
    backend: "postgres",
    intake: () => pgIntakeStore(pg),
    dispatch: (holder) => pgDispatchStore(pg, holder),
    operator: () => operatorShown(pgOperatorStore(pg)),
    maintenance: () => pgMaintenanceStore(pg),
    status: () => pgStatusStore(pg),
    dashboard: () => dashboardShown(pgDashboardStore(pg)),
    pull: () => pgPullStore(pg),
    close: () => pg.close(),
  };
}

function openSqlite(o: OpenOptions, indexed: readonly string[]): Stores {
  const spool = o.mode === "dispatch" ? openForDispatch(o, indexed) : openExistingSqlite(o);
  // Opened, checked and migrated with the connection's own wait; from here on the roles wait
  // for another process's lock off the event loop, so HTTP keeps answering meanwhile.
  waitOffLoop(spool.spool, o.busyTimeoutS ?? 30);
  return sqliteStores(spool.spool, () => {
    spool.spool.close();
    spool.lock?.release();
  });
}

/** The roles over an open SQLite spool (tests that hold a spool of their own build them here too). */
export function sqliteStores(spool: SqliteSpool, close: () => void = () => spool.close()): Stores {
  return {
    backend: "sqlite",
    intake: () => sqliteIntakeStore(spool),
    dispatch: async () => sqliteDispatchStore(spool),
    // The operator's close is the process's: the verbs end by closing what they opened.
    operator: () => operatorShown({ ...sqliteOperatorStore(spool), close: async () => close() }),
    maintenance: () => sqliteMaintenanceStore(spool),
    status: () => sqliteStatusStore(spool),
    dashboard: () => dashboardShown(sqliteDashboardStore(spool)),
    pull: async () => sqlitePullStore(spool),
    close: async () => close(),
  };
}

function openExistingSqlite(o: OpenOptions): { spool: SqliteSpool; lock?: FileLock } {
  const spool = openSpool(o.paths.spoolFile, { create: false, busyTimeoutS: o.busyTimeoutS ?? 30, clock: o.clock });
  try {
    requireCurrentSchema(spool);
  } catch (e) {
    spool.close();
    throw e;
  }
  return { spool };
}

/** dispatch.lock (held: exit 3), then the verified file (corrupt: exit 2), then migrations and the payload indexes. */
function openForDispatch(o: OpenOptions, indexed: readonly string[]): { spool: SqliteSpool; lock: FileLock } {
  const lock = acquireLock(o.paths.lock, "another dispatcher (or hookspool migrate)");
  try {
    const spool = openVerified(o.paths.spoolFile, { create: true, busyTimeoutS: o.busyTimeoutS ?? 30, clock: o.clock });
    try {
      migrate(spool);
      syncPayloadIndexes(spool, indexed);
    } catch (e) {
      spool.close();
      throw e;
    }
    return { spool, lock };
  } catch (e) {
    lock.release();
    throw e;
  }
}

/** hookspool migrate-store: the SQLite spool copied into PostgreSQL and verified (store/move.ts). */
export type { CopyReport } from "./copy.ts";
export { moveSpoolToPostgres } from "./move.ts";
