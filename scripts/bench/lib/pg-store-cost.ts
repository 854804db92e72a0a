// The store's own cost of a delivery on PostgreSQL, with no dispatcher, intake or receiver
// around it: a claim transaction of K sealed one-event batches, then the outcome transaction of
// their K 2xx (as the dispatcher's OutcomeWriter ends them), for K = 1, 2, 4 and 8, each on a
// fresh copy of a database that holds a delivered history (STORE_HISTORY batches with their
// attempts, ANALYZEd as autovacuum leaves a running one, so no plan is made from empty tables).
//
// The server's CPU per claim transaction, per outcome transaction and per batch, and a line
// through the per-batch figures: a fixed cost for each claim and outcome pair, and a cost for
// each batch in it. A tick claims at most dispatch.parallel batches (the destination's
// max_inflight too), so the line says what a batch costs PostgreSQL at a given parallel.
import { sealedRow, T0 } from "../../../test/helpers/spool.ts";
import { endAllAtNow } from "../../../test/helpers/attempts.ts";
import { openPgStore } from "../../../test/helpers/store-under-test-pg.ts";
import type { StoreUnderTest } from "../../../test/helpers/store-under-test.ts";
import type { Claim } from "../../../src/store/queue.ts";
import type { BenchPg } from "./pg.ts";
import { FSYNC } from "./pg-setup.ts";
import { emit, table } from "./report.ts";

const STORE_N = Number(process.env.BENCH_PG_STORE_N ?? 2000);
const STORE_HISTORY = Number(process.env.BENCH_PG_STORE_HISTORY ?? 20_000);
const SIZES = [1, 2, 4, 8];

/** `h` delivered batches of old keys, one finished 2xx attempt each; then ANALYZE. */
async function writeHistory(s: StoreUnderTest, h: number): Promise<void> {
  const sql = (s.pg as NonNullable<StoreUnderTest["pg"]>).sql;
  await sql.unsafe(`WITH b AS (INSERT INTO batches (route, source, destination, key, state, first_at, last_at, quiet_s,
      max_s, max_events, max_bytes, count, bytes, sealed_at, content_hash, delivered_at, attempts)
    SELECT 'r', 's', 'http:a', 'old' || g, 'delivered', ${T0} - g, ${T0} - g, 0, 0, 10, 1000, 1, 10, ${T0} - g,
      'sha256:old', ${T0} - g + 1, 1 FROM generate_series(1, ${h}) g RETURNING id, first_at)
    INSERT INTO attempts (batch_id, n, destination, started_at, finished_at, outcome, counted)
      SELECT id, 1, 'http:a', first_at, first_at + 1, 'ok', 1 FROM b`);
  await sql.unsafe("ANALYZE");
}

/** STORE_N sealed batches with their event, ids in key order. */
async function writeBacklog(s: StoreUnderTest): Promise<number[]> {
  const ids: number[] = [];
  for (let i = 0; i < STORE_N; i += 500) {
    const rows = Array.from({ length: Math.min(500, STORE_N - i) }, (_, j) =>
      sealedRow("http:a", `k${i + j}`, T0 + i + j),
    );
    const part = await s.insert("batches", rows);
    await s.insert(
      "events",
      part.map((batchId, j) => ({ source: "s", route: "r", batch_id: batchId, received_at: T0 + i + j, size: 10 })),
    );
    ids.push(...part);
  }
  return ids;
}

interface StoreCost {
  k: number;
  claimMs: number;
  outcomeMs: number;
  perBatchMs: number;
}

