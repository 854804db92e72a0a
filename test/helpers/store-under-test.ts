// The store as the conformance suite (test/store/*.case.ts) drives it, on either backend: a
// fresh, migrated database, the roles of src/store/api.ts over it as the factory builds them
// (sqliteStores / pgStores: what the services call, and all a case calls to act on the store),
// and rows read and written directly for a test's setup and its look at the result, with
// PostgreSQL's types normalised to SQLite's: BIGINT columns (strings from Bun.sql) as numbers,
// BYTEA as a plain Uint8Array. On SQLite the spool's clock is the facade's FakeClock; on
// PostgreSQL a case passes the FakeClock's now wherever SQLite would have read it.
import type { Database } from "bun:sqlite";
import type { FakeClock } from "../../src/clock.ts";
import type {
  DashboardStore,
  DispatchStore,
  IntakeStore,
  MaintenanceStore,
  OperatorStore,
  StatusStore,
} from "../../src/store/api.ts";
import { sqliteStores } from "../../src/store/open.ts";
import type { PgSpool } from "../../src/store/pg/db.ts";
import { freshSpool, type TestSpool } from "./spool.ts";
import { syncPayloadIndexes } from "../../src/store/sqlite/where.ts";
import type { IndexChanges } from "../../src/store/where.ts";

export type BackendName = "sqlite" | "postgres";

/**
 * What a backend can be asked that the other cannot: a case that depends on one of these runs
 * only where it holds (test.skipIf), and says why next to it.
 */
export interface Capabilities {
  /**
   * now_eff's wall clock is the injected clock (SQLite: the spool's Clock). On PostgreSQL it is
   * the database's clock_timestamp(), which a test cannot step back.
   */
  injectedWallClock: boolean;
  /**
   * Lease recovery knows the process's live workers and, at startup, takes every lease (the
   * flock says no other dispatcher runs). PostgreSQL's dispatchers share the database: recovery
   * takes only leases whose lease_until passed, whoever holds them.
   */
  singleDispatcher: boolean;
  /** A SQLite file: PRAGMAs, its WAL, a child process killed at a crash point over it. */
  sqliteFile: boolean;
}

export const CAPABILITIES: Record<BackendName, Capabilities> = {
  sqlite: { injectedWallClock: true, singleDispatcher: true, sqliteFile: true },
  postgres: { injectedWallClock: false, singleDispatcher: false, sqliteFile: false },
};

export type Row = Record<string, unknown>;
type Value = string | number | null | Uint8Array;

/** In a `where`: the column is not null. */
export const NOT_NULL = Object.freeze({ notNull: true as const });
/** A row filter: `column = value`, `column IS NULL` (null), `column IN (...)` (an array), or NOT_NULL. */
export type Where = Record<string, Value | readonly Value[] | typeof NOT_NULL>;

export interface RowsQuery {
  /** The columns to read (default: all). */
  cols?: readonly string[];
  where?: Where;
  /** e.g. "id" or "id DESC". */
  order?: string;
  limit?: number;
}

export interface StoreUnderTest {
  readonly name: BackendName;
  readonly caps: Capabilities;
  /** The injected clock (at T0): the `now` a case passes the roles on both backends. */
  readonly clock: FakeClock;
  /** The SQLite spool itself, for what only SQLite has (see Capabilities); null on PostgreSQL. */
  readonly sqlite: TestSpool | null;
  /** The PostgreSQL pool itself, for a dialect's own test (pg/*.test.ts); null on SQLite. */
  readonly pg: PgSpool | null;

  /**
   * The roles of src/store/api.ts over this store, as the factory builds them (sqliteStores /
   * pgStores): what the services call, and what a case calls to act on the store. The facade's
   * own methods below only read and write rows for a test's setup and its look at the result.
   */
  readonly intake: IntakeStore;
  readonly dispatch: DispatchStore;
  readonly operator: OperatorStore;
  readonly maintenance: MaintenanceStore;
  readonly status: StatusStore;
  readonly dashboard: DashboardStore;

  /** The batches row (every column), or null. */
  batch(id: number): Promise<Row | null>;
  /** The ids of a batch's events, in id order. */
  eventsOf(batchId: number): Promise<number[]>;

  /** The wall clock now_eff reads: the injected clock on SQLite, the database's on PostgreSQL. */
  wallNow(): Promise<number>;
  meta(key: string): Promise<string | null>;
  setMeta(key: string, value: string): Promise<void>;

  count(table: string, where?: Where): Promise<number>;
  rows<T extends Row = Row>(table: string, q?: RowsQuery): Promise<T[]>;
  /** The first row of rows(), or null. */
  row<T extends Row = Row>(table: string, q?: RowsQuery): Promise<T | null>;
  /** Insert rows (all with the same columns) in one transaction; their ids, for a table that has one. */
  insert(table: string, rows: readonly Row[]): Promise<number[]>;
  update(table: string, set: Row, where: Where): Promise<number>;
  /** The values of a column's `CHECK (<column> IN (...))` in the schema, sorted. */
  checkValues(table: string, column: string): Promise<string[]>;
  /** Migrate's step for the payload indexes: one per path of `paths`, none for another (dryRun: what it would do). */
  payloadIndexes(paths: readonly string[], dryRun?: boolean): Promise<IndexChanges>;
  /** The payload paths whose values the writes give as read in the process (PostgreSQL; SQLite has no use for them). */
  readPaths(paths: readonly string[]): Promise<void>;
  close(): Promise<void>;
}

export const IDENT = /^[a-z_]+$/;
export const ORDER = /^[a-z_]+( (ASC|DESC))?(, [a-z_]+( (ASC|DESC))?)*$/;

