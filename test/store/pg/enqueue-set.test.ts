// The group commit as a set on PostgreSQL (src/store/pg/enqueue-set.ts) against the one-by-one
// path it stands in for: the same random groups (keys, tees, windows small enough to seal before
// and after joins, raw bodies, kept headers, traces, fresh and repeated dedup ids, requests at
// their own times) written both ways into two databases give the same results and the same rows
// in every table; a write that fails goes again one by one, whole; and the statements a group
// costs, counted by pg_stat_statements, stay fixed whatever its size.
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import type { NewEvent } from "../../../src/store/enqueue.ts";
import { PgSpool } from "../../../src/store/pg/db.ts";
import { enqueueGroupPg, groupPaths } from "../../../src/store/pg/enqueue.ts";
import { migratePg } from "../../../src/store/pg/migrate.ts";
import { PG_BIN, PG_SKIP_MESSAGE, type PgServer, startPostgres } from "../../helpers/pg.ts";
import { copy, ev, T0 } from "../../helpers/spool.ts";

if (!PG_BIN) console.log(PG_SKIP_MESSAGE);
setDefaultTimeout(60_000);

/** Whether this PostgreSQL has pg_stat_statements (Debian's postgresql package ships it). */
const STATEMENTS =
  PG_BIN !== null &&
  readdirSync(join(PG_BIN, "..", "lib")).includes("pg_stat_statements.so") &&
  existsSync(join(PG_BIN, "..", "lib"));
if (PG_BIN && !STATEMENTS) console.log("statement counts skipped: no pg_stat_statements.so in this PostgreSQL");

/** A small seeded generator (mulberry32), so a failure names its seed and replays. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Random groups of requests: what an intake under a burst hands the group commit. */
function workload(seed: number, groups: number): { jobs: NewEvent[][]; nows: number[] }[] {
  const r = rng(seed);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(r() * xs.length)];
  const ids: string[] = [];
  let t = T0;
  const out: { jobs: NewEvent[][]; nows: number[] }[] = [];
  for (let g = 0; g < groups; g++) {
    const jobs: NewEvent[][] = [];
    const nows: number[] = [];
    for (let j = 0, n = 1 + Math.floor(r() * 8); j < n; j++) {
      // Each request at its own time; now and then the same instant, or a little back (another host's clock).
      t += pick([0, 0.001, 0.5, 2, -0.25]);
      nows.push(t);
      const evs: NewEvent[] = [];
      for (let e = 0, m = r() < 0.8 ? 1 : 2; e < m; e++) {
        // Now and then multi-byte text, or a byte-order mark first: the bodies travel as bytes.
        const pad = pick(["x", "é", "😀", "\u2028"]).repeat(Math.floor(r() * 300));
        const payload = `${r() < 0.1 ? "\ufeff" : ""}${JSON.stringify({ g, j, e, pad })}`;
        const windowA = pick([
          { max_events: 1 },
          { max_events: 3 },
          { max_bytes: 600 },
          { max_events: 4, max_bytes: 900 },
        ]);
        const copies = [copy("r1", "http:a", windowA)];
        if (r() < 0.3) copies.push(copy("r2", "http:b", pick([{}, { max_events: 2 }]), true));
        if (r() < 0.2) copies[0].trace = { matched: "r1", n: g };
        let dedupId: string | null = null;
        const d = r();
        if (d < 0.55) {
          dedupId = `d${g}-${j}-${e}`;
          ids.push(dedupId);
        } else if (d < 0.62 && ids.length > 0) dedupId = pick(ids);
        const raw = pick([null, "same", "other"]);
        evs.push(
          ev({
            key: pick(["k0", "k1", "k2"]),
            eventType: pick(["push", "issues"]),
            dedupId,
            payload,
            raw:
              raw === null
                ? null
                : raw === "same"
                  ? new TextEncoder().encode(payload)
                  : new Uint8Array([1, 2, g % 256]),
            headers: r() < 0.3 ? { "X-Kept": `h${g}` } : {},
            version: pick([null, null, 3, 1.5, 1_700_000_000.125]),
            copies,
          }),
        );
      }
      jobs.push(evs);
    }
    out.push({ jobs, nows });
  }
  return out;
}

