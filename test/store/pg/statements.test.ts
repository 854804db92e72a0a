// What a claim and an outcome transaction cost PostgreSQL, in statements, counted by
// pg_stat_statements on a throwaway server: one claimBatches of four batches over two
// destinations takes at most three statements besides BEGIN and COMMIT (the locks, the read after
// them, the write), and one recordEnds of their four 2xx at most three (the facts with now_eff,
// the marks, the destinations' successes with the issues they resolve: no savepoint), however
// many outcomes the set holds. Skipped, saying so, without PostgreSQL or
// without its pg_stat_statements module.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { PG_BIN, PG_SKIP_MESSAGE, type PgServer, startPostgres } from "../../helpers/pg.ts";
import { openPgStore } from "../../helpers/store-under-test-pg.ts";
import type { StoreUnderTest } from "../../helpers/store-under-test.ts";
import { endAll, endAllAtNow } from "../../helpers/attempts.ts";
import { sealedRow, T0 } from "../../helpers/spool.ts";
import type { Claim } from "../../../src/store/queue.ts";

/** Whether this machine's PostgreSQL has the pg_stat_statements module. */
function hasStatements(): boolean {
  const base = "/usr/lib/postgresql";
  if (!existsSync(base)) return false;
  return readdirSync(base).some((v) => existsSync(join(base, v, "lib", "pg_stat_statements.so")));
}

const STATEMENTS = hasStatements();
if (!PG_BIN) console.log(PG_SKIP_MESSAGE);
else if (!STATEMENTS) console.log("statement counts skipped: no pg_stat_statements.so under /usr/lib/postgresql/*/lib");

/** The statements the test database ran since the last reset, but BEGIN, COMMIT and the counting itself. */
async function statements(s: StoreUnderTest): Promise<{ calls: number; query: string }[]> {
  const rows = (await sqlOf(s)`SELECT calls::int AS calls, query FROM pg_stat_statements
      WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
        AND query NOT IN ('BEGIN', 'COMMIT') AND query NOT LIKE '%pg_stat_statements%'
      ORDER BY calls DESC`) as { calls: number; query: string }[];
  return rows;
}

const sqlOf = (s: StoreUnderTest) => (s.pg as NonNullable<StoreUnderTest["pg"]>).sql;

const total = (rows: readonly { calls: number }[]) => rows.reduce((n, r) => n + r.calls, 0);

