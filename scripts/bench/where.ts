// --where at scale: `list --where` on a path a payload index holds against one with no index,
// over a spool of BENCH_WHERE_EVENTS events (10^6 by default: ten per batch, GitHub-like
// payloads of about 600 bytes; a value of either path is held by one event in 1000), and what
// the index costs: its build, and an enqueue with it against one without. The store's own reads
// (listBatches, as the list verb and the dashboard call it) on a real WAL file, in this process;
// then the same on PostgreSQL (BENCH_WHERE_PG_EVENTS, 200,000 by default; 0 skips it, and so
// does a machine without PostgreSQL). The rows are written by SQL in bulk, as history.ts does.
//
//   bun scripts/bench/where.ts     BENCH_WHERE_EVENTS (1000000), BENCH_WHERE_PG_EVENTS, BENCH_WHERE_ROUNDS (5)
import { Database } from "bun:sqlite";
import { join } from "node:path";
import type { NewEvent } from "../../src/store/enqueue.ts";
import { PgSpool } from "../../src/store/pg/db.ts";
import { enqueue } from "../../src/store/sqlite/enqueue.ts";
import { migratePg } from "../../src/store/pg/migrate.ts";
import { listBatchesPg } from "../../src/store/pg/reads.ts";
import { syncPayloadIndexesPg } from "../../src/store/pg/where.ts";
import { closeConnection, openSpool, type SqliteSpool } from "../../src/store/sqlite/db.ts";
import { migrate } from "../../src/store/sqlite/migrate.ts";
import { listBatches } from "../../src/store/sqlite/reads.ts";
import { syncPayloadIndexes } from "../../src/store/sqlite/where.ts";
import { parseWheres } from "../../src/store/where.ts";
import { PG_BIN, startBenchPostgres } from "./lib/pg.ts";
import { fileSize, main, tempHome } from "./lib/procs.ts";
import { emit, table } from "./lib/report.ts";

const EVENTS = Number(process.env.BENCH_WHERE_EVENTS ?? 1_000_000);
// PostgreSQL reads a payload without an index at some 10 µs (its text detoasted, parsed into
// jsonb, inside an exception block): a smaller spool keeps the whole run well under a minute.
const PG_EVENTS = Number(process.env.BENCH_WHERE_PG_EVENTS ?? Math.min(EVENTS, 200_000));
const ROUNDS = Number(process.env.BENCH_WHERE_ROUNDS ?? 5);
const PER_BATCH = 10;
const VALUES = 1000;
const ENQUEUES = 1000;
const NOW = 1_800_000_000;
const BODY = "lorem ipsum dolor sit amet ".repeat(16);

/** The path an index holds, and one with none: each value held by one event in VALUES. */
const INDEXED = "repository.full_name";
const QUERIES = {
  indexed: ["repository.full_name = org/repo-7"],
  indexed_in: ["repository.full_name in (org/repo-7, org/repo-8)"],
  indexed_and_other: ["repository.full_name = org/repo-7", "action = opened"],
  unindexed: ["sender.login = user-7"],
} as const;

/** The i-th event's payload as SQL (SQLite's json_object and PostgreSQL's json_build_object read alike). */
const payloadSql = (fn: string, i: string) =>
  `${fn}('action', (CASE ${i} % 3 WHEN 0 THEN 'opened' WHEN 1 THEN 'closed' ELSE 'synchronize' END),
    'number', ${i} % 5000,
    'repository', ${fn}('full_name', 'org/repo-' || (${i} % ${VALUES}), 'id', ${i} % ${VALUES}, 'private', false),
    'sender', ${fn}('login', 'user-' || ((${i} * 7) % ${VALUES}), 'id', ${i}),
    'pull_request', ${fn}('title', 'change ' || ${i}, 'body', '${BODY}'))`;

