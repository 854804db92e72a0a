// History: what a request and a batch cost as the spool's delivered history grows from 10^4 to
// 10^6 batches (each with its event, its attempt and its dedup row, as a year of webhooks
// leaves them). The store's own functions on a real WAL file with the production pragmas, in
// this process: an enqueue (dedup lookup, join rule, insert), one batch's way through the
// dispatcher's transactions (candidates, claim, outcome), and each per-tick query. Figures are
// per operation, wall time and CPU time (CPU leaves out the fsync wait, so it is the steadier
// measure of work); each size is compared with the smallest. The history rows are written
// straight into the tables by SQL, in bulk, since a million enqueues would take this benchmark
// longer than everything else.
//
//   bun scripts/bench/history.ts     BENCH_HISTORY_SIZES (10000,100000,1000000), BENCH_HISTORY_OPS (1000)
import { Database } from "bun:sqlite";
import { closeSync, fsyncSync, openSync } from "node:fs";
import { join } from "node:path";
import { claimBatches } from "../../src/store/sqlite/claim.ts";
import { anyReadyNow, candidates, nextReadyAt, recoverLeases, sealReady } from "../../src/store/sqlite/queue.ts";
import { closeConnection, openSpool, type SqliteSpool } from "../../src/store/sqlite/db.ts";
import { enqueue } from "../../src/store/sqlite/enqueue.ts";
import type { NewEvent } from "../../src/store/enqueue.ts";
import { migrate } from "../../src/store/sqlite/migrate.ts";
import { recordOutcomes } from "../../src/store/sqlite/outcome.ts";
import { outcome } from "../../src/delivery.ts";
import { fileSize, main, tempHome } from "./lib/procs.ts";
import { emit, table } from "./lib/report.ts";

const SIZES = (process.env.BENCH_HISTORY_SIZES ?? "10000,100000,1000000").split(",").map(Number);
const OPS = Number(process.env.BENCH_HISTORY_OPS ?? 1000);
const DESTINATIONS = 10;
const KEYS = 1000;
const NOW = 1_800_000_000;
const POLICY = {
  maxAttempts: 10,
  backoffBaseS: 15,
  backoffCapS: 3600,
  tripAfter: 5,
  cooldownInitialS: 30,
  cooldownMaxS: 600,
};
const TEXT = "lorem ipsum ".repeat(16);

/**
 * Add delivered batches from+1 .. to (ids below zero, older than every batch the measures add), each with one event,
 * one attempt and a dedup row, over the last 30 days.
 */
