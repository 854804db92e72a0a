// How PostgreSQL runs the dispatcher's busiest statements on a wide backlog and a long history,
// with the generic plans every connection runs: the candidates walk through batches_ready in
// order, each head checked against batches_queue, stopping at its limit; readiness, recovery,
// overdue outcomes and retention each on the partial index that holds only their rows; the
// claim's read by id and by (route, key); never a scan of the batches; --where on a path a
// payload index holds searches it. The same with statistics taken while the spool was quiet.
// Skipped, saying so, without PostgreSQL.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { candidatesPg } from "../../../src/store/pg/queue.ts";
import { genericPlanPg, hotPlansPg, hotStatements } from "../../../src/store/pg/plans.ts";
import { numbered, PgSpool } from "../../../src/store/pg/db.ts";
import { syncPayloadIndexesPg, whereStatement } from "../../../src/store/pg/where.ts";
import { parseWheres } from "../../../src/store/where.ts";
import { pgStores } from "../../../src/store/open.ts";
import { migratePg } from "../../../src/store/pg/migrate.ts";
import { PG_BIN, PG_SKIP_MESSAGE, type PgServer, startPostgres } from "../../helpers/pg.ts";

/** 20,000 finished batches of old keys, an attempt each, as a history has. */
async function history(pg: PgSpool): Promise<void> {
  await pg.sql`INSERT
    INTO batches (route, source, destination, key, state, first_at, last_at, quiet_s, max_s, max_events, max_bytes,
    count, bytes, sealed_at, delivered_at, content_hash)
      SELECT 'r', 's', 'http:d', 'old' || g, 'delivered', g, g, 0, 0, 10, 1000, 1, 10, g, g, 'sha256:x'
        FROM generate_series(1, 20000) g`;
  await pg.sql`INSERT INTO attempts (batch_id, n, destination, started_at, finished_at, outcome, counted)
    SELECT id, 1, destination, first_at, first_at + 1, 'ok', 1 FROM batches WHERE state = 'delivered'`;
}

/** 5,000 sealed batches over 2,500 keys (two per key) and two destinations, and a few of each other state. */
async function backlog(pg: PgSpool): Promise<void> {
  await pg.sql`INSERT
    INTO batches (route, source, destination, key, state, first_at, last_at, quiet_s, max_s, max_events, max_bytes,
    count, bytes, sealed_at, content_hash)
      SELECT 'r', 's', CASE WHEN g % 2 = 0 THEN 'http:a' ELSE 'http:b'
        END, 'k' || (g % 2500), 'sealed', 100000 + g, 100000 + g, 0, 0, 10, 1000, 1, 10, 100000 + g, 'sha256:x'
        FROM generate_series(1, 5000) g`;
  // Retries (some due), awaits, leases, open batches, dropped ones.
  await pg.sql`INSERT
    INTO batches (route, source, destination, key, state, first_at, last_at, quiet_s, max_s, max_events, max_bytes,
    count, bytes, sealed_at, content_hash, next_attempt_at, lease_until, lease_owner, delivered_at)
      SELECT 'r', 's', 'http:a', 'x' || g, (ARRAY['retry', 'awaiting', 'leased', 'dropped'])[g % 4 + 1],
        200000 + g, 200000 + g, 0, 0, 10, 1000, 1, 10, 200000 + g, 'sha256:x',
        CASE WHEN g % 4 < 2 THEN 199990 + g END, CASE WHEN g % 4 = 2 THEN 200100 + g END,
        CASE WHEN g % 4 = 2 THEN 'h:1:' || g END, CASE WHEN g % 4 = 3 THEN 200000 + g END
        FROM generate_series(1, 200) g`;
  await pg.sql`INSERT
    INTO batches (route, source, destination, key, state, first_at, last_at, quiet_s, max_s, max_events, max_bytes,
    count, bytes)
      SELECT 'r', 's', 'http:a', 'o' || g, 'open', 300000 + g, 300000 + g, 5, 10, 10, 1000, 1, 10
        FROM generate_series(1, 100) g`;
}

