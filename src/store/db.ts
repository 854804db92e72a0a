// Opening the spool database: file modes, pragmas and the schema-version gate (spec 2, 10, 17).
import { Database } from "bun:sqlite";
import { chmodSync, closeSync, existsSync, mkdirSync, openSync } from "node:fs";
import { dirname } from "node:path";
import { type Clock, systemClock } from "../clock.ts";
import { HookspoolError } from "../errors.ts";
import { LATEST_SCHEMA } from "./migrations.ts";

/** An open spool: one connection, the clock its writes use. */
export interface Spool {
  readonly db: Database;
  readonly path: string;
  readonly clock: Clock;
  close(): void;
}

export interface OpenOptions {
  /** Create the file (and its directory, mode 0700) when missing. Only migrate/dispatch/init do. */
  create?: boolean;
  /** busy_timeout: 10 s in the intake, 30 s elsewhere (spec 2). */
  busyTimeoutS?: number;
  clock?: Clock;
}

/** Open the spool at `path` with the pragmas of spec 2. */
export function openSpool(path: string, opts: OpenOptions = {}): Spool {
  const create = opts.create ?? false;
  if (!existsSync(path)) {
    if (!create) {
      throw new HookspoolError("E_SCHEMA", `no spool database at ${path}`, {
        hint: "run hookspool init or hookspool migrate first",
      });
    }
    const dir = dirname(path);
    if (!existsSync(dir)) {
      mkdirSync(dir, { recursive: true, mode: 0o700 });
      chmodSync(dir, 0o700);
    }
    closeSync(openSync(path, "a", 0o600));
    chmodSync(path, 0o600);
  }
  const db = new Database(path, { strict: true, create: false });
  try {
    db.run(`PRAGMA busy_timeout = ${Math.round((opts.busyTimeoutS ?? 30) * 1000)}`);
    const mode = db.query<{ journal_mode: string }, []>("PRAGMA journal_mode = WAL").get();
    if (mode?.journal_mode !== "wal") {
      throw new HookspoolError("E_CONFIG", `cannot put ${path} in WAL mode (got ${mode?.journal_mode})`, {
        hint: "the state directory must be on a local filesystem",
      });
    }
    db.run("PRAGMA synchronous = FULL");
    db.run("PRAGMA foreign_keys = ON");
  } catch (e) {
    db.close();
    throw e;
  }
  const clock = opts.clock ?? systemClock;
  return {
    db,
    path,
    clock,
    close: () => db.close(),
  };
}

/** PRAGMA user_version, which mirrors meta.schema_version. */
export function schemaVersion(db: Database): number {
  return db.query<{ user_version: number }, []>("PRAGMA user_version").get()?.user_version ?? 0;
}

/**
 * Refuse a schema this build does not speak (spec 17): older means "run hookspool migrate",
 * newer means a downgrade, which is not supported. Commands other than migrate and dispatch
 * call this instead of migrating.
 */
export function requireCurrentSchema(spool: Spool): void {
  const v = schemaVersion(spool.db);
  if (v < LATEST_SCHEMA) {
    throw new HookspoolError("E_SCHEMA", `${spool.path} has schema ${v}, this hookspool needs ${LATEST_SCHEMA}`, {
      hint: "run hookspool migrate",
    });
  }
  if (v > LATEST_SCHEMA) {
    throw new HookspoolError("E_SCHEMA", `${spool.path} has schema ${v}, newer than this hookspool (${LATEST_SCHEMA})`, {
      hint: "downgrade is not supported; run the newer hookspool or restore a backup",
    });
  }
}

/** PRAGMA quick_check: "ok" or the first problems found. */
export function quickCheck(db: Database): string[] {
  const rows = db.query<{ quick_check: string }, []>("PRAGMA quick_check").all();
  const lines = rows.map((r) => r.quick_check);
  return lines.length === 1 && lines[0] === "ok" ? [] : lines;
}
