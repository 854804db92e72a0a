// The conformance suite's facade on PostgreSQL (see store-under-test.ts): each test on a fresh
// database copied from one migrated template, the factory's roles (pgStores) over its pool, a
// FakeClock whose now a case passes the roles, rows read back with SQLite's types.
import { SQL } from "bun";
import { PgSpool } from "../../src/store/pg/db.ts";
import { migratePg } from "../../src/store/pg/migrate.ts";
import { syncPayloadIndexesPg } from "../../src/store/pg/where.ts";
import { pgStores } from "../../src/store/open.ts";
import type { PgServer } from "./pg.ts";
import { FakeClock } from "../../src/clock.ts";
import { T0 } from "./spool.ts";
import {
  CAPABILITIES,
  type Row,
  type RowsQuery,
  type StoreUnderTest,
  ident,
  selectSql,
  whereSql,
} from "./store-under-test.ts";

/** Per table, its BIGINT and BYTEA columns (the same schema in every database of the suite). */
type ColumnTypes = Map<string, { bigint: Set<string>; bytea: Set<string>; hasId: boolean }>;
let columnTypes: ColumnTypes | null = null;

async function loadColumnTypes(pg: PgSpool): Promise<ColumnTypes> {
  if (columnTypes) return columnTypes;
  const rows = (await pg.sql`SELECT table_name, column_name, data_type FROM information_schema.columns
      WHERE table_schema = 'public'`) as {
    table_name: string;
    column_name: string;
    data_type: string;
  }[];
  const out: ColumnTypes = new Map();
  for (const r of rows) {
    let t = out.get(r.table_name);
    if (!t) out.set(r.table_name, (t = { bigint: new Set(), bytea: new Set(), hasId: false }));
    if (r.data_type === "bigint") t.bigint.add(r.column_name);
    if (r.data_type === "bytea") t.bytea.add(r.column_name);
    if (r.column_name === "id") t.hasId = true;
  }
  columnTypes = out;
  return out;
}

let databases = 0;
const templates = new WeakMap<PgServer, Promise<string>>();

/** A database migrated once per server, copied for each test (a copy is faster than a migration). */
function migratedTemplate(server: PgServer): Promise<string> {
  let t = templates.get(server);
  if (!t) {
    t = (async () => {
      const name = `suite_template_${process.pid}`;
      await server.createDatabase(name);
      const pg = new PgSpool({ path: server.socket, user: server.user, database: name });
      try {
        await migratePg(pg, "0123456789ab");
        await loadColumnTypes(pg);
      } finally {
        // A template must have no connection while it is copied.
        await pg.close();
      }
      return name;
    })();
    templates.set(server, t);
  }
  return t;
}

/**
 * A fresh, migrated database on `server` behind the facade, with a FakeClock at T0 for the
 * `now` every PostgreSQL operation takes.
 */