function seedSqlite(path: string, events: number): void {
  const db = new Database(path, { strict: true });
  db.run("PRAGMA synchronous = OFF");
  const batches = events / PER_BATCH;
  const series = (n: number) => `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${n})`;
  db.transaction(() => {
    db.run(`${series(batches)}
      INSERT INTO batches (id, route, source, destination, key, state, first_at, last_at, quiet_s, max_s, max_events,
                           max_bytes, count, bytes, sealed_at, content_hash, attempts, delivered_at, result)
      SELECT i, 'r', 'gh', 'http:d', 'k' || (i % 1000), 'delivered', ${NOW} - i, ${NOW} - i, 0, 0, ${PER_BATCH},
             786432, ${PER_BATCH}, 6000, ${NOW} - i, 'sha256:x', 1, ${NOW} - i + 1, 'ok'
      FROM n`);
    db.run(`${series(events)}
      INSERT INTO events (id, source, route, batch_id, event_type, received_at, payload, headers, size)
      SELECT i, 'gh', 'r', (i - 1) / ${PER_BATCH} + 1, 'pull_request', ${NOW} - i, ${payloadSql("json_object", "i")},
             '{}', 600
      FROM n`);
  })();
  db.run("PRAGMA wal_checkpoint(TRUNCATE)");
  db.close();
}

let seq = 0;
function event(): NewEvent {
  seq++;
  return {
    source: "gh",
    key: `new-${seq % 100}`,
    eventType: "pull_request",
    dedupId: null,
    payload: JSON.stringify({
      action: "opened",
      number: seq,
      repository: { full_name: `org/repo-${seq % VALUES}`, id: seq % VALUES, private: false },
      sender: { login: `user-${seq % VALUES}`, id: seq },
      pull_request: { title: `change ${seq}`, body: BODY },
    }),
    raw: null,
    headers: {},
    copies: [
      {
        route: "r",
        destination: "http:d",
        tee: false,
        window: { quiet_s: 60, max_s: 300, max_events: 500, max_bytes: 786432 },
      },
    ],
    dedupWindowS: 86400,
  };
}

/** The median milliseconds of `rounds` runs of `op`, and its last answer. */
async function timed<T>(rounds: number, op: () => T | Promise<T>): Promise<{ ms: number; answer: T }> {
  const ms: number[] = [];
  let answer: T | undefined;
  for (let i = 0; i < rounds; i++) {
    const t0 = performance.now();
    answer = await op();
    ms.push(performance.now() - t0);
  }
  ms.sort((a, b) => a - b);
  return { ms: ms[Math.floor(ms.length / 2)], answer: answer as T };
}

/**
 * The CPU microseconds of one enqueue (ENQUEUES events, each its own transaction): the work an
 * index adds, without the fsync wait that makes wall time noisy.
 */
function enqueueUs(spool: SqliteSpool): number {
  const c0 = process.cpuUsage();
  for (let i = 0; i < ENQUEUES; i++) enqueue(spool, event(), NOW);
  const c = process.cpuUsage(c0);
  return (c.user + c.system) / ENQUEUES;
}

interface Figures {
  backend: string;
  events: number;
  seedS: number;
  buildS: number;
  queries: Record<string, { ms: number; batches: number }>;
  enqueueUs?: { without: number; with: number };
  mib?: number;
}

async function sqliteRun(): Promise<Figures> {
  const dir = tempHome("where");
  const path = join(dir, "spool.db");
  const init = openSpool(path, { create: true });
  migrate(init);
  closeConnection(init.db);
  let t0 = performance.now();
  seedSqlite(path, EVENTS);
  const seedS = (performance.now() - t0) / 1000;
  const spool = openSpool(path);
  try {
    spool.db.run("ANALYZE");
    // A first round warms the statements and the code up; the second is the figure.
    enqueueUs(spool);
    const without = enqueueUs(spool);
    t0 = performance.now();
    syncPayloadIndexes(spool, [INDEXED]);
    const buildS = (performance.now() - t0) / 1000;
    spool.db.run("ANALYZE");
    const withIndex = enqueueUs(spool);
    const queries: Figures["queries"] = {};
    for (const [name, conds] of Object.entries(QUERIES)) {
      const where = parseWheres(conds);
      // A full read of every payload is slow by design: fewer rounds of it.
      const r = await timed(name === "unindexed" ? Math.min(3, ROUNDS) : ROUNDS, () =>
        listBatches(spool, { where, limit: 50 }),
      );
      queries[name] = { ms: r.ms, batches: r.answer.length };
    }
    return {
      backend: "sqlite",
      events: EVENTS,
      seedS,
      buildS,
      queries,
      enqueueUs: { without, with: withIndex },
      mib: fileSize(path) / (1024 * 1024),
    };
  } finally {
    closeConnection(spool.db);
  }
}