function seed(path: string, from: number, to: number): void {
  const db = new Database(path, { strict: true });
  db.run("PRAGMA synchronous = OFF");
  const span = 30 * 86400;
  const series = "WITH RECURSIVE n(i) AS (SELECT $from + 1 UNION ALL SELECT i + 1 FROM n WHERE i < $to)";
  const args = { from, to, now: NOW, span, total: 1_000_000, text: TEXT, dests: DESTINATIONS, keys: KEYS };
  db.transaction(() => {
    // Row 0 of each table: what the measures add then takes ids from 1 up (max + 1), never one
    // a later, larger history wants.
    if (from === 0) {
      const old = NOW - 31 * 86400;
      db.run(`INSERT INTO batches (id, route, source, destination, key, state, first_at, last_at, quiet_s, max_s,
                                   max_events, max_bytes)
        VALUES (0, 'r0', 'src', 'http:d0', 'sentinel', 'dropped', ${old}, ${old}, 0, 0, 1, 1)`);
      db.run(`INSERT INTO events (id, source, route, batch_id, received_at, payload, size)
        VALUES (0, 'src', 'r0', 0, ${old}, '{}', 2)`);
      db.run(`INSERT INTO attempts (id, batch_id, n, destination, started_at) VALUES (0, 0, 1, 'http:d0', ${old})`);
    }
    // at: the i-th row's time, spread evenly over the span.
    const at = "$now - $span + i * $span / $total";
    db.query(`${series}
      INSERT INTO batches (id, route, source, destination, key, state, first_at, last_at, quiet_s, max_s, max_events,
                           max_bytes, count, bytes, sealed_at, content_hash, attempts, delivered_at, result)
      SELECT i - 2000000000, 'r' || (i % $dests), 'src', 'http:d' || (i % $dests), 'k' || (i % $keys), 'delivered',
             ${at}, ${at}, 0, 0, 1, 786432,
             1, 230, ${at}, 'sha256:' || hex(randomblob(32)), 1, ${at} + 1, 'ok'
      FROM n`).run(args);
    db.query(`${series}
      INSERT INTO events (id, source, route, batch_id, event_type, dedup_id, received_at, payload, headers, size)
      SELECT i - 2000000000, 'src', 'r' || (i % $dests), i - 2000000000, 'card.updated', 'h-' || i, ${at},
             json_object('id', 'h-' || i, 'key', 'k' || (i % $keys), 'text', $text), '{}', 230
      FROM n`).run(args);
    db.query(`${series}
      INSERT INTO attempts (id, batch_id, n, destination, started_at, finished_at, outcome, status, duration_ms,
                            counted, delivery_id)
      SELECT i - 2000000000, i - 2000000000, 1, 'http:d' || (i % $dests), ${at}, ${at} + 0.01,
             'ok', 200, 10, 1, 'msg_' || i
      FROM n`).run(args);
    db.query(`${series}
      INSERT INTO dedup (source, dedup_id, event_id, seen_at, dup_count)
      SELECT 'src', 'h-' || i, i - 2000000000, ${at}, 0 FROM n`).run(args);
  })();
  db.run("PRAGMA wal_checkpoint(TRUNCATE)");
  db.close();
  // synchronous = OFF left the seed in the page cache only: flush it now, or the first fsync
  // of the measures pays for all of it.
  const fd = openSync(path, "r+");
  fsyncSync(fd);
  closeSync(fd);
}

let seq = 0;
function event(window: { max_events: number }): NewEvent {
  seq++;
  const k = `k${seq % KEYS}`;
  return {
    source: "src",
    key: k,
    eventType: "card.updated",
    dedupId: `new-${seq}`,
    payload: JSON.stringify({ id: `new-${seq}`, key: k, text: TEXT }),
    raw: null,
    headers: {},
    copies: [
      {
        route: `r${seq % DESTINATIONS}`,
        destination: `http:d${seq % DESTINATIONS}`,
        tee: false,
        window: { quiet_s: 0, max_s: 0, max_bytes: 786432, ...window },
      },
    ],
    dedupWindowS: 86400 * 30,
  };
}

interface Cost {
  wallUs: number;
  cpuUs: number;
}

/** Run `op` `n` times; the wall and CPU microseconds per operation (`per` operations per call). */
function cost(n: number, op: (i: number) => void, per = 1): Cost {
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  for (let i = 0; i < n; i++) op(i);
  const wall = (performance.now() - t0) * 1000;
  const c = process.cpuUsage(c0);
  return { wallUs: wall / (n * per), cpuUs: (c.user + c.system) / (n * per) };
}