export function ident(s: string): string {
  if (!IDENT.test(s)) throw new Error(`not a plain identifier: ${s}`);
  return s;
}

/** SELECT/UPDATE text for both dialects: `place(i)` spells the i-th (1-based) parameter. */
export function whereSql(where: Where | undefined, place: (i: number) => string, params: unknown[]): string {
  const parts: string[] = [];
  for (const [col, v] of Object.entries(where ?? {})) {
    const c = ident(col);
    if (v === null) parts.push(`${c} IS NULL`);
    else if (v === NOT_NULL) parts.push(`${c} IS NOT NULL`);
    else if (Array.isArray(v)) {
      if (v.length === 0) parts.push("1 = 0");
      else parts.push(`${c} IN (${v.map((x) => (params.push(x), place(params.length))).join(", ")})`);
    } else {
      params.push(v);
      parts.push(`${c} = ${place(params.length)}`);
    }
  }
  return parts.length ? ` WHERE ${parts.join(" AND ")}` : "";
}

export function selectSql(table: string, q: RowsQuery, place: (i: number) => string, params: unknown[]): string {
  const cols = q.cols ? q.cols.map(ident).join(", ") : "*";
  let text = `SELECT ${cols} FROM ${ident(table)}${whereSql(q.where, place, params)}`;
  if (q.order) {
    if (!ORDER.test(q.order)) throw new Error(`not a plain order: ${q.order}`);
    text += ` ORDER BY ${q.order}`;
  }
  if (q.limit !== undefined) text += ` LIMIT ${Math.floor(q.limit)}`;
  return text;
}

/** The values of `CHECK (<column> IN (...))` in SQLite's CREATE TABLE text. */
function sqliteCheckList(sql: string, column: string): string[] {
  const m = new RegExp(`CHECK\\s*\\(\\s*(?:${column} IS NULL OR\\s+)?${column}\\s+IN\\s*\\(([^)]*)\\)`, "i").exec(sql);
  if (!m) throw new Error(`no CHECK on ${column}`);
  return [...m[1].matchAll(/'([^']*)'/g)].map((x) => x[1]).sort();
}

// ---------------------------------------------------------------------------------------------
// SQLite

/** A fresh, migrated SQLite spool (a WAL file in a temp home) behind the facade. */
export async function openSqliteStore(): Promise<StoreUnderTest> {
  const t = freshSpool();
  const { spool, clock } = t;
  const db: Database = spool.db;
  const place = () => "?";
  const all = <T>(text: string, params: unknown[]): T[] => db.query(text).all(...(params as never[])) as T[];
  let closed = false;
  const roles = sqliteStores(spool);
  const store: StoreUnderTest = {
    name: "sqlite",
    caps: CAPABILITIES.sqlite,
    clock,
    sqlite: t,
    pg: null,
    intake: roles.intake(),
    dispatch: await roles.dispatch("test:1"),
    operator: roles.operator(),
    maintenance: roles.maintenance(),
    status: roles.status(),
    dashboard: roles.dashboard(),
    async batch(id) {
      return (db.query("SELECT * FROM batches WHERE id = ?").get(id) as Row | null) ?? null;
    },
    async eventsOf(batchId) {
      return (db.query("SELECT id FROM events WHERE batch_id = ? ORDER BY id").all(batchId) as { id: number }[]).map(
        (r) => r.id,
      );
    },
    async wallNow() {
      return clock.now();
    },
    async meta(key) {
      return (
        (db.query("SELECT value FROM meta WHERE key = ?").get(key) as { value: string | null } | null)?.value ?? null
      );
    },
    async setMeta(key, value) {
      db.query(
        "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
      ).run(key, value);
    },
    async count(table, where) {
      const params: unknown[] = [];
      const text = `SELECT COUNT(*) AS n FROM ${ident(table)}${whereSql(where, place, params)}`;
      return all<{ n: number }>(text, params)[0].n;
    },
    async rows<T extends Row>(table: string, rq: RowsQuery = {}) {
      const params: unknown[] = [];
      return all<T>(selectSql(table, rq, place, params), params);
    },
    async row<T extends Row>(table: string, rq: RowsQuery = {}) {
      return ((await store.rows<T>(table, { ...rq, limit: 1 }))[0] ?? null) as T | null;
    },
    async insert(table, rows) {
      if (rows.length === 0) return [];
      const cols = Object.keys(rows[0]).map(ident);
      const stmt = db.query(
        `INSERT INTO ${ident(table)} (${cols.join(", ")}) VALUES (${cols.map(() => "?").join(", ")})`,
      );
      return db
        .transaction(() => rows.map((r) => Number(stmt.run(...(cols.map((c) => r[c]) as never[])).lastInsertRowid)))
        .immediate();
    },
    async update(table, set, where) {
      const params: unknown[] = [];
      const sets = Object.keys(set).map((c) => (params.push(set[c]), `${ident(c)} = ?`));
      return db
        .query(`UPDATE ${ident(table)} SET ${sets.join(", ")}${whereSql(where, place, params)}`)
        .run(...(params as never[])).changes;
    },
    async checkValues(table, column) {
      const sql = (
        db.query("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?").get(table) as { sql: string }
      ).sql;
      return sqliteCheckList(sql, column);
    },
    async payloadIndexes(paths, dryRun = false) {
      return syncPayloadIndexes(spool, paths, { dryRun });
    },
    async readPaths() {},
    async close() {
      if (closed) return;
      closed = true;
      spool.close();
    },
  };
  return store;
}