/** Claim and deliver the backlog K at a time; the server's CPU spent in each kind of transaction. */
async function measure(pg: BenchPg, k: number): Promise<StoreCost> {
  const s = await openPgStore(pg.server);
  try {
    await writeHistory(s, STORE_HISTORY);
    const ids = await writeBacklog(s);
    const now = T0 + STORE_N + 10;
    let claimS = 0;
    let outcomeS = 0;
    let txs = 0;
    for (let i = 0; i + k <= ids.length; i += k, txs++) {
      const part = ids.slice(i, i + k);
      const c0 = pg.cpuS();
      const claims = await s.dispatch.claimBatches(
        part.map((batchId, j) => ({
          batchId,
          route: "r",
          key: `k${i + j}`,
          destination: "http:a",
          now,
          leaseUntil: now + 60,
          host: "bench",
          pid: 1,
          maxInflight: k,
        })),
      );
      const c1 = pg.cpuS();
      const claimed = claims.filter((c): c is Claim => c !== null && c !== "gated");
      if (claimed.length !== k) throw new Error(`store cost, ${k} a claim: ${claimed.length} claimed`);
      const ends = claimed.map((c, j) => ({
        batchId: part[j],
        destination: "http:a",
        attemptId: c.attemptId,
        owner: c.owner,
        now: now + 1,
        ending: { kind: "delivered" as const },
      }));
      const recorded = await endAllAtNow(s, ends);
      if (recorded.some((r) => r instanceof Error || !r.applied)) throw new Error(`store cost: an outcome not applied`);
      claimS += c1 - c0;
      outcomeS += pg.cpuS() - c1;
    }
    const delivered = await s.count("batches", { state: "delivered" });
    if (delivered !== STORE_HISTORY + txs * k) throw new Error(`store cost: ${delivered} batches delivered`);
    return {
      k,
      claimMs: (claimS * 1000) / txs,
      outcomeMs: (outcomeS * 1000) / txs,
      perBatchMs: ((claimS + outcomeS) * 1000) / (txs * k),
    };
  } finally {
    await s.close();
  }
}

/** Least squares of per-batch cost = fixed / K + marginal: the pair's fixed cost and each batch's own. */
function fit(costs: readonly StoreCost[]): { fixedMs: number; marginalMs: number } {
  const xs = costs.map((c) => 1 / c.k);
  const ys = costs.map((c) => c.perBatchMs);
  const mx = xs.reduce((a, x) => a + x, 0) / xs.length;
  const my = ys.reduce((a, y) => a + y, 0) / ys.length;
  const fixedMs =
    xs.reduce((a, x, i) => a + (x - mx) * (ys[i] - my), 0) / xs.reduce((a, x) => a + (x - mx) * (x - mx), 0);
  return { fixedMs, marginalMs: my - fixedMs * mx };
}

export async function storeCostBench(pg: BenchPg): Promise<void> {
  const costs: StoreCost[] = [];
  for (const k of SIZES) costs.push(await measure(pg, k));
  const config = { history: STORE_HISTORY, batches: STORE_N, pg_fsync: FSYNC };
  for (const c of costs) {
    const at = { ...config, batches_per_transaction: c.k };
    emit("postgres_store", "server_cpu_per_claim_transaction", c.claimMs, "ms", at);
    emit("postgres_store", "server_cpu_per_outcome_transaction", c.outcomeMs, "ms", at);
    emit("postgres_store", "server_cpu_per_batch", c.perBatchMs, "ms", at);
  }
  const { fixedMs, marginalMs } = fit(costs);
  emit("postgres_store", "server_cpu_fixed_per_claim_and_outcome", fixedMs, "ms", config);
  emit("postgres_store", "server_cpu_marginal_per_batch", marginalMs, "ms", config);
  for (const parallel of [4, 16, 32])
    emit("postgres_store", "server_cpu_per_batch_at_parallel", fixedMs / parallel + marginalMs, "ms", {
      ...config,
      parallel,
      note: "the fitted line at a full tick: every slot claimed and ended together",
    });
  table(
    `postgres store: the server's CPU for claims and their 2xx, K batches a transaction ` +
      `(${STORE_N} sealed one-event batches, ${STORE_HISTORY} delivered before, fsync ${FSYNC ? "on" : "OFF"})`,
    ["K", "claim tx ms", "outcome tx ms", "per batch ms"],
    costs.map((c) => [c.k, c.claimMs, c.outcomeMs, c.perBatchMs]),
  );
  table(
    "postgres store: per batch = fixed / K + marginal (least squares over K)",
    ["fixed per claim + outcome ms", "marginal per batch ms", "at parallel 4", "at parallel 16", "at parallel 32"],
    [[fixedMs, marginalMs, fixedMs / 4 + marginalMs, fixedMs / 16 + marginalMs, fixedMs / 32 + marginalMs]],
  );
}