function measure(spool: SqliteSpool): Record<string, Cost> {
  const out: Record<string, Cost> = {};
  // An enqueue: each event joins its key's open batch (the quiet window never closes here).
  out.enqueue = cost(OPS, () => enqueue(spool, event({ max_events: 500 }), NOW));
  // Those open batches out of the way, then OPS one-event batches, sealed at their enqueue.
  spool.db.query("UPDATE batches SET state = 'dropped' WHERE state = 'open'").run();
  for (let i = 0; i < OPS; i++) enqueue(spool, event({ max_events: 1 }), NOW);
  // A batch through the dispatcher's transactions, four slots at a time as the default config has.
  out.per_batch = cost(
    OPS / 4,
    () => {
      const picks = candidates(spool, NOW + 1, 4).slice(0, 4);
      const claims = claimBatches(
        spool,
        picks.map((c) => ({
          batchId: c.id,
          destination: c.destination,
          now: NOW + 1,
          leaseUntil: NOW + 60,
          host: "bench",
          pid: 1,
        })),
      );
      recordOutcomes(
        spool,
        claims.flatMap((c, i) =>
          c
            ? [
                {
                  batchId: picks[i].id,
                  attemptId: c.attemptId,
                  owner: c.owner,
                  startedAt: NOW + 1,
                  probe: false,
                  script: false,
                  outcome: outcome({ kind: "ok", reason: "ok", status: 200 }),
                  emits: [],
                  durationMs: 1,
                  now: NOW + 1,
                  jitter: 0.5,
                  policy: POLICY,
                },
              ]
            : [],
        ),
      );
    },
    4,
  );
  const left = candidates(spool, NOW + 1).length;
  if (left !== 0) throw new Error(`history: ${left} batches left undelivered after the per-batch run`);
  out.tick_queries = cost(OPS, () => {
    sealReady(spool, NOW + 2);
    recoverLeases(spool, { now: NOW + 2, all: false });
    candidates(spool, NOW + 2, 4);
    nextReadyAt(spool, NOW + 2);
    anyReadyNow(spool, NOW + 2);
  });
  return out;
}

await main("history", 280, async () => {
  const dir = tempHome("history");
  const path = join(dir, "spool.db");
  const init = openSpool(path, { create: true });
  migrate(init);
  closeConnection(init.db);
  const results: { size: number; costs: Record<string, Cost>; mib: number; seedS: number }[] = [];
  let have = 0;
  for (const size of SIZES) {
    const t0 = performance.now();
    seed(path, have, size);
    have = size;
    const seedS = (performance.now() - t0) / 1000;
    const spool = openSpool(path);
    spool.db.run("ANALYZE");
    // Three rounds, the median of each figure: one slow round on a shared machine is noise.
    const rounds = [measure(spool), measure(spool), measure(spool)];
    const costs: Record<string, Cost> = {};
    for (const op of Object.keys(rounds[0])) {
      const mid = (f: (c: Cost) => number) => rounds.map((r) => f(r[op])).sort((a, b) => a - b)[1];
      costs[op] = { wallUs: mid((c) => c.wallUs), cpuUs: mid((c) => c.cpuUs) };
    }
    closeConnection(spool.db);
    results.push({ size, costs, mib: fileSize(path) / (1024 * 1024), seedS });
  }
  const base = results[0];
  const rows: (string | number)[][] = [];
  for (const r of results) {
    for (const [op, c] of Object.entries(r.costs)) {
      const b = base.costs[op];
      const config = { history_batches: r.size, operation: op, spool_mib: Math.round(r.mib) };
      emit("history", "wall_us_per_op", c.wallUs, "us", config);
      emit("history", "cpu_us_per_op", c.cpuUs, "us", config);
      emit("history", "cpu_ratio_vs_smallest", c.cpuUs / b.cpuUs, "ratio", config);
      emit("history", "wall_ratio_vs_smallest", c.wallUs / b.wallUs, "ratio", config);
      rows.push([r.size, op, c.wallUs, c.cpuUs, c.wallUs / b.wallUs, c.cpuUs / b.cpuUs]);
    }
    rows.push([`(${r.mib.toFixed(0)} MiB, seeded in ${r.seedS.toFixed(1)} s)`, "", "", "", "", ""]);
  }
  table(
    `history: per operation as the delivered history grows (${OPS} operations each, ` +
      `median of 3 rounds; ratio to ${base.size} batches; flat is within 1.2)`,
    ["history batches", "operation", "wall us", "cpu us", "wall ratio", "cpu ratio"],
    rows,
  );
});
