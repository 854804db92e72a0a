// A fake-clock world on either backend: the factory's roles (backends.ts) over one spool, a
// FakeClock that now_eff follows on both, and a backend-neutral reader of rows. On SQLite the
// spool reads the FakeClock itself (now_eff = max(clock, meta last_tick_at)), starting at T0. On
// PostgreSQL now_eff is GREATEST(the database's clock, meta last_tick_at): the FakeClock starts a
// day ahead of the real time, so it is always the greater, and each time a dispatch store asks
// for now_eff after the clock moved, the world first writes last_tick_at = the clock (moved
// forward only, as the dispatchers move it). What such a world cannot show on PostgreSQL (the
// clock going back, ages the database's clock computes, SQLite's pragmas) a suite skips there.
import { afterEach } from "bun:test";
import { FakeClock, systemClock } from "../../src/clock.ts";
import type { DispatchStore } from "../../src/store/api.ts";
import type { EnqueueResult, NewEvent } from "../../src/store/enqueue.ts";
import type { PgSpool } from "../../src/store/pg/db.ts";
import { type Backend, type BackendName, onBothBackends } from "./backends.ts";
import { T0 } from "./spool.ts";

/** Rows read and written with `?` placeholders, the same SQL on both backends (plain SELECT, UPDATE, INSERT). */
export interface Rows {
  get(sql: string, ...params: unknown[]): Promise<Record<string, unknown> | null>;
  all(sql: string, ...params: unknown[]): Promise<Record<string, unknown>[]>;
  run(sql: string, ...params: unknown[]): Promise<void>;
}

export interface World extends Backend {
  clock: FakeClock;
  /** Where the clock started: T0 on SQLite, a day ahead of the real time on PostgreSQL. */
  t0: number;
  rows: Rows;
  /**
   * The spool refuses every write from now (true) until told otherwise: SQLite's PRAGMA
   * query_only on the one connection; on PostgreSQL a trigger on every table raising a read-only
   * transaction's SQLSTATE (25006), which is what a standby says. Its class is `readOnlyClass`.
   */
  refuseWrites(on: boolean): Promise<void>;
  /** The class a refused write is counted under: SQLITE_READONLY, or POSTGRES_25006. */
  readOnlyClass: string;
  /** One event, through the intake's role, at the clock's now. */
  enqueue(e: NewEvent, now?: number): Promise<EnqueueResult>;
}

/** `dir`: where SQLite's spool.db goes (a home's, so the CLI and an intake of that home open it too). */
export type OpenWorld = (o?: { dir?: string }) => Promise<World>;

/** PostgreSQL's start: a day or more ahead of the real time, at T0's time of day (a window aligned to T0 still is). */
export function pgStart(realNow: number): number {
  const day = 86400;
  const at = Math.ceil(realNow) + day;
  return at + ((((T0 - at) % day) + day) % day);
}

/** `cases(open)` on SQLite and on PostgreSQL (skipped, saying so, without one), each open a fresh world. */
export function onBothWorlds(cases: (open: OpenWorld, backend: BackendName) => void): void {
  onBothBackends((open, backend) => {
    // Each case's worlds are closed after it (closing twice is safe), so a case need not.
    const opened: World[] = [];
    afterEach(async () => {
      for (const w of opened.splice(0)) await w.close();
    });
    cases(async (o = {}) => {
      const clock = new FakeClock(backend === "sqlite" ? T0 : pgStart(systemClock.now()));
      const w = worldOver(await open({ clock, dir: o.dir }), clock);
      opened.push(w);
      return w;
    }, backend);
  });
}

