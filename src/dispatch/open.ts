// What a dispatcher does before its first tick: take dispatch.lock (held: exit 3), refuse a
// corrupt database (exit 2; nothing is moved aside or started afresh), apply migrations. The
// dispatcher is the one service that migrates; the intake refuses an older schema.
import { randomBytes } from "node:crypto";
import type { Clock } from "../clock.ts";
import { openPgSpool } from "../config/backend.ts";
import type { Env } from "../config/load.ts";
import type { Config } from "../config/types.ts";
import type { PgSpool } from "../store/pg/db.ts";
import { migratePg } from "../store/pg/migrate.ts";
import { openVerified, type SqliteSpool } from "../store/sqlite/db.ts";
import { acquireLock, type FileLock } from "../store/sqlite/lock.ts";
import { migrate } from "../store/sqlite/migrate.ts";

export interface DispatchSpool {
  spool: SqliteSpool;
  lock: FileLock;
  /** Close the connection, then let the lock go. */
  close(): void;
}

export function openForDispatch(paths: { spoolFile: string; lock: string }, o: { clock: Clock; busyTimeoutS?: number }): DispatchSpool {
  const lock = acquireLock(paths.lock, "another dispatcher (or hookspool migrate)");
  try {
    const spool = openVerified(paths.spoolFile, { create: true, busyTimeoutS: o.busyTimeoutS ?? 30, clock: o.clock });
    try {
      migrate(spool);
    } catch (e) {
      spool.close();
      throw e;
    }
    return {
      spool,
      lock,
      close: () => {
        spool.close();
        lock.release();
      },
    };
  } catch (e) {
    lock.release();
    throw e;
  }
}

/**
 * On PostgreSQL there is no dispatch.lock (several dispatchers share the database): reach the
 * server, then apply migrations under the database's own migrate lock (two dispatchers starting
 * together apply them once). An empty database gets its instance id here.
 */
export async function openPgForDispatch(config: Config, env: Env): Promise<PgSpool> {
  const pg = openPgSpool(config, env);
  try {
    await pg.ping();
    await migratePg(pg, randomBytes(6).toString("hex"));
    return pg;
  } catch (e) {
    await pg.close();
    throw e;
  }
}
