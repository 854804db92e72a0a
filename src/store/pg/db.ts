// The scale-out backend's connection: PostgreSQL through Bun's built-in client (Bun.sql), a
// small pool per process. Every statement of this backend lives under src/store/pg/, as every
// SQLite statement lives under src/store/. Times are the same Unix seconds as on SQLite; ids
// come back from BIGINT columns as strings and leave here as numbers.
import { SQL } from "bun";
import { HookspoolError } from "../../errors.ts";

/** How to reach the server: a URL (postgres://user:password@host/db, maybe ?host=/socket/dir), or a unix socket. */
export type PgTarget = { url: string } | { path: string; user: string; database: string };

/** A transaction (or the pool) that runs tagged-template statements. */
export type Tx = SQL;

export interface PgOptions {
  /** Connections in this process's pool (an intake's group commits, a dispatcher's claims and marks). */
  max?: number;
  /** Seconds a pool connection lives before it is replaced (POOL_LIFETIME_S). */
  lifetimeS?: number;
}

/**
 * A pool connection is replaced after five minutes, so the generic plans it made (one per
 * statement, with the table sizes of that moment) are made again: a dispatcher started on a
 * young database plans its reads of attempts and the journal as scans of tables that were
 * empty, and a busy connection, never idle for long, would keep those plans while the tables
 * grow. A connection busy at that moment finishes its statement, transaction or reservation
 * first; the LISTEN connection and the maintenance lock's session are not pool connections.
 */
export const POOL_LIFETIME_S = 300;

export class PgSpool {
  readonly sql: SQL;
  /**
   * The payload paths whose values the writes give the server as read here (events.path_values,
   * store/paths.ts); none until readPaths says which.
   */
  paths: readonly string[] = [];

  constructor(
    private readonly target: PgTarget,
    o: PgOptions = {},
  ) {
    this.sql = client(target, o.max ?? 4, o.lifetimeS ?? POOL_LIFETIME_S);
  }

  /**
   * A client of one connection of its own, outside the pool (the maintenance lock's session:
   * held for as long as this process leads, it must never take a connection the work needs).
   */
  single(): SQL {
    return client(this.target, 1);
  }

  /** The database's clock, in Unix seconds: the wall-clock guard of every host uses this one. */
  async now(): Promise<number> {
    const [r] = await this.sql`SELECT EXTRACT(EPOCH FROM clock_timestamp())::float8 AS t`;
    return Number(r.t);
  }

  /**
   * Give the server the values at `paths` as this process reads them, in a UTF8 database (in
   * another, jsonb reads a \u escape of a character outside ASCII otherwise than JSON.parse does).
   */
  async readPaths(paths: readonly string[]): Promise<void> {
    if (paths.length === 0) {
      this.paths = [];
      return;
    }
    const [r] = await this.sql`SELECT current_setting('server_encoding') = 'UTF8' AS utf8`;
    this.paths = r.utf8 ? [...paths] : [];
  }

  /** Whether the server answers at all (check uses this before the schema version). */
  async ping(): Promise<void> {
    try {
      await this.sql`SELECT 1`;
    } catch (e) {
      // The class and SQLSTATE only: a client's message may quote the URL, which may hold a password.
      const { code, errno } = e as { code?: string; errno?: string };
      throw new HookspoolError(
        "E_CONFIG",
        `cannot reach PostgreSQL (${[code ?? (e as Error).name, errno].filter(Boolean).join(" ")})`,
        { key: "spool.url" },
      );
    }
  }

  async close(): Promise<void> {
    await this.sql.close();
  }

  /**
   * This spool seen from inside transaction `tx`: every statement runs in it, and a function
   * that opens a transaction of its own (`sql.begin`) gets a savepoint of `tx` instead, so
   * several operations commit, or roll back, as one.
   */
  within(tx: Tx): PgSpool {
    const inner = new Proxy(tx, {
      get(t, prop) {
        if (prop === "begin") return (fn: (sp: Tx) => Promise<unknown>) => (t as TxWithSavepoint).savepoint(fn);
        const v = Reflect.get(t, prop, t);
        return typeof v === "function" ? v.bind(t) : v;
      },
    });
    return Object.create(this, { sql: { value: inner } }) as PgSpool;
  }
}

/** Bun.sql's transaction, which can open a savepoint. */
export type TxWithSavepoint = Tx & { savepoint<T>(fn: (sp: Tx) => Promise<T>): Promise<T> };

/**
 * Every connection plans each statement once, generically (plan_cache_mode), and runs that plan
 * with each call's values. The statements of this backend differ from call to call only in
 * their parameters, most of them arrays of ids whose length would make PostgreSQL plan them
 * anew on every call (measured: planning took more server CPU than running, half a millisecond
 * a batch delivered, more than a millisecond a group committed). And no statement is compiled
 * by JIT: a generic plan's estimates (a hundred rows for every JSON list, the branches a CASE
 * never runs) pass jit_above_cost once the history holds tens of thousands of batches, and the
 * server then spent some 180 ms compiling each claim that runs in under one.
 */
const SESSION = { plan_cache_mode: "force_generic_plan", jit: "off" };

function client(target: PgTarget, max: number, maxLifetime = 0): SQL {
  const common = {
    adapter: "postgres" as const,
    max,
    idleTimeout: 30,
    connectionTimeout: 10,
    maxLifetime,
    connection: SESSION,
  };
  try {
    return "url" in target
      ? new SQL(target.url, common)
      : new SQL({ ...common, path: target.path, user: target.user, database: target.database });
  } catch (e) {
    // The client's message may quote the URL: only its class.
    throw new HookspoolError("E_CONFIG", `spool.url is not a URL PostgreSQL's client accepts (${(e as Error).name})`, {
      key: "spool.url",
    });
  }
}

/** A BIGINT as it arrives (a string), or null, as a number. */
export function num(v: unknown): number {
  return typeof v === "number" ? v : Number(v);
}

export function numOrNull(v: unknown): number | null {
  return v === null || v === undefined ? null : num(v);
}

/** A statement written with SQLite's `$name` parameters (the shared filter terms), with PostgreSQL's numbered ones. */
export function numbered(
  sql: string,
  params: Record<string, string | number | null>,
): { text: string; values: (string | number | null)[] } {
  const values: (string | number | null)[] = [];
  const at = new Map<string, number>();
  const text = sql.replace(/\$([a-z_]+)/g, (_, name: string) => {
    if (!at.has(name)) {
      values.push(params[name]);
      at.set(name, values.length);
    }
    return `$${at.get(name)}`;
  });
  return { text, values };
}