/**
 * The claim read's searches: each candidate by its id (batches_pkey), the earlier batches of its
 * group by (route, key) in batches_queue, a destination's leased batches by an index.
 */
function expectClaimReadSearches(plan: string): void {
  expect(plan).toMatch(/Index Scan using batches_pkey on batches b [^\n]*\n\s*Index Cond: \(id = x\.id\)/);
  expect(plan).toMatch(
    /Index Scan using batches_queue on batches p [^\n]*\n\s*Index Cond: \(\(route = b\.route\) AND \(key = b\.key\)/,
  );
  expect(plan).toMatch(/batches_leased|Index Cond: \(\(destination = g\.name\) AND \(state = 'leased'::text\)\)/);
  expect(plan).not.toMatch(/Seq Scan on (batches|events|attempts)/);
}

if (!PG_BIN) console.log(PG_SKIP_MESSAGE);

describe.skipIf(!PG_BIN)("PostgreSQL's busiest statements", () => {
  let server: PgServer;
  let pg: PgSpool;
  beforeAll(async () => {
    server = await startPostgres();
    await server.createDatabase("plans");
    pg = new PgSpool({ path: server.socket, user: server.user, database: "plans" });
    await migratePg(pg, "0123456789ab");
    await history(pg);
    await backlog(pg);
    await pg.sql`ANALYZE batches`;
    await pg.sql`ANALYZE attempts`;
  }, 60_000);
  afterAll(async () => {
    await pg?.close();
    await server?.stop();
  });

  test(
    "finds the destinations by index searches, follows batches_ready and checks heads in batches_queue, with no " +
      "scan or sort of the backlog",
    async () => {
      // The plans explained are the generic ones every connection runs.
      const [mode] = await pg.sql`SHOW plan_cache_mode`;
      expect(mode.plan_cache_mode).toBe("force_generic_plan");
      const plans = await hotPlansPg(pg, 200000, "http:a");
      const walk = plans.walk.join("\n");
      expect(walk).toContain("batches_ready");
      expect(walk).toContain("batches_queue");
      expect(walk).not.toMatch(/Seq Scan on batches|Sort\b/);
      const destinations = plans.destinations.join("\n");
      expect(destinations).toContain("batches_ready");
      expect(destinations).not.toMatch(/Seq Scan on batches|Sort\b/);
      // The one statement candidatesPg runs: the scan, then each destination's walk, still on the indexes.
      const all = plans.candidates.join("\n");
      expect(all).toContain("batches_ready");
      expect(all).toContain("batches_queue");
      expect(all).not.toMatch(/Seq Scan on batches|Sort\b/);
    },
  );

  // Each statement, the index its generic plan must search (the partial one holding only its rows).
  const onIndex: [string, string[]][] = [
    ["nextReadyAt", ["batches_one_open", "batches_due"]],
    ["anyReadyNow", ["batches_due"]],
    ["overdue", ["batches_due"]],
    ["recovery", ["batches_leased"]],
    ["claimRead", ["batches_queue"]],
    ["retention", ["batches_finished"]],
    ["delivery", ["batches_pkey", "events_batch"]],
    ["mark", ["batches_pkey", "attempts_pkey"]],
    ["claimWrite", ["batches_pkey"]],
  ];
  for (const [name, indexes] of onIndex)
    test(`${name} searches ${indexes.join(" and ")}, never scanning batches, events or attempts`, async () => {
      const plans = await hotPlansPg(pg, 200000, "http:a");
      const plan = plans[name as keyof typeof plans].join("\n");
      for (const index of indexes) expect(plan).toContain(index);
      expect(plan).not.toMatch(/Seq Scan on (batches|events|attempts)/);
    });

  test("claimRead finds each candidate by its id, its group's earlier batches by (route, key)", async () => {
    expectClaimReadSearches((await hotPlansPg(pg, 200000, "http:a")).claimRead.join("\n"));
  });

  test("no statement is compiled by JIT, whatever its estimate", async () => {
    const [jit] = await pg.sql`SHOW jit`;
    expect(jit.jit).toBe("off");
    const plans = await hotPlansPg(pg, 200000, "http:a");
    for (const plan of Object.values(plans)) expect(plan.join("\n")).not.toContain("JIT:");
    // Every plan passes a threshold of 0; only jit = on, the server's default, would compile it then.
    const [sql, params] = hotStatements(200000, "http:a").claimRead;
    const c = await pg.sql.reserve();
    try {
      await c.unsafe("SET jit_above_cost = 0");
      expect((await genericPlanPg(c, sql, params)).join("\n")).not.toContain("JIT:");
      await c.unsafe("SET jit = on");
      expect((await genericPlanPg(c, sql, params)).join("\n")).toContain("JIT:");
    } finally {
      await c.unsafe("RESET jit");
      await c.unsafe("RESET jit_above_cost");
      c.release();
    }
  });

  test("--where on a payload index finds its events by the index, then their batches by id", async () => {
    // An event for each finished batch: 500 repositories, a few actions.
    await pg.sql`INSERT INTO events (source, route, batch_id, event_type, received_at, payload, size)
      SELECT 's', 'r', id, 't', first_at, json_build_object('action', (ARRAY['opened', 'closed', 'edited'])[id % 3 + 1],
        'repository', json_build_object('full_name', 'org/r' || (id % 500)))::text, 100
        FROM batches WHERE state = 'delivered'`;
    await syncPayloadIndexesPg(pg, ["repository.full_name"]);
    await pg.sql`ANALYZE events`;
    const explain = async (q: { sql: string; params: Record<string, string | number> }) => {
      const n = numbered(q.sql, q.params);
      const c = await pg.sql.reserve();
      try {
        return (await genericPlanPg(c, n.text, n.values as (string | number)[])).join("\n");
      } finally {
        c.release();
      }
    };
    const plan = (...conds: string[]) => explain(whereStatement({ list: { where: parseWheres(conds) } }));
    const search = /Index Scan on events_where_repository_full_name_\w+/;
    for (const conds of [
      ["repository.full_name = org/r7"],
      ["repository.full_name in (org/r7, org/r8)"],
      ["action = opened", "repository.full_name = org/r7"],
    ]) {
      const p = await plan(...conds);
      expect(p).toMatch(search);
      expect(p).toContain("batches_pkey");
      expect(p).not.toMatch(/Seq Scan on (batches|events)/);
    }
    // With the other filters, list's read and replay --dead's selection still search the index.
    const where = parseWheres(["repository.full_name = org/r7", "action = opened"]);
    for (const q of [
      { list: { where, source: "s", since: 1, until: 30000 } },
      { list: { where, state: "delivered" as const, reason: "rejected", limit: 10 } },
      { list: { where, destination: "http:d", state: "delivered" as const, before: 99999 } },
      { list: { where, key: "old7", status: 500 } },
      { dead: { where, source: "s", since: 1 } },
      { dead: { where, destination: "http:d", reason: "rejected" } },
    ]) {
      const p = await explain(whereStatement(q));
      expect({ q: Object.keys(q.list ?? q.dead), p }).toEqual({
        q: Object.keys(q.list ?? q.dead),
        p: expect.stringMatching(search),
      });
      expect(p).not.toMatch(/Seq Scan on events/);
    }
    expect(await plan("action = opened")).toContain("Seq Scan on events");
    // What the list answers, by the index: the newest of the repository's batches first.
    const store = pgStores(pg).operator();
    const rows = await store.listBatches({ where: parseWheres(["repository.full_name = org/r7"]), limit: 3 });
    expect(rows.map((b) => b.key)).toEqual(["old19507", "old19007", "old18507"]);
  });

  test("answers the heads, oldest first, at most the limit of each destination", async () => {
    const got = await candidatesPg(pg, 200000, 3);
    expect(got.map((c) => [c.destination, c.key])).toEqual([
      ["http:b", "k1"],
      ["http:a", "k2"],
      ["http:b", "k3"],
      ["http:a", "k4"],
      ["http:b", "k5"],
      ["http:a", "k6"],
    ]);
  });
});

// A queue's statistics go stale: taken while the spool was quiet (its history all delivered),
// they say no batch is active when thousands are. Migration 0010 keeps none on batches.state, so
// the generic plans made then still search by key; with them (the contrast), the claim's read
// scans the whole of batches_queue once per candidate, twice.
describe.skipIf(!PG_BIN)("PostgreSQL's busiest statements, statistics taken while the spool was quiet", () => {
  let server: PgServer;
  const spools: PgSpool[] = [];
  /** A migrated database with a history, ANALYZEd, then a backlog; `stats`: state's statistics as before 0010. */
  async function quiet(name: string, stats: boolean): Promise<PgSpool> {
    await server.createDatabase(name);
    const pg = new PgSpool({ path: server.socket, user: server.user, database: name });
    spools.push(pg);
    await migratePg(pg, "0123456789ab");
    if (stats) await pg.sql`ALTER TABLE batches ALTER COLUMN state SET STATISTICS -1`;
    await history(pg);
    await pg.sql`ANALYZE batches`;
    await pg.sql`ANALYZE attempts`;
    await backlog(pg);
    return pg;
  }
  beforeAll(async () => {
    server = await startPostgres();
  }, 60_000);
  afterAll(async () => {
    for (const pg of spools) await pg.close();
    await server?.stop();
  });

  test("every hot statement still searches its index; the claim's read finds its rows by id and key", async () => {
    const pg = await quiet("quiet", false);
    const [stats] = await pg.sql`SELECT COUNT(*)::int AS n FROM pg_stats WHERE tablename = 'batches'
        AND attname = 'state'`;
    expect(stats.n).toBe(0);
    const plans = await hotPlansPg(pg, 200000, "http:a");
    for (const plan of Object.values(plans))
      expect(plan.join("\n")).not.toMatch(/Seq Scan on (batches|events|attempts)/);
    expectClaimReadSearches(plans.claimRead.join("\n"));
    expect(plans.walk.join("\n")).toContain("batches_ready");
    expect(plans.recovery.join("\n")).toContain("batches_leased");
  }, 60_000);

  test("migration 0010 drops the statistics a database has on the column; ANALYZE takes none again", async () => {
    const pg = await quiet("upgraded", true);
    const stats = async () =>
      (await pg.sql`SELECT COUNT(*)::int AS n FROM pg_stats WHERE tablename = 'batches' AND attname = 'state'`)[0].n;
    expect(await stats()).toBe(1);
    // As a database at schema 9 meets this build's migrate.
    await pg.sql`UPDATE meta SET value = '9' WHERE key = 'schema_version'`;
    expect((await migratePg(pg, "0123456789ab")).applied).toEqual(["0010_queue_statistics", "0011_path_values"]);
    expect(await stats()).toBe(0);
    await pg.sql`ANALYZE batches`;
    expect(await stats()).toBe(0);
    const invalid = await pg.sql`SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
        WHERE i.indrelid = 'batches'::regclass AND NOT i.indisvalid`;
    expect(invalid).toEqual([]);
    expectClaimReadSearches((await hotPlansPg(pg, 200000, "http:a")).claimRead.join("\n"));
    expect(await pg.sql`SELECT COUNT(*)::int AS n FROM batches WHERE state = 'sealed'`).toEqual([{ n: 5000 }]);
  }, 60_000);

  test("with statistics on the column (as before migration 0010), the claim's read scans the queue", async () => {
    const pg = await quiet("quiet_stats", true);
    const plan = (await hotPlansPg(pg, 200000, "http:a")).claimRead.join("\n");
    expect(plan).toMatch(/Index Scan using batches_queue on batches b [^\n]*\n\s*Index Cond: \(id = x\.id\)/);
    expect(() => expectClaimReadSearches(plan)).toThrow();
  }, 60_000);
});