async function postgresRun(): Promise<Figures | null> {
  if (!PG_BIN || PG_EVENTS <= 0) return null;
  const server = await startBenchPostgres({ fsync: false });
  try {
    const url = await server.createDatabase("where");
    const pg = new PgSpool({ url });
    try {
      await migratePg(pg, "0123456789ab");
      let t0 = performance.now();
      const batches = PG_EVENTS / PER_BATCH;
      await pg.sql.unsafe(`INSERT INTO batches (id, route, source, destination, key, state, first_at, last_at,
          quiet_s, max_s, max_events, max_bytes, count, bytes, sealed_at, content_hash, attempts, delivered_at, result)
        OVERRIDING SYSTEM VALUE
        SELECT i, 'r', 'gh', 'http:d', 'k' || (i % 1000), 'delivered', ${NOW} - i, ${NOW} - i, 0, 0, ${PER_BATCH},
          786432, ${PER_BATCH}, 6000, ${NOW} - i, 'sha256:x', 1, ${NOW} - i + 1, 'ok'
        FROM generate_series(1, ${batches}) i`);
      await pg.sql.unsafe(`INSERT INTO events (id, source, route, batch_id, event_type, received_at, payload, size)
        OVERRIDING SYSTEM VALUE
        SELECT i, 'gh', 'r', (i - 1) / ${PER_BATCH} + 1, 'pull_request', ${NOW} - i,
          ${payloadSql("json_build_object", "i")}::text, 600
        FROM generate_series(1, ${PG_EVENTS}) i`);
      await pg.sql.unsafe("VACUUM ANALYZE batches");
      await pg.sql.unsafe("VACUUM ANALYZE events");
      const seedS = (performance.now() - t0) / 1000;
      t0 = performance.now();
      await syncPayloadIndexesPg(pg, [INDEXED]);
      const buildS = (performance.now() - t0) / 1000;
      await pg.sql.unsafe("ANALYZE events");
      const queries: Figures["queries"] = {};
      for (const [name, conds] of Object.entries(QUERIES)) {
        const where = parseWheres(conds);
        const r = await timed(name === "unindexed" ? Math.min(3, ROUNDS) : ROUNDS, () =>
          listBatchesPg(pg, { where, limit: 50 }),
        );
        queries[name] = { ms: r.ms, batches: r.answer.length };
      }
      return { backend: "postgres", events: PG_EVENTS, seedS, buildS, queries };
    } finally {
      await pg.close();
    }
  } finally {
    await server.stop();
  }
}

await main("where", 280, async () => {
  const results = [await sqliteRun()];
  const pg = await postgresRun();
  if (pg) results.push(pg);
  else console.error("where: PostgreSQL skipped (not installed, or BENCH_WHERE_PG_EVENTS=0)");
  const rows: (string | number)[][] = [];
  const notes: string[] = [];
  for (const r of results) {
    const config = { backend: r.backend, events: r.events, indexed_path: INDEXED };
    const base = r.queries.unindexed.ms;
    for (const [name, q] of Object.entries(r.queries)) {
      emit("where", "list_ms", q.ms, "ms", {
        ...config,
        query: name,
        conditions: QUERIES[name as keyof typeof QUERIES].join(" AND "),
      });
      emit("where", "unindexed_over_this", base / q.ms, "ratio", { ...config, query: name });
      rows.push([r.backend, name, q.ms, q.batches, base / q.ms]);
    }
    emit("where", "index_build_s", r.buildS, "s", config);
    if (r.enqueueUs) {
      emit("where", "enqueue_cpu_us", r.enqueueUs.without, "us", { ...config, index: false });
      emit("where", "enqueue_cpu_us", r.enqueueUs.with, "us", { ...config, index: true });
      emit("where", "enqueue_cpu_ratio_with_index", r.enqueueUs.with / r.enqueueUs.without, "ratio", config);
    }
    const e = r.enqueueUs;
    notes.push(
      `${r.backend}: ${r.events} events${r.mib ? ` (${r.mib.toFixed(0)} MiB)` : ""}, seeded in ` +
        `${r.seedS.toFixed(1)} s; the index built in ${r.buildS.toFixed(1)} s` +
        (e ? `; an enqueue's CPU ${e.without.toFixed(0)} us without it, ${e.with.toFixed(0)} us with it` : ""),
    );
  }
  table(
    `where: list --where, median of ${ROUNDS} rounds (3 for a full read), on ${INDEXED} (indexed) and ` +
      "sender.login (not)",
    ["backend", "query", "ms", "batches", "unindexed / this"],
    rows,
  );
  for (const n of notes) console.error(n);
});
