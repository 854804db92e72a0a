// `hookspool migrate-store --to postgres`: the SQLite spool moved into PostgreSQL. Under
// dispatch.lock (no SQLite dispatcher runs) the verified file at this build's schema is copied
// (copy.ts) into the database the URL names, migrated first with the SQLite spool's instance
// id, and verified before the copy commits; a PostgreSQL refusal is one line saying nothing
// was copied.
import type { Clock } from "../clock.ts";
import { HookspoolError, isHookspoolError } from "../errors.ts";
import { acquireLock } from "../lock.ts";
import { type CopyOptions, type CopyReport, copySqliteToPg } from "./copy.ts";
import { PgSpool } from "./pg/db.ts";
import { migratePg } from "./pg/migrate.ts";
import { openVerified, requireCurrentSchema } from "./sqlite/db.ts";
import { instanceId } from "./sqlite/meta.ts";

/** A PostgreSQL refusal during a move, as one line that says nothing was copied (other errors pass). */
function pgError(e: unknown): unknown {
  const { code, errno, name } = (e ?? {}) as { code?: string; errno?: string; name?: string };
  if (isHookspoolError(e) || !(name === "PostgresError" || String(code).startsWith("ERR_POSTGRES"))) return e;
  return new HookspoolError(
    "E_SPOOL",
    `PostgreSQL refused the move (${[code, errno].filter(Boolean).join(" ")}); nothing was copied`,
  );
}

export interface MoveOptions extends CopyOptions {
  /** The home's spool.db and dispatch.lock. */
  paths: { spoolFile: string; lock: string };
  url: string;
  pool: number;
  clock: Clock;
  /** The PostgreSQL schema was migrated before the copy. */
  onSchema?(from: number, to: number): void;
}

/**
 * `hookspool migrate-store --to postgres`: under dispatch.lock (no SQLite dispatcher runs), the
 * verified SQLite spool at this build's schema is copied into the PostgreSQL database the URL
 * names, migrated first (its instance id is the SQLite spool's), and verified before it commits.
 */
export async function moveSpoolToPostgres(o: MoveOptions): Promise<{ report: CopyReport; schema: number }> {
  const lock = acquireLock(o.paths.lock, "a SQLite dispatcher or hookspool migrate");
  try {
    const sqlite = openVerified(o.paths.spoolFile, { create: false, busyTimeoutS: 30, clock: o.clock });
    try {
      try {
        requireCurrentSchema(sqlite);
      } catch (e) {
        if (isHookspoolError(e, "E_SCHEMA") && !/newer/.test(e.message))
          throw new HookspoolError("E_SCHEMA", e.message, {
            hint: 'run hookspool migrate with [spool] backend = "sqlite" first',
          });
        throw e;
      }
      // migrate takes one connection for its lock and reads with another.
      const pg = new PgSpool({ url: o.url }, { max: Math.max(2, o.pool) });
      try {
        await pg.ping();
        const schema = await migratePg(pg, instanceId(sqlite)).catch((e) => {
          throw pgError(e);
        });
        if (schema.applied.length) o.onSchema?.(schema.from, schema.to);
        const report = await copySqliteToPg(sqlite, pg, { onProgress: o.onProgress, batchSize: o.batchSize }).catch(
          (e) => {
            throw pgError(e);
          },
        );
        return { report, schema: schema.to };
      } finally {
        await pg.close();
      }
    } finally {
      sqlite.close();
    }
  } finally {
    lock.release();
  }
}