export async function openPgStore(server: PgServer): Promise<StoreUnderTest> {
  const template = await migratedTemplate(server);
  const database = `suite${++databases}_${process.pid}`;
  const admin = new SQL({ path: server.socket, user: server.user, database: "postgres", adapter: "postgres", max: 1 });
  try {
    await admin.unsafe(`CREATE DATABASE "${database}" TEMPLATE "${template}"`);
  } finally {
    await admin.close();
  }
  const pg = new PgSpool({ path: server.socket, user: server.user, database });
  const types = await loadColumnTypes(pg);
  const clock = new FakeClock(T0);
  const place = (i: number) => `$${i}`;

  /** A row with SQLite's types. */
  const normal = (table: string, r: Row): Row => {
    const t = types.get(table);
    const out: Row = {};
    for (const [k, v] of Object.entries(r)) {
      if (t?.bigint.has(k) && typeof v === "string") out[k] = Number(v);
      else if (v instanceof Uint8Array) out[k] = new Uint8Array(v);
      else out[k] = v;
    }
    return out;
  };
  const query = async (text: string, params: unknown[]) =>
    (await pg.sql.unsafe(text, params as never[])) as Row[] & { count: number };

  const roles = pgStores(pg);
  const store: StoreUnderTest = {
    name: "postgres",
    caps: CAPABILITIES.postgres,
    clock,
    sqlite: null,
    pg,
    intake: roles.intake(),
    dispatch: await roles.dispatch("test:1"),
    operator: roles.operator(),
    maintenance: roles.maintenance(),
    status: roles.status(),
    dashboard: roles.dashboard(),
    async batch(id) {
      return store.row("batches", { where: { id } });
    },
    async eventsOf(batchId) {
      return (
        await store.rows<{ id: number }>("events", { cols: ["id"], where: { batch_id: batchId }, order: "id" })
      ).map((r) => r.id);
    },
    wallNow: () => pg.now(),
    async meta(k) {
      const r = await store.row<{ value: string | null }>("meta", { cols: ["value"], where: { key: k } });
      return r?.value ?? null;
    },
    async setMeta(k, value) {
      await pg.sql`INSERT INTO meta (key, value) VALUES (${k}, ${value})
        ON CONFLICT (key) DO UPDATE SET value = excluded.value`;
    },
    async count(table, where) {
      const params: unknown[] = [];
      const [{ n }] = (await query(
        `SELECT COUNT(*)::int AS n FROM ${ident(table)}${whereSql(where, place, params)}`,
        params,
      )) as unknown as { n: number }[];
      return n;
    },
    async rows<T extends Row>(table: string, rq: RowsQuery = {}) {
      const params: unknown[] = [];
      const rows = (await query(selectSql(table, rq, place, params), params)).map((r) => normal(table, r));
      // A whole row as SQLite's: without the column only PostgreSQL has, unless it was asked for.
      if (table === "events" && !rq.cols) for (const r of rows) delete r.path_values;
      return rows as T[];
    },
    async row<T extends Row>(table: string, rq: RowsQuery = {}) {
      return ((await store.rows<T>(table, { ...rq, limit: 1 }))[0] ?? null) as T | null;
    },
    async insert(table, rows) {
      if (rows.length === 0) return [];
      const cols = Object.keys(rows[0]).map(ident);
      const returning = types.get(table)?.hasId ? " RETURNING id" : "";
      const per = Math.max(1, Math.floor(30_000 / cols.length));
      return pg.sql.begin(async (tx) => {
        const ids: number[] = [];
        for (let i = 0; i < rows.length; i += per) {
          const chunk = rows.slice(i, i + per);
          const params: unknown[] = [];
          const values = chunk.map((r) => `(${cols.map((c) => (params.push(r[c]), `$${params.length}`)).join(", ")})`);
          const out = (await tx.unsafe(
            `INSERT INTO ${ident(table)} (${cols.join(", ")}) VALUES ${values.join(", ")}${returning}`,
            params as never[],
          )) as { id?: string }[];
          ids.push(...(returning ? out.map((r) => Number(r.id)) : chunk.map(() => 0)));
        }
        return ids;
      });
    },
    async update(table, set, where) {
      const params: unknown[] = [];
      const sets = Object.keys(set).map((c) => (params.push(set[c]), `${ident(c)} = $${params.length}`));
      return (await query(`UPDATE ${ident(table)} SET ${sets.join(", ")}${whereSql(where, place, params)}`, params))
        .count;
    },
    async checkValues(table, column) {
      // PostgreSQL keeps `c IN ('a', 'b')` as `c = ANY (ARRAY['a'::text, 'b'::text])`.
      const defs = (await pg.sql`SELECT pg_get_constraintdef(oid) AS def FROM pg_constraint
          WHERE conrelid = ${table}::regclass AND contype = 'c'`) as {
        def: string;
      }[];
      const re = new RegExp(`\\(${column} = ANY \\(ARRAY\\[([^\\]]*)\\]\\)\\)`);
      const m = defs.map((d) => re.exec(d.def)).find((x) => x !== null);
      if (!m) throw new Error(`no CHECK on ${table}.${column}`);
      return [...m[1].matchAll(/'([^']*)'/g)].map((x) => x[1]).sort();
    },
    payloadIndexes: (paths, dryRun = false) => syncPayloadIndexesPg(pg, paths, { dryRun }),
    readPaths: (paths) => pg.readPaths(paths),
    close: () => pg.close(),
  };
  return store;
}
