// The store: every SQL statement of hookspool lives in src/store/ (and migrations/), behind
// operations named for what they do. Nothing outside this folder imports bun:sqlite or touches a
// connection (test/layers.test.ts holds it to that), so a second backend is a contained change.
//
// The rule for what an operation takes:
// - A write is one transaction, BEGIN IMMEDIATE, taken by the operation itself (`enqueue`,
//   `claimBatch`, `recordOutcome`): it holds the write lock for milliseconds, and the answer to
//   a sender or the mark of a delivery follows its COMMIT. Where another store operation must
//   compose it inside its own transaction there is a `...Tx` twin taking the connection.
// - A read is one statement (in WAL mode each statement sees one consistent snapshot) taking
//   the SqliteSpool; it never waits for a writer.
// - The services' connection never sleeps in a statement for another process's lock
//   (waitOffLoop: busy_timeout 0); their writes wait in the spool's line instead (wait.ts).
// - Every statement is prepared once per connection and reused (`prepared`).
//
// This file opens the spool: file modes, pragmas and the schema-version gate.
import { Database, type SQLQueryBindings, type Statement } from "bun:sqlite";
import { chmodSync, closeSync, existsSync, mkdirSync, openSync } from "node:fs";
import { dirname } from "node:path";
import { type Clock, systemClock } from "../../clock.ts";
import { HookspoolError } from "../../errors.ts";
import { LATEST_SCHEMA } from "./migrate.ts";
import { LockLine } from "./wait.ts";

/** An open spool: one connection, the clock its writes use, the line its writes wait in for the lock. */
export interface SqliteSpool {
  readonly db: Database;
  readonly path: string;
  readonly clock: Clock;
  readonly line: LockLine;
  close(): void;
}

export interface OpenOptions {
  /** Create the file (and its directory, mode 0700) when missing. Only migrate/dispatch/init do. */
  create?: boolean;
  /** busy_timeout: 10 s in the intake, 30 s elsewhere. */
  busyTimeoutS?: number;
  clock?: Clock;
}

/**
 * Open the spool at `path` with its pragmas: busy_timeout, journal_mode = WAL (an error where
 * the filesystem cannot do it), synchronous = FULL and foreign_keys = ON.
 */
export function openSpool(path: string, opts: OpenOptions = {}): SqliteSpool {
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
    const mode = prepared<{ journal_mode: string }, []>(db, "PRAGMA journal_mode = WAL").get();
    if (mode?.journal_mode !== "wal") {
      throw new HookspoolError("E_CONFIG", `cannot put ${path} in WAL mode (got ${mode?.journal_mode})`, {
        hint: "the state directory must be on a local filesystem",
      });
    }
    db.run("PRAGMA synchronous = FULL");
    db.run("PRAGMA foreign_keys = ON");
  } catch (e) {
    closeConnection(db);
    throw e;
  }
  const clock = opts.clock ?? systemClock;
  return {
    db,
    path,
    clock,
    line: new LockLine(),
    close: () => closeConnection(db),
  };
}

/**
 * From now on, this connection waits for the write lock off the event loop: busy_timeout 0, and
 * the store's writes wait in its line up to `seconds` (wait.ts). The services' connections do,
 * once opened (migrations and the integrity check ran with the connection's own wait).
 */
export function waitOffLoop(spool: SqliteSpool, seconds: number): void {
  spool.db.run("PRAGMA busy_timeout = 0");
  spool.line.waitUpTo(seconds);
}

const statements = new WeakMap<Database, Map<string, Statement>>();

/**
 * The statement for `sql` on this connection, prepared on first use and kept for the life of
 * the connection. (Database.query keeps only the last 20 distinct statements, fewer than the
 * store runs, so a steady enqueue-and-tick loop would compile a third of them again and again.)
 */
/**
 * `fn` for each item, each under a savepoint of its own inside one BEGIN IMMEDIATE transaction:
 * one that throws is undone alone and its error stands in its place. A failure that ends the
 * whole transaction (a full disk, an I/O error) or a failed COMMIT throws for all. `beforeCommit`
 * runs last inside the transaction (a crash point).
 */
export function eachInSavepoint<T, R>(
  db: Database,
  items: readonly T[],
  fn: (item: T) => R,
  beforeCommit?: () => void,
): (R | Error)[] {
  const t = tx(db);
  return t.immediate((): (R | Error)[] => {
    const out = items.map((item) => {
      try {
        return t.nested(() => fn(item));
      } catch (e) {
        if (!db.inTransaction) throw e;
        return e instanceof Error ? e : new Error(String(e));
      }
    });
    beforeCommit?.();
    return out;
  });
}

export function prepared<R = unknown, P extends SQLQueryBindings | SQLQueryBindings[] = SQLQueryBindings[]>(
  db: Database,
  sql: string,
): Statement<R, P extends unknown[] ? P : [P]> {
  let cache = statements.get(db);
  if (!cache) {
    cache = new Map();
    statements.set(db, cache);
  }
  let st = cache.get(sql);
  if (!st) {
    st = db.prepare(sql);
    cache.set(sql, st);
  }
  return st as unknown as Statement<R, P extends unknown[] ? P : [P]>;
}

