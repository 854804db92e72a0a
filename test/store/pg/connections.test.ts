// The pool's connections on a real PostgreSQL server: each is replaced once its lifetime has
// passed, so the generic plans it made (with the table sizes of that moment) are made again
// on the next one, while the LISTEN connection stays and keeps its wake-ups. Skipped, saying
// so, without PostgreSQL.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { POOL_LIFETIME_S, PgSpool } from "../../../src/store/pg/db.ts";
import { migratePg } from "../../../src/store/pg/migrate.ts";
import { listenForWork, notifyWork } from "../../../src/store/pg/wakeups.ts";
import { PG_BIN, PG_SKIP_MESSAGE, type PgServer, startPostgres } from "../../helpers/pg.ts";
import { waitFor } from "../../helpers/proc.ts";

if (!PG_BIN) console.log(PG_SKIP_MESSAGE);

describe.skipIf(!PG_BIN)("the pool's connections", () => {
  let server: PgServer;
  beforeAll(async () => {
    server = await startPostgres();
    await server.createDatabase("conns");
  }, 60_000);
  afterAll(async () => {
    await server?.stop();
  });
  const target = () => ({ path: server.socket, user: server.user, database: "conns" });

  test("a pool connection lives POOL_LIFETIME_S by default, five minutes", async () => {
    const spool = new PgSpool(target());
    try {
      expect(POOL_LIFETIME_S).toBe(300);
      expect((spool.sql.options as { maxLifetime?: number }).maxLifetime).toBe(POOL_LIFETIME_S * 1000);
    } finally {
      await spool.close();
    }
  });

  test("is replaced after its lifetime; the listener stays and keeps getting wake-ups", async () => {
    const spool = new PgSpool(target(), { max: 1, lifetimeS: 1 });
    const other = new PgSpool(target(), { max: 1 });
    const got: number[] = [];
    const listening = await listenForWork(spool, (at) => got.push(at));
    try {
      await migratePg(other, "0123456789ab");
      const backend = async () => Number((await spool.sql`SELECT pg_backend_pid() AS pid`)[0].pid);
      const listener = async () =>
        ((await other.sql`SELECT pid FROM pg_stat_activity WHERE query ILIKE 'LISTEN%'`) as { pid: number }[]).map(
          (r) => Number(r.pid),
        );
      const first = await backend();
      const [listening0] = await listener();
      // The plans of a connection are its own: a new backend makes them again.
      await waitFor("a new backend", async () => (await backend()) !== first, 10_000);
      expect(await listener()).toEqual([listening0]);
      await other.sql.begin((tx) => notifyWork(tx, 42));
      await waitFor("the wake-up", () => got.length === 1);
      expect(got).toEqual([42]);
    } finally {
      await listening.stop();
      await spool.close();
      await other.close();
    }
  });
});
