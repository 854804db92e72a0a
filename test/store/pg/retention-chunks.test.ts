// Retention's small transactions on PostgreSQL (../retention-chunks.ts says why these are not
// conformance cases): pg/retention.ts's pass over a pool whose every transaction reports the rows
// it inserted, updated and deleted, each on a fresh database of one throwaway server. Skipped,
// saying so, without PostgreSQL.
import { afterAll, beforeAll, describe, setDefaultTimeout } from "bun:test";
import type { PgSpool } from "../../../src/store/pg/db.ts";
import { runRetentionPg } from "../../../src/store/pg/retention.ts";
import { PG_BIN, PG_SKIP_MESSAGE, type PgServer, startPostgres } from "../../helpers/pg.ts";
import { openPgStore } from "../../helpers/store-under-test-pg.ts";
import { retentionChunkCases } from "../retention-chunks.ts";

if (!PG_BIN) console.log(PG_SKIP_MESSAGE);
setDefaultTimeout(30_000);

/**
 * The pool, its begin() watched: each transaction reports the rows it changed, the backend's
 * pending table statistics read at its start and just before its COMMIT (they may still hold
 * earlier transactions' counts, never flushed inside a transaction).
 */
function watched(pg: PgSpool, onCommit: (rows: number) => void): PgSpool {
  const sql = pg.sql;
  const changed = async (tx: typeof sql) =>
    (
      (await tx`SELECT COALESCE(SUM(n_tup_ins + n_tup_upd + n_tup_del), 0)::int AS n
        FROM pg_stat_xact_user_tables`) as { n: number }[]
    )[0].n;
  const begin = (fn: (tx: typeof sql) => Promise<unknown>) =>
    sql.begin(async (tx) => {
      const before = await changed(tx);
      const r = await fn(tx);
      onCommit((await changed(tx)) - before);
      return r;
    });
  const proxy = new Proxy(sql, {
    get(target, prop) {
      if (prop === "begin") return begin;
      const v = Reflect.get(target, prop, target);
      return typeof v === "function" ? v.bind(target) : v;
    },
    apply(target, _this, args) {
      return Reflect.apply(target, target, args);
    },
  });
  return { sql: proxy } as PgSpool;
}

describe.skipIf(!PG_BIN)("PostgreSQL", () => {
  let server: PgServer;
  beforeAll(async () => {
    server = await startPostgres();
  }, 60_000);
  afterAll(async () => {
    await server?.stop();
  });

  retentionChunkCases(
    () => openPgStore(server),
    async (s, policy, now, opts, onCommit) => {
      if (!s.pg) throw new Error("a PostgreSQL store");
      return runRetentionPg(watched(s.pg, onCommit), policy, now, opts);
    },
  );
});