/** What `tx` gives: a connection's transactions, begun through one wrapper. */
export interface Transactions {
  immediate<T>(fn: () => T): T;
  nested<T>(fn: () => T): T;
}

const transactions = new WeakMap<Database, Transactions>();

/**
 * Run `fn` in a transaction of `db`: BEGIN IMMEDIATE ... COMMIT when none is open (`immediate`),
 * else a SAVEPOINT that is rolled back alone when `fn` throws (`nested`, or `immediate` inside
 * another). bun:sqlite builds a wrapper's methods anew on every db.transaction call; the busy
 * paths (a group commit, a tick's claims, an outcome) share one per connection instead.
 */
export function tx(db: Database): Transactions {
  let t = transactions.get(db);
  if (!t) {
    const wrapper = db.transaction((fn: () => unknown) => fn());
    t = { immediate: (fn) => wrapper.immediate(fn) as never, nested: (fn) => wrapper(fn) as never };
    transactions.set(db, t);
  }
  return t;
}

/**
 * Finalize this connection's statements, then close it. A statement left unfinalized keeps the
 * connection open behind the caller's back (with its locks), so the next opener of the file
 * would wait on a connection nobody holds any more.
 */
export function closeConnection(db: Database): void {
  const cache = statements.get(db);
  if (cache) {
    for (const st of cache.values()) st.finalize();
    statements.delete(db);
  }
  db.close();
}

/** PRAGMA user_version, which mirrors meta.schema_version. */
export function schemaVersion(spool: SqliteSpool): number {
  const db = spool.db;
  return prepared<{ user_version: number }, []>(db, "PRAGMA user_version").get()?.user_version ?? 0;
}

/**
 * Refuse a schema this build does not speak: older means "run hookspool migrate",
 * newer means a downgrade, which is not supported. Commands other than migrate and dispatch
 * call this instead of migrating.
 */
export function requireCurrentSchema(spool: SqliteSpool): void {
  const v = schemaVersion(spool);
  if (v < LATEST_SCHEMA) {
    throw new HookspoolError("E_SCHEMA", `${spool.path} has schema ${v}, this hookspool needs ${LATEST_SCHEMA}`, {
      hint: "run hookspool migrate",
    });
  }
  if (v > LATEST_SCHEMA) {
    throw new HookspoolError(
      "E_SCHEMA",
      `${spool.path} has schema ${v}, newer than this hookspool (${LATEST_SCHEMA})`,
      {
        hint: "downgrade is not supported; run the newer hookspool or restore a backup",
      },
    );
  }
}

// The corruption error and its test are neutral (../corrupt.ts); re-exported for this folder's readers.
import { CorruptSpool, isCorruption } from "../corrupt.ts";
export { CorruptSpool, isCorruption };

/**
 * Open the spool and run quick_check: a corrupt file is a CorruptSpool (exit 2), never moved
 * aside or started afresh. The dispatcher and `hookspool check` open a spool this way.
 */
export function openVerified(path: string, opts: OpenOptions = {}): SqliteSpool {
  let spool: SqliteSpool;
  try {
    spool = openSpool(path, opts);
  } catch (e) {
    if (isCorruption(e)) throw new CorruptSpool(path, [String((e as { code?: unknown }).code ?? (e as Error).message)]);
    throw e;
  }
  try {
    const problems = quickCheck(spool);
    if (problems.length) throw new CorruptSpool(path, problems);
    noteIntegrityCheck(spool);
    return spool;
  } catch (e) {
    spool.close();
    if (isCorruption(e)) throw new CorruptSpool(path, [String((e as { code?: unknown }).code ?? (e as Error).message)]);
    throw e;
  }
}

/**
 * Record that quick_check passed now (meta integrity_checked_at), so status can say when the
 * file was last read through. Best effort: a spool not yet migrated, or one that refuses the
 * write, keeps no record and loses nothing.
 */
export function noteIntegrityCheck(spool: SqliteSpool): void {
  try {
    spool.db.run(
      "INSERT INTO meta (key, value) VALUES ('integrity_checked_at', ?) ON CONFLICT (key) DO UPDATE " +
        "SET value = excluded.value",
      [String(spool.clock.now())],
    );
  } catch {
    // no meta table yet, or a read-only file: nothing to record
  }
}

/** PRAGMA quick_check: "ok" or the first problems found. */
export function quickCheck(spool: SqliteSpool): string[] {
  const db = spool.db;
  const rows = prepared<{ quick_check: string }, []>(db, "PRAGMA quick_check").all();
  const lines = rows.map((r) => r.quick_check);
  return lines.length === 1 && lines[0] === "ok" ? [] : lines;
}