/** Every row of the tables an enqueue writes, in a stable order (journal without its transaction id). */
async function rows(pg: PgSpool): Promise<Record<string, unknown[]>> {
  const q = async (text: string) => [...((await pg.sql.unsafe(text)) as unknown[])];
  return {
    batches: await q("SELECT * FROM batches ORDER BY id"),
    events: await q("SELECT * FROM events ORDER BY id"),
    dedup: await q("SELECT * FROM dedup ORDER BY source, dedup_id"),
    journal: await q(
      "SELECT id, at, kind, batch_id, event_id, attempt_id, source, destination, key, detail FROM journal ORDER BY id",
    ),
    meta: await q("SELECT * FROM meta WHERE key <> 'schema_version' ORDER BY key"),
  };
}

describe.skipIf(!PG_BIN)("the group commit as a set on PostgreSQL", () => {
  let server: PgServer;
  const pools: PgSpool[] = [];
  let n = 0;

  beforeAll(async () => {
    server = await startPostgres(
      STATEMENTS
        ? { settings: { shared_preload_libraries: "pg_stat_statements", "pg_stat_statements.track": "top" } }
        : {},
    );
  }, 60_000);

  afterAll(async () => {
    for (const p of pools) await p.close().catch(() => {});
    await server?.stop();
  });

  async function fresh(): Promise<PgSpool> {
    const database = `s${++n}`;
    await server.createDatabase(database);
    const p = new PgSpool({ path: server.socket, user: server.user, database }, { max: 2 });
    pools.push(p);
    await migratePg(p, "0123456789ab");
    return p;
  }

  for (const seed of [1, 2, 3]) {
    test(`seed ${seed}: the same results and the same rows as one by one`, async () => {
      const [set, single] = [await fresh(), await fresh()];
      const before = { ...groupPaths };
      for (const { jobs, nows } of workload(seed, 60)) {
        const now = Math.max(...nows);
        const a = await enqueueGroupPg(set, jobs, now, nows);
        const b = await enqueueGroupPg(single, jobs, now, nows, { oneByOne: true });
        expect(a).toEqual(b);
      }
      const [ra, rb] = [await rows(set), await rows(single)];
      for (const table of Object.keys(ra)) expect({ table, rows: ra[table] }).toEqual({ table, rows: rb[table] });
      // The workload reaches both sides of the set path's rules: seals of batches opened before
      // the group and in it, tees, repeated dedup ids (those groups go one by one).
      expect(ra.batches.filter((b) => (b as { state: string }).state === "sealed").length).toBeGreaterThan(20);
      expect(ra.events.length).toBeGreaterThan(200);
      expect(groupPaths.set - before.set).toBeGreaterThan(20);
      // 60 groups each way: the one-by-one side's 60, and the set side's groups with a dedup id seen before.
      expect(groupPaths.oneByOne - before.oneByOne).toBeGreaterThan(60);
      expect(groupPaths.retried - before.retried).toBe(0);
    });
  }

  test("a write that fails goes again one by one, whole, in a new transaction", async () => {
    const pg = await fresh();
    // A trigger that refuses any statement inserting more than one event: the set path's write fails, one by one
    // passes.
    await pg.sql.unsafe(`CREATE FUNCTION one_event_at_a_time() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN IF (SELECT COUNT(*) FROM fresh) > 1 THEN RAISE EXCEPTION 'more than one event'; END IF;
      RETURN NULL; END $$`);
    await pg.sql.unsafe(`CREATE TRIGGER one_event AFTER INSERT ON events REFERENCING NEW TABLE AS fresh
      FOR EACH STATEMENT EXECUTE FUNCTION one_event_at_a_time()`);
    const before = { ...groupPaths };
    const jobs = [[ev({ dedupId: "a" })], [ev({ dedupId: "b", key: "k2" })], [ev()]];
    const out = await enqueueGroupPg(pg, jobs, T0, [T0, T0, T0]);
    expect(out.map((o) => ("ok" in o ? o.ok.map((r) => r.status) : "error"))).toEqual([
      ["queued"],
      ["queued"],
      ["queued"],
    ]);
    expect(groupPaths.retried - before.retried).toBe(1);
    const r = await rows(pg);
    // Nothing of the failed write stayed: three events, three journal rows, two dedup rows, two batches.
    expect([r.events.length, r.journal.length, r.dedup.length, r.batches.length]).toEqual([3, 3, 2, 2]);
  });

  test("the group's statements are prepared once per connection and run a generic plan every call", async () => {
    const database = `s${++n}`;
    await server.createDatabase(database);
    // One connection, so the prepared statements the server lists are the ones the calls used.
    const one = new PgSpool({ path: server.socket, user: server.user, database }, { max: 1 });
    pools.push(one);
    await migratePg(one, "0123456789ab");
    for (let i = 0; i < 4; i++) await enqueueGroupPg(one, [[ev({ dedupId: `p${i}` })], [ev({ key: "k2" })]], T0 + i);
    const rows = (await one.sql`SELECT statement, generic_plans::int AS generic, custom_plans::int AS custom
        FROM pg_prepared_statements WHERE statement LIKE 'WITH nid AS MATERIALIZED%'
          OR statement LIKE 'WITH seen AS%'`) as { statement: string; generic: number; custom: number }[];
    expect(rows.map((r) => [r.statement.slice(0, 9), r.generic, r.custom]).sort()).toEqual([
      ["WITH nid ", 4, 0],
      ["WITH seen", 4, 0],
    ]);
  });

  describe.skipIf(!STATEMENTS)("statements per group", () => {
    /** The statements run by `fn` (BEGIN and COMMIT aside), counted by pg_stat_statements in this database. */
    async function counted(pg: PgSpool, fn: () => Promise<unknown>): Promise<{ calls: number; text: string[] }> {
      await pg.sql`CREATE EXTENSION IF NOT EXISTS pg_stat_statements`;
      await pg.sql`SELECT pg_stat_statements_reset()`;
      await fn();
      const rs = (await pg.sql`SELECT calls::int AS calls, query FROM pg_stat_statements
          WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
            AND query NOT IN ('BEGIN', 'COMMIT') AND query NOT LIKE '%pg_stat_statements%'`) as {
        calls: number;
        query: string;
      }[];
      return { calls: rs.reduce((a, r) => a + r.calls, 0), text: rs.map((r) => r.query.slice(0, 60)) };
    }

    test("a group of fresh events is three statements, whatever its size (one by one: ~7 an event)", async () => {
      const pg = await fresh();
      const group = (size: number) =>
        Array.from({ length: size }, (_, i) => [ev({ key: `k${i % 3}`, dedupId: `g${size}-${i}` })]);
      for (const size of [1, 8, 32]) {
        const c = await counted(pg, () => enqueueGroupPg(pg, group(size), T0));
        // The locks, the read, the write.
        expect({ size, calls: c.calls }).toEqual({ size, calls: 3 });
      }
      const single = await counted(pg, () => enqueueGroupPg(pg, group(8), T0, undefined, { oneByOne: true }));
      expect(single.calls).toBeGreaterThanOrEqual(8 * 6);
    });

    test("sealing a batch that was open before the group adds its content and its update", async () => {
      const pg = await fresh();
      const tight = (i: number) => ev({ key: "k", copies: [copy("r", "http:d", { max_events: 3 })], dedupId: `x${i}` });
      await enqueueGroupPg(pg, [[tight(0)], [tight(1)]], T0);
      const c = await counted(pg, () => enqueueGroupPg(pg, [[tight(2)], [tight(3)]], T0 + 1));
      expect(c.calls).toBe(5);
      const states = (await pg.sql`SELECT state, count FROM batches ORDER BY id`) as { state: string; count: number }[];
      expect(states.map((s) => [s.state, Number(s.count)])).toEqual([
        ["sealed", 3],
        ["open", 1],
      ]);
    });
  });
});