describe.skipIf(!PG_BIN || !STATEMENTS)("PostgreSQL's delivery path in statements", () => {
  let server: PgServer;
  let s: StoreUnderTest;
  beforeAll(async () => {
    server = await startPostgres({
      settings: { shared_preload_libraries: "pg_stat_statements", "pg_stat_statements.track": "all" },
    });
    s = await openPgStore(server);
    await sqlOf(s)`CREATE EXTENSION pg_stat_statements`;
  }, 60_000);
  afterAll(async () => {
    await s?.close();
    await server?.stop();
  });

  test("a claim of four batches over two destinations is three statements; their four 2xx three", async () => {
    const batches = ["http:a", "http:b", "http:a", "http:b"].map((destination, i) =>
      sealedRow(destination, `k${i}`, T0 + i),
    );
    const ids = await s.insert("batches", batches);
    // An open transient issue on each destination, which the successes resolve.
    for (const d of ["http:a", "http:b"])
      await s.insert("issues", [
        {
          fingerprint: `delivery:${d}:http_5xx`,
          kind: "delivery",
          destination: d,
          state: "open",
          first_at: T0,
          last_at: T0,
        },
      ]);
    const now = T0 + 10;
    await sqlOf(s)`SELECT pg_stat_statements_reset()`;
    const claims = await s.dispatch.claimBatches(
      ids.map((batchId, i) => ({
        batchId,
        route: "r",
        key: `k${i}`,
        destination: batches[i].destination,
        now,
        leaseUntil: now + 60,
        host: "h",
        pid: 1,
        maxInflight: 4,
        deliveryId: (attemptId: number) => `msg_${attemptId}`,
      })),
    );
    const claimed = claims.filter((c): c is Claim => c !== null && c !== "gated");
    expect(claimed.map((c) => c.n)).toEqual([1, 1, 1, 1]);
    const claimStatements = await statements(s);
    expect({ total: total(claimStatements), claimStatements }).toMatchObject({ total: 3 });

    await sqlOf(s)`SELECT pg_stat_statements_reset()`;
    // As the dispatcher's outcome writer ends them: at now_eff, read with the facts (no statement of its own).
    const recorded = await endAllAtNow(
      s,
      claimed.map((c, i) => ({
        batchId: ids[i],
        destination: batches[i].destination,
        attemptId: c.attemptId,
        owner: c.owner,
        now: now + 1,
        ending: { kind: "delivered" },
      })),
    );
    expect(recorded.map((r) => (r instanceof Error ? r.message : r.applied))).toEqual([true, true, true, true]);
    const outcomeStatements = await statements(s);
    expect({ total: total(outcomeStatements), outcomeStatements }).toMatchObject({ total: 3 });

    // And what they left: every batch delivered with its journal rows, every issue resolved.
    expect(await s.count("batches", { state: "delivered" })).toBe(4);
    expect(await s.count("journal", { kind: "leased" })).toBe(4);
    expect(await s.count("journal", { kind: "delivered" })).toBe(4);
    expect(await s.count("issues", { state: "resolved" })).toBe(2);
    expect((await s.rows("attempts", { cols: ["delivery_id"], order: "id" })).map((r) => r.delivery_id)).toEqual(
      claimed.map((c) => `msg_${c.attemptId}`),
    );
  });

  /** `n` sealed batches of http:c on fresh keys, claimed now: their ids and claims. */
  async function leased(prefix: string, n: number, now: number) {
    const rows = Array.from({ length: n }, (_, i) => sealedRow("http:c", `${prefix}${i}`, now + i));
    const ids = await s.insert("batches", rows);
    const claims = await s.dispatch.claimBatches(
      ids.map((batchId, i) => ({
        batchId,
        route: "r",
        key: rows[i].key,
        destination: "http:c",
        now,
        leaseUntil: now + 60,
        host: "h",
        pid: 1,
      })),
    );
    const claimed = claims.filter((c): c is Claim => c !== null && c !== "gated");
    expect(claimed.length).toBe(n);
    const ends = claimed.map((c, i) => ({
      batchId: ids[i],
      destination: "http:c",
      attemptId: c.attemptId,
      owner: c.owner,
      now: now + 1,
      ending: { kind: "delivered" as const },
    }));
    return { ids, ends };
  }

  const states = async (ids: readonly number[]) =>
    (
      (await sqlOf(s)`SELECT state FROM batches WHERE id = ANY(${ids}::bigint[]) ORDER BY id`) as { state: string }[]
    ).map((r) => r.state);

  test("a set of 2xx whose statements fail goes again one by one, in savepoints of a new transaction", async () => {
    const { ids, ends } = await leased("f", 3, T0 + 100);
    // Refuse any statement that journals more than one delivery: the set's marks fail, one by one pass.
    await sqlOf(s).unsafe(`CREATE FUNCTION one_delivery() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF (SELECT COUNT(*) FROM n WHERE kind = 'delivered') > 1 THEN RAISE EXCEPTION 'one at a time'; END IF;
        RETURN NULL;
      END $$`);
    await sqlOf(s).unsafe(`CREATE TRIGGER one_delivery AFTER INSERT ON journal REFERENCING NEW TABLE AS n
      FOR EACH STATEMENT EXECUTE FUNCTION one_delivery()`);
    try {
      await sqlOf(s)`SELECT pg_stat_statements_reset()`;
      const recorded = await endAll(s, ends);
      expect(recorded.map((r) => (r instanceof Error ? r.message : r.applied))).toEqual([true, true, true]);
      expect(await states(ids)).toEqual(["delivered", "delivered", "delivered"]);
      const savepoints = (await statements(s)).filter((r) => /^SAVEPOINT/.test(r.query));
      expect(total(savepoints)).toBe(3);
    } finally {
      await sqlOf(s).unsafe("DROP TRIGGER one_delivery ON journal");
      await sqlOf(s).unsafe("DROP FUNCTION one_delivery()");
    }
  });

  test("a set of 2xx whose COMMIT fails is not written again: it throws for all, still leased", async () => {
    const { ids, ends } = await leased("c", 2, T0 + 200);
    // A check deferred to the commit: the statements pass, the COMMIT fails.
    await sqlOf(s).unsafe(`CREATE FUNCTION at_commit() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN RAISE EXCEPTION 'refused at commit'; END $$`);
    await sqlOf(s).unsafe(`CREATE CONSTRAINT TRIGGER at_commit AFTER INSERT ON journal DEFERRABLE INITIALLY DEFERRED
      FOR EACH ROW WHEN (NEW.kind = 'delivered') EXECUTE FUNCTION at_commit()`);
    try {
      await sqlOf(s)`SELECT pg_stat_statements_reset()`;
      await expect(endAll(s, ends)).rejects.toThrow(/refused at commit/);
      expect(await states(ids)).toEqual(["leased", "leased"]);
      // Never tried again one by one.
      expect((await statements(s)).filter((r) => /^SAVEPOINT/.test(r.query))).toEqual([]);
    } finally {
      await sqlOf(s).unsafe("DROP TRIGGER at_commit ON journal");
      await sqlOf(s).unsafe("DROP FUNCTION at_commit()");
    }
  });
});