function worldOver(b: Backend, clock: FakeClock): World {
  const t0 = clock.now();
  const rows = b.pg ? pgRows(b.pg) : sqliteRows(b);
  let synced = Number.NaN;
  const pg = b.pg;
  // PostgreSQL: meta last_tick_at follows the FakeClock forward before now_eff is read.
  const follow = async () => {
    const at = clock.now();
    if (!pg || at === synced) return;
    // Past refuseWrites's triggers: the clock is the test's, not a write of the spool under test.
    await pg.sql.begin(async (tx) => {
      await tx`SET LOCAL session_replication_role = replica`;
      await tx`INSERT INTO meta (key, value) VALUES ('last_tick_at', ${String(at)})
        ON CONFLICT (key) DO UPDATE SET value = GREATEST(
          CASE WHEN meta.value ~ '^[-+0-9.eE]+$' THEN meta.value::float8 END, excluded.value::float8)::text`;
    });
    synced = at;
  };
  const handedOut: DispatchStore[] = [];
  let closed = false;
  const dispatch = async (): Promise<DispatchStore> => {
    const inner = await b.dispatch();
    handedOut.push(inner);
    if (!pg) return inner;
    return {
      ...inner,
      effectiveNow: async () => {
        await follow();
        return inner.effectiveNow();
      },
    };
  };
  return {
    ...b,
    clock,
    t0,
    rows,
    dispatch,
    refuseWrites: async (on) => {
      if (pg) await refusePg(pg, on);
      else b.spool?.db.run(`PRAGMA query_only = ${on ? "ON" : "OFF"}`);
    },
    readOnlyClass: pg ? "POSTGRES_25006" : "SQLITE_READONLY",
    // PostgreSQL: a dispatch store may hold the maintenance lock on a connection of its own.
    close: async () => {
      if (closed) return;
      closed = true;
      for (const s of handedOut) await s.release("testhost", 4242).catch(() => {});
      await b.close();
    },
    enqueue: async (e, now = clock.now()) => (await b.intake.enqueueAll([e], now))[0],
  };
}

function sqliteRows(b: Backend): Rows {
  const db = () => {
    if (!b.spool) throw new Error("no SQLite spool");
    return b.spool.db;
  };
  type P = import("bun:sqlite").SQLQueryBindings[];
  return {
    get: async (sql, ...params) =>
      (db()
        .query(sql)
        .get(...(params as P)) as Record<string, unknown> | null) ?? null,
    all: async (sql, ...params) =>
      db()
        .query(sql)
        .all(...(params as P)) as Record<string, unknown>[],
    run: async (sql, ...params) => void db().run(sql, params as P),
  };
}

/**
 * PostgreSQL's rows shaped as SQLite's: `?` becomes $n, and a number the client hands back as a
 * string (BIGINT, COUNT, SUM) is a number again, unless its column is text in the schema.
 */
function pgRows(pg: PgSpool): Rows {
  let textColumns: Set<string> | null = null;
  const texts = async () => {
    if (!textColumns) {
      // Text in every table that has it (dispatchers.id is text, every other id a number).
      const rs = (await pg.sql`SELECT column_name FROM information_schema.columns WHERE table_schema = 'public'
          GROUP BY column_name HAVING bool_and(data_type IN ('text', 'character varying'))`) as {
        column_name: string;
      }[];
      textColumns = new Set(rs.map((r) => r.column_name));
    }
    return textColumns;
  };
  const numbered = (sql: string) => {
    let n = 0;
    return sql.replace(/\?/g, () => `$${++n}`);
  };
  const shape = async (rs: Record<string, unknown>[]) => {
    const text = await texts();
    return rs.map((r) => {
      const out: Record<string, unknown> = {};
      for (const [k, v] of Object.entries(r))
        out[k] = typeof v === "string" && !text.has(k) && /^-?\d+(\.\d+)?$/.test(v) ? Number(v) : v;
      return out;
    });
  };
  const all = async (sql: string, ...params: unknown[]) =>
    shape([...((await pg.sql.unsafe(numbered(sql), params as never[])) as Record<string, unknown>[])]);
  return {
    get: async (sql, ...params) => (await all(sql, ...params))[0] ?? null,
    all,
    run: async (sql, ...params) => void (await pg.sql.unsafe(numbered(sql), params as never[])),
  };
}

/** refuseWrites on PostgreSQL: a statement trigger on every table of the schema, or none. */
async function refusePg(pg: PgSpool, on: boolean): Promise<void> {
  const tables = (
    (await pg.sql`SELECT table_name FROM information_schema.tables
        WHERE table_schema = 'public' AND table_type = 'BASE TABLE'`) as { table_name: string }[]
  ).map((r) => r.table_name);
  await pg.sql.begin(async (tx) => {
    if (on)
      await tx.unsafe(`CREATE OR REPLACE FUNCTION test_refuse_writes() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN RAISE EXCEPTION 'cannot execute % in a read-only transaction', TG_OP USING ERRCODE = '25006'; END $$`);
    for (const t of tables) {
      await tx.unsafe(`DROP TRIGGER IF EXISTS test_refuse_writes ON "${t}"`);
      if (on)
        await tx.unsafe(`CREATE TRIGGER test_refuse_writes BEFORE INSERT OR UPDATE OR DELETE ON "${t}"
          FOR EACH STATEMENT EXECUTE FUNCTION test_refuse_writes()`);
    }
  });
}
