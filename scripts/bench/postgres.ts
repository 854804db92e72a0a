// hookspool on PostgreSQL ([spool] backend = "postgres"), beside the same figures on SQLite from
// the same run, on a throwaway server (lib/pg.ts: fsync, synchronous_commit and full_page_writes
// ON unless BENCH_PG_FSYNC=off) reached over its unix socket.
//
// 1. Intake: the signed ~6 KB GitHub push of intake.ts into `hookspool intake` on SQLite, ONE
//    `hookspool intake` on PostgreSQL, and TWO intakes (two homes, as on two hosts) sharing one
//    database, at 16 and 64 senders. Every cell's senders are two load-generator processes of
//    half the senders each, both at the one intake, or one at each of the two, so the load
//    client costs the same everywhere. Sent in rounds, the servers taking turns, as intake.ts
//    does. req/s, p50/p99, the ratio to SQLite, and the CPU per request of the intakes and of
//    the PostgreSQL server's processes (read from /proc). Checked: no non-2xx, every request
//    answered 2xx (warm-ups included) is in its spool, and no delivery id is stored twice.
// 2. Dispatch: a backlog of N single-event sealed batches over K keys, posted once through an
//    intake into a source with max_events = 1 (each batch sealed in its enqueue transaction, as
//    dispatch.ts builds it), into a template database every PostgreSQL drain copies (CREATE
//    DATABASE ... TEMPLATE); drained with the default [dispatch] config by ONE `hookspool
//    dispatch`, and by TWO dispatchers in homes of their own sharing the database, started
//    together. The reference is the same backlog on SQLite (built through its intake each time)
//    drained by one `hookspool dispatch`. In rounds, the three taking turns. batches/s from the
//    first 2xx to the last, the time from spawn to the last 2xx, each dispatcher's share, the
//    CPU of the dispatchers and of the server. Each copy is dropped after its drain, with a
//    CHECKPOINT, so no drain pays for the previous one's writes.
//    Checked: every batch reached the receiver exactly once, every batch row is delivered with
//    one ok attempt, and the dispatchers' delivered lines add up.
//
// When PostgreSQL is not installed it prints one `skipped` line and exits 0.
//
//   bun scripts/bench/postgres.ts     BENCH_PG_INTAKE_N (3000), BENCH_PG_DISPATCH_N (2000),
//                                     BENCH_PG_DISPATCH_K (2000), BENCH_PG_DRAIN_ROUNDS (2),
//                                     BENCH_PG_FSYNC (on; off as the test suites run it), BENCH_BINARY=1
import { existsSync, readFileSync } from "node:fs";
import { Database } from "bun:sqlite";
import { join } from "node:path";
import { SQL } from "bun";
import { BENCH_TEMPLATE, makeHome } from "./lib/homes.ts";
import { load, type LoadResult, type LoadSpec, merge } from "./lib/load.ts";
import { SENDER_SECRET, githubPush } from "./lib/payload.ts";
import { type BenchPg, PG_BIN, startBenchPostgres } from "./lib/pg.ts";
import { type Child, listeningPort, main, procCpuS, startHookspool, tempHome } from "./lib/procs.ts";
import { receiver, type Receiver } from "./lib/receiver.ts";
import { emit, table } from "./lib/report.ts";

if (!PG_BIN) {
  console.log(JSON.stringify({ bench: "postgres", skipped: "PostgreSQL not installed (apt-get install postgresql)" }));
  process.exit(0);
}

const INTAKE_N = Number(process.env.BENCH_PG_INTAKE_N ?? 3000);
const DISPATCH_N = Number(process.env.BENCH_PG_DISPATCH_N ?? 2000);
const DISPATCH_K = Number(process.env.BENCH_PG_DISPATCH_K ?? 2000);
const FSYNC = (process.env.BENCH_PG_FSYNC ?? "on") !== "off";
const DRAIN_ROUNDS = Number(process.env.BENCH_PG_DRAIN_ROUNDS ?? 2);
/**
 * BENCH_PG_STATEMENTS=1: pg_stat_statements on, each phase's busiest statements on stderr (a diagnosis, not a figure).
 */
const STATEMENTS = process.env.BENCH_PG_STATEMENTS === "1";
/** BENCH_PG_ONLY=intake or dispatch: one half of the bench. */
const ONLY = process.env.BENCH_PG_ONLY ?? "";
const CONCURRENCY = [16, 64];
const ROUNDS = 3;
const WARMUP = 200;
/** The intake cells together: each round gets its share of this, so a slow machine stays bounded. */
const INTAKE_BUDGET_S = 60;
const POOL = 4;
/** Warm-up requests an intake did not answer 2xx (they are not in its spool): a problem the run reports. */
const warmupRefused: string[] = [];

const pgSpool = (extra = "") => `
[spool]
backend = "postgres"
url = { env = "HOOKSPOOL_PG_URL" }
pool = ${POOL}
${extra}`;

/** The busiest statements since the last call, on stderr, when BENCH_PG_STATEMENTS=1. */
async function printStatements(pg: BenchPg, phase: string): Promise<void> {
  const rows = await pg.statements();
  if (!STATEMENTS) return;
  table(
    `postgres statements: ${phase}`,
    ["calls", "exec ms", "plan ms", "rows", "statement"],
    rows.map((r) => [r.calls, r.totalMs, r.planMs, r.rows, r.query]),
  );
}

// ---- intake -------------------------------------------------------------------------------

interface IntakeServer {
  name: string;
  backend: "sqlite" | "postgres";
  intakes: number;
  children: Child[];
  ports: number[];
  /** Requests sent to it so far, warm-ups included: the event rows its spool must hold. */
  sent: number;
}

const GITHUB_HEADERS = {
  "User-Agent": "GitHub-Hookshot/bench",
  "X-GitHub-Event": "push",
  "X-GitHub-Hook-ID": "512340001",
};
let runId = 0;

/**
 * One round of one cell: two load generators of c/2 senders at once, spread over the server's intakes; one result over
 * both.
 */
async function round(
  s: IntakeServer,
  c: number,
  n: number,
  warmup: number,
  maxSeconds: number,
  body: string,
  work: string,
): Promise<LoadResult> {
  const half = (spec: Partial<LoadSpec> & { url: string }): LoadSpec => ({
    concurrency: c / 2,
    n: Math.ceil(n / 2),
    maxSeconds,
    warmup: Math.ceil(warmup / 2),
    body,
    headers: GITHUB_HEADERS,
    deliveryHeader: "X-GitHub-Delivery",
    sign: { header: "X-Hub-Signature-256", prefix: "sha256=", secret: SENDER_SECRET },
    run: ++runId,
    keepLatencies: true,
    ackedFile: join(work, `acked-${s.backend}.txt`),
    ...spec,
  });
  const specs = [0, 1].map((i) => half({ url: `http://127.0.0.1:${s.ports[i % s.ports.length]}/hooks/github` }));
  const rs = await Promise.all(specs.map((spec) => load(spec, work)));
  for (let i = 0; i < rs.length; i++) {
    const refused = Object.values(rs[i].warmup_failed ?? {}).reduce((a, n) => a + n, 0);
    s.sent += rs[i].sent + (specs[i].warmup ?? 0) - refused;
    if (refused) warmupRefused.push(`${s.name}: ${JSON.stringify(rs[i].warmup_failed)}`);
  }
  // The two ran side by side: the requests add up over the longer of the two times.
  const lat = rs.flatMap((r) => r.lat_ms ?? []).sort((a, b) => a - b);
  const statuses: Record<string, number> = {};
  for (const r of rs) for (const [k, v] of Object.entries(r.statuses)) statuses[k] = (statuses[k] ?? 0) + v;
  const sent = rs.reduce((a, r) => a + r.sent, 0);
  const seconds = Math.max(...rs.map((r) => r.seconds));
  const out = merge(rs);
  return {
    ...out,
    sent,
    ok: rs.reduce((a, r) => a + r.ok, 0),
    failed: rs.reduce((a, r) => a + r.failed, 0),
    statuses,
    seconds,
    rps: sent / seconds,
    lat_ms: lat,
  };
}

async function intakeBench(pg: BenchPg, rx: Receiver): Promise<void> {
  const body = githubPush();
  const bodyBytes = body.replaceAll("{{SEQ}}", "0".repeat(40)).length;
  const servers: IntakeServer[] = [];

  const sqliteHome = await makeHome("pg-intake-sqlite", { receiverPort: rx.port });
  const sqliteIntake = await startHookspool("sqlite-intake", sqliteHome, ["intake"]);
  servers.push({
    name: "sqlite: 1 intake",
    backend: "sqlite",
    intakes: 1,
    children: [sqliteIntake],
    ports: [await listeningPort(sqliteIntake)],
    sent: 0,
  });

  // Two homes (as on two hosts) on one database; "1 intake" sends to the first only.
  const url = await pg.createDatabase("intake");
  const env = { HOOKSPOOL_PG_URL: url };
  const pgChildren: Child[] = [];
  for (const name of ["a", "b"]) {
    const home = await makeHome(`pg-intake-${name}`, { receiverPort: rx.port, extra: pgSpool(), env });
    pgChildren.push(await startHookspool(`pg-intake-${name}`, home, ["intake"], env));
  }
  const pgPorts = await Promise.all(pgChildren.map(listeningPort));
  const one: IntakeServer = {
    name: "postgres: 1 intake",
    backend: "postgres",
    intakes: 1,
    children: [pgChildren[0]],
    ports: [pgPorts[0]],
    sent: 0,
  };
  const two: IntakeServer = {
    name: "postgres: 2 intakes",
    backend: "postgres",
    intakes: 2,
    children: pgChildren,
    ports: pgPorts,
    sent: 0,
  };
  servers.push(one, two);

  const work = tempHome("pg-intake-load");
  await pg.statements();
  const rounds = new Map<string, LoadResult[]>();
  /**
   * CPU seconds used during each cell and the requests it took (warm-ups included): hookspool's intakes, the PostgreSQL
   * server.
   */
  const cpu = new Map<string, { hookspool: number; postgres: number; requests: number }>();
  const hsCpu = (s: IntakeServer) => s.children.reduce((a, c) => a + procCpuS(c.proc.pid), 0);
  const total = CONCURRENCY.length * ROUNDS * servers.length;
  let done = 0;
  const t0 = performance.now();
  for (const c of CONCURRENCY) {
    for (let r = 0; r < ROUNDS; r++) {
      for (const s of servers) {
        const share = (INTAKE_BUDGET_S - (performance.now() - t0) / 1000) / (total - done++);
        // Every intake's first cell warms it up (JIT, connections, the pool); later rounds only refill the connections.
        const warm = c === CONCURRENCY[0] && r === 0 ? WARMUP : Math.min(WARMUP, 2 * c);
        const before = { hs: hsCpu(s), pg: pg.cpuS(), sent: s.sent };
        const res = await round(s, c, Math.ceil(INTAKE_N / ROUNDS), warm, Math.max(1, share), body, work);
        const k = cpu.get(`${s.name}/${c}`) ?? { hookspool: 0, postgres: 0, requests: 0 };
        cpu.set(`${s.name}/${c}`, {
          hookspool: k.hookspool + hsCpu(s) - before.hs,
          postgres: k.postgres + pg.cpuS() - before.pg,
          requests: k.requests + s.sent - before.sent,
        });
        rounds.set(`${s.name}/${c}`, [...(rounds.get(`${s.name}/${c}`) ?? []), res]);
      }
    }
  }

  // Correctness: every request got its 2xx, every acked one is in its spool, none is stored twice.
  const sqliteDb = new Database(join(sqliteHome, "spool.db"), { readonly: true });
  const sqliteEvents = Number((sqliteDb.query("SELECT COUNT(*) AS n FROM events").get() as { n: number }).n);
  const sqliteIds = new Set(
    (sqliteDb.query("SELECT dedup_id FROM events").all() as { dedup_id: string }[]).map((r) => r.dedup_id),
  );
  sqliteDb.close();
  const sql = new SQL(url, { max: 1 });
  const [{ n: pgEvents }] = await sql`SELECT COUNT(*)::int AS n FROM events`;
  // A delivery id stored twice would be a second copy of one request (dedup failed across intakes).
  const [{ n: pgTwice }] = await sql`SELECT COUNT(*)::int AS n FROM (SELECT dedup_id FROM events
      WHERE dedup_id IS NOT NULL GROUP BY source, dedup_id HAVING COUNT(*) > 1) t`;
  const [{ n: pgDistinct }] = await sql`SELECT COUNT(DISTINCT dedup_id)::int AS n FROM events`;
  const pgIds = new Set(((await sql`SELECT dedup_id FROM events`) as { dedup_id: string }[]).map((r) => r.dedup_id));
  await sql.close();
  // The proof that matters: every request that got its 2xx is in its spool.
  const lost = (backend: string, stored: Set<string>) => {
    const path = join(work, `acked-${backend}.txt`);
    const acked = existsSync(path) ? readFileSync(path, "utf8").split("\n").filter(Boolean) : [];
    return { acked: acked.length, lost: acked.filter((id) => !stored.has(id)).length };
  };
  const ackCheck = { sqlite: lost("sqlite", sqliteIds), postgres: lost("postgres", pgIds) };
  const problems: string[] = [];
  // A request whose answer the sender never saw may be stored (at least once); one stored twice may not.
  if (sqliteEvents !== sqliteIds.size)
    problems.push(`sqlite: ${sqliteEvents} event rows, ${sqliteIds.size} delivery ids`);
  for (const w of warmupRefused) problems.push(`warm-up requests not acked: ${w}`);
  if (Number(pgTwice) > 0) problems.push(`postgres: ${pgTwice} delivery ids stored more than once`);
  for (const [backend, c] of Object.entries(ackCheck))
    if (c.lost > 0 || c.acked === 0)
      problems.push(`${backend}: ${c.lost} of ${c.acked} acked requests not in the spool`);
  console.error(
    `acked and stored: sqlite ${ackCheck.sqlite.acked - ackCheck.sqlite.lost} of ${ackCheck.sqlite.acked}, ` +
      `postgres ${ackCheck.postgres.acked - ackCheck.postgres.lost} of ${ackCheck.postgres.acked}`,
  );
  console.error(`postgres: ${pgDistinct} distinct delivery ids, ${pgTwice} stored more than once`);
  for (const s of servers)
    for (const ch of s.children)
      if (ch.proc.exitCode !== null || ch.proc.signalCode)
        problems.push(`${s.name}: ${ch.name} exited: ${ch.log().slice(-400)}`);

  const results = new Map<string, LoadResult>();
  const rows: (string | number)[][] = [];
  for (const c of CONCURRENCY) {
    const ref = merge(rounds.get(`sqlite: 1 intake/${c}`) ?? []);
    for (const s of servers) {
      const r = merge(rounds.get(`${s.name}/${c}`) ?? []);
      results.set(`${s.name}/${c}`, r);
      if (r.failed > 0) problems.push(`${s.name}, ${c} senders: ${r.failed} non-2xx (${JSON.stringify(r.statuses)})`);
      const config = {
        backend: s.backend,
        intakes: s.intakes,
        concurrency: c,
        requests: r.sent,
        rounds: ROUNDS,
        body_bytes: bodyBytes,
        pg_fsync: s.backend === "postgres" ? FSYNC : null,
        pool: s.backend === "postgres" ? POOL : null,
      };
      emit("postgres_intake", "req_per_s", r.rps, "req/s", config);
      emit("postgres_intake", "latency_p50", r.p50_ms, "ms", config);
      emit("postgres_intake", "latency_p99", r.p99_ms, "ms", config);
      emit("postgres_intake", "latency_max", r.max_ms, "ms", config);
      emit("postgres_intake", "non_2xx", r.failed, "requests", config);
      const k = cpu.get(`${s.name}/${c}`) ?? { hookspool: Number.NaN, postgres: Number.NaN, requests: 1 };
      emit("postgres_intake", "intake_cpu_per_request", (k.hookspool * 1000) / k.requests, "ms", config);
      emit("postgres_intake", "postgres_cpu_per_request", (k.postgres * 1000) / k.requests, "ms", config);
      if (s.backend === "postgres") {
        emit("postgres_intake", "req_per_s_ratio_vs_sqlite", r.rps / ref.rps, "ratio", config);
        emit("postgres_intake", "p99_ratio_vs_sqlite", r.p99_ms / ref.p99_ms, "ratio", config);
      }
      rows.push([
        s.name,
        c,
        r.sent,
        r.rps,
        r.p50_ms,
        r.p99_ms,
        r.max_ms,
        r.failed,
        s.backend === "postgres" ? r.rps / ref.rps : 1,
        (k.hookspool * 1000) / k.requests,
        (k.postgres * 1000) / k.requests,
      ]);
    }
  }
  emit("postgres_intake", "event_rows_match", problems.length ? 0 : 1, "bool", {
    sqlite_rows: sqliteEvents,
    postgres_rows: Number(pgEvents),
  });
  table(
    `postgres intake: ${bodyBytes} B signed GitHub push, ${INTAKE_N} requests per cell in ${ROUNDS} rounds, ` +
      `senders split over two load generators; PostgreSQL fsync ${FSYNC ? "on" : "OFF"}, pool ${POOL}`,
    [
      "server",
      "senders",
      "requests",
      "req/s",
      "p50 ms",
      "p99 ms",
      "max ms",
      "non-2xx",
      "req/s vs sqlite",
      "intake CPU ms/req",
      "postgres CPU ms/req",
    ],
    rows,
  );
  console.error(
    `event rows: sqlite ${sqliteEvents} (requests ${servers[0].sent}), ` +
      `postgres ${pgEvents} (requests ${one.sent + two.sent})`,
  );
  for (const ch of [sqliteIntake, ...pgChildren]) await ch.stop();
  await printStatements(pg, "the intake cells");
  if (problems.length) throw new Error(`postgres intake: ${problems.join("; ")}`);
}

// ---- dispatch -----------------------------------------------------------------------------

const SOURCE = `[sources.backlog]
${BENCH_TEMPLATE}
secrets.secret = { file = "secrets/github" }
max_events = 1
action = "receiver"
`;
// About 1 KB, as dispatch.ts sends.
const BODY = JSON.stringify({
  id: "{{SEQ}}",
  key: "k{{KEY}}",
  type: "ticket.updated",
  sent_at: 0,
  text: "lorem ipsum ".repeat(80),
}).replace('"sent_at":0', '"sent_at":{{TS}}');
const TEMPLATE_DB = "backlog_template";

async function until(what: string, ms: number, ok: () => boolean | Promise<boolean>): Promise<void> {
  const end = performance.now() + ms;
  while (!(await ok())) {
    if (performance.now() > end) throw new Error(`gave up waiting for ${what} after ${ms} ms`);
    await Bun.sleep(5);
  }
}

/** Post the backlog through `home`'s intake (max_events = 1: each event is a sealed batch), then stop the intake. */
async function fillBacklog(home: string, env: Record<string, string>, tag: string): Promise<number> {
  const t = performance.now();
  const intake = await startHookspool(`backlog-${tag}-intake`, home, ["intake"], env);
  const r = await load(
    {
      url: `http://127.0.0.1:${await listeningPort(intake)}/hooks/backlog`,
      concurrency: 16,
      n: DISPATCH_N,
      maxSeconds: 60,
      body: BODY,
      keys: DISPATCH_K,
      headers: {},
      sign: { header: "X-Bench-Signature", prefix: "sha256=", secret: SENDER_SECRET },
    },
    home,
  );
  await intake.stop();
  if (r.ok !== DISPATCH_N)
    throw new Error(`${tag} backlog: ${r.ok} of ${DISPATCH_N} events accepted (${JSON.stringify(r.statuses)})`);
  return (performance.now() - t) / 1000;
}

interface BatchCounts {
  sealed: number;
  undelivered: number;
  attempts: number;
  ok: number;
}

async function countsPg(url: string): Promise<BatchCounts> {
  const sql = new SQL(url, { max: 1 });
  try {
    const [r] = await sql`SELECT COUNT(*) FILTER (WHERE state = 'sealed')::int AS s,
        COUNT(*) FILTER (WHERE state <> 'delivered')::int AS u,
        (SELECT COUNT(*)::int FROM attempts) AS a,
        (SELECT COUNT(*)::int FROM attempts WHERE outcome = 'ok') AS ok
      FROM batches`;
    return { sealed: Number(r.s), undelivered: Number(r.u), attempts: Number(r.a), ok: Number(r.ok) };
  } finally {
    await sql.close();
  }
}

function countsSqlite(home: string): BatchCounts {
  const db = new Database(join(home, "spool.db"), { readonly: true });
  try {
    const n = (q: string) => Number((db.query(q).get() as { n: number }).n);
    return {
      sealed: n("SELECT COUNT(*) AS n FROM batches WHERE state = 'sealed'"),
      undelivered: n("SELECT COUNT(*) AS n FROM batches WHERE state <> 'delivered'"),
      attempts: n("SELECT COUNT(*) AS n FROM attempts"),
      ok: n("SELECT COUNT(*) AS n FROM attempts WHERE outcome = 'ok'"),
    };
  } finally {
    db.close();
  }
}

interface Drain {
  name: string;
  backend: "sqlite" | "postgres";
  dispatchers: number;
  round: number;
  delivered: number;
  duplicates: number;
  attempts: number;
  drainS: number;
  firstS: number;
  /** From the first 2xx to the last. */
  spanS: number;
  rate: number;
  /** Batches each dispatcher logged as delivered. */
  shares: number[];
  /** CPU seconds of the dispatchers (their start-up included) and of the PostgreSQL server during the drain. */
  cpuHookspool: number;
  cpuPostgres: number;
}

/**
 * Drain one backlog: on SQLite one built now through the home's intake; on PostgreSQL a copy of
 * the template database (CREATE DATABASE ... TEMPLATE), so every PostgreSQL drain starts from the
 * same rows. `dispatchers` processes in homes of their own start together; checked at the end.
 */
async function drain(pg: BenchPg, backend: "sqlite" | "postgres", dispatchers: number, round: number): Promise<Drain> {
  const tag = `${backend}${dispatchers}r${round}`;
  const rx = receiver();
  const children: Child[] = [];
  try {
    const url = backend === "postgres" ? await pg.createDatabase(`drain_${tag}`, TEMPLATE_DB) : "";
    const env: Record<string, string> = backend === "postgres" ? { HOOKSPOOL_PG_URL: url } : {};
    const extra = `${SOURCE}${backend === "postgres" ? pgSpool() : ""}`;
    const homes: string[] = [];
    for (let i = 0; i < dispatchers; i++)
      homes.push(await makeHome(`pg-drain-${tag}-${i}`, { receiverPort: rx.port, noGithub: true, extra, env }));
    if (backend === "sqlite") await fillBacklog(homes[0], env, tag);
    const count = () => (backend === "postgres" ? countsPg(url) : Promise.resolve(countsSqlite(homes[0])));
    const before = await count();
    if (before.sealed !== DISPATCH_N)
      throw new Error(`${tag}: ${before.sealed} sealed batches before the drain, expected ${DISPATCH_N}`);

    if (backend === "postgres") await pg.statements();
    const pgCpu0 = pg.cpuS();
    const t0 = Date.now() / 1000;
    for (let i = 0; i < dispatchers; i++)
      children.push(await startHookspool(`drain-${tag}-dispatch-${i}`, homes[i], ["dispatch"], env));
    const distinct = () => new Set(rx.arrivals.map((a) => a.batchId)).size;
    await until(`${DISPATCH_N} batches delivered (${tag})`, 60_000, () => {
      for (const c of children)
        if (c.proc.exitCode !== null || c.proc.signalCode) throw new Error(`${c.name} exited: ${c.log().slice(-600)}`);
      return distinct() >= DISPATCH_N;
    });
    const at = rx.arrivals.map((a) => a.at).sort((a, b) => a - b);
    const first = at[0] ?? Number.NaN;
    const last = at[at.length - 1] ?? Number.NaN;
    // The outcome commits just after the receiver's 2xx: wait for the last ones.
    let after = await count();
    const settle = performance.now() + 15_000;
    while ((after.undelivered !== 0 || after.ok !== DISPATCH_N) && performance.now() < settle) {
      await Bun.sleep(20);
      after = await count();
    }
    const cpuHookspool = children.reduce((a, c) => a + procCpuS(c.proc.pid), 0);
    const cpuPostgres = pg.cpuS() - pgCpu0;
    for (const c of children) await c.stop();
    if (backend === "postgres" && round === 1) await printStatements(pg, `drain, ${dispatchers} dispatcher(s)`);
    const shares = children.map((c) => (c.log().match(/: delivered .*batch=/g) ?? []).length);
    const d: Drain = {
      name: `${backend}: ${dispatchers} dispatch${dispatchers > 1 ? "ers" : "er"}`,
      backend,
      dispatchers,
      round,
      delivered: distinct(),
      duplicates: rx.arrivals.length - distinct(),
      attempts: after.attempts,
      drainS: last - t0,
      firstS: first - t0,
      spanS: last - first,
      rate: (at.length - 1) / (last - first),
      shares,
      cpuHookspool,
      cpuPostgres,
    };
    const problems: string[] = [];
    if (d.delivered !== DISPATCH_N) problems.push(`${d.delivered} distinct batches delivered of ${DISPATCH_N}`);
    if (d.duplicates !== 0) problems.push(`${d.duplicates} batches delivered more than once`);
    if (after.undelivered !== 0) problems.push(`${after.undelivered} batch rows not delivered`);
    if (after.ok !== DISPATCH_N) problems.push(`${after.ok} ok attempts for ${DISPATCH_N} batches`);
    if (shares.reduce((a, b) => a + b, 0) !== DISPATCH_N)
      problems.push(`the dispatchers logged ${shares.join("+")} deliveries`);
    const config = {
      backend,
      dispatchers,
      round,
      batches: DISPATCH_N,
      keys: DISPATCH_K,
      events_per_batch: 1,
      dispatch: "defaults (poll_s 1, parallel 4, max_inflight 4 per dispatcher)",
      pg_fsync: backend === "postgres" ? FSYNC : null,
    };
    emit("postgres_dispatch", "batches_per_s", d.rate, "batches/s", config);
    emit("postgres_dispatch", "drain_time", d.drainS, "s", config);
    emit("postgres_dispatch", "first_delivery_after_spawn", d.firstS, "s", config);
    emit("postgres_dispatch", "batches_delivered", d.delivered, "batches", config);
    emit("postgres_dispatch", "duplicate_deliveries", d.duplicates, "batches", config);
    emit("postgres_dispatch", "attempts", d.attempts, "attempts", config);
    emit("postgres_dispatch", "dispatcher_cpu", d.cpuHookspool, "s", {
      ...config,
      note: "every dispatcher process, start-up included",
    });
    emit("postgres_dispatch", "postgres_cpu", d.cpuPostgres, "s", config);
    if (dispatchers > 1)
      for (let i = 0; i < shares.length; i++)
        emit("postgres_dispatch", "delivered_by_dispatcher", shares[i], "batches", { ...config, dispatcher: i });
    if (problems.length) throw new Error(`${d.name}, round ${round}: ${problems.join("; ")}`);
    return d;
  } finally {
    for (const c of children) await c.stop();
    rx.stop();
    // Drop the copy and CHECKPOINT, so the next drain does not pay for this one's writes.
    if (backend === "postgres") await pg.dropDatabase(`drain_${tag}`);
  }
}

async function dispatchBench(pg: BenchPg): Promise<void> {
  // The PostgreSQL backlog, built once through an intake into the template every drain copies.
  const rx = receiver();
  let backlogS: number;
  try {
    const env = { HOOKSPOOL_PG_URL: await pg.createDatabase(TEMPLATE_DB) };
    const home = await makeHome("pg-backlog", {
      receiverPort: rx.port,
      noGithub: true,
      extra: `${SOURCE}${pgSpool()}`,
      env,
    });
    backlogS = await fillBacklog(home, env, "template");
    const c = await countsPg(env.HOOKSPOOL_PG_URL);
    if (c.sealed !== DISPATCH_N)
      throw new Error(`template backlog: ${c.sealed} sealed batches, expected ${DISPATCH_N}`);
    // A TEMPLATE copy needs no session on the template; the intake and migrate have gone. Then a clean start for the
    // first drain.
    await pg.dropDatabase("intake");
  } finally {
    rx.stop();
  }
  emit("postgres_dispatch", "backlog_build_time", backlogS, "s", {
    backend: "postgres",
    batches: DISPATCH_N,
    senders: 16,
    pg_fsync: FSYNC,
  });

  const drains: Drain[] = [];
  for (let r = 1; r <= DRAIN_ROUNDS; r++)
    for (const [backend, n] of [
      ["sqlite", 1],
      ["postgres", 1],
      ["postgres", 2],
    ] as const)
      drains.push(await drain(pg, backend, n, r));

  // Each layout over its rounds: batches delivered after the first over the time from first to last 2xx.
  const layouts = ["sqlite: 1 dispatcher", "postgres: 1 dispatcher", "postgres: 2 dispatchers"];
  const rate = (name: string) => {
    const ds = drains.filter((d) => d.name === name);
    return ds.reduce((a, d) => a + d.delivered - 1, 0) / ds.reduce((a, d) => a + d.spanS, 0);
  };
  const ref = rate(layouts[0]);
  for (const name of layouts) {
    const d = drains.find((x) => x.name === name) as Drain;
    const config = {
      backend: d.backend,
      dispatchers: d.dispatchers,
      rounds: DRAIN_ROUNDS,
      batches: DISPATCH_N,
      pg_fsync: d.backend === "postgres" ? FSYNC : null,
    };
    emit("postgres_dispatch", "batches_per_s_all_rounds", rate(name), "batches/s", config);
    if (d.backend === "postgres")
      emit("postgres_dispatch", "batches_per_s_ratio_vs_sqlite", rate(name) / ref, "ratio", config);
  }
  table(
    `postgres dispatch: drain ${DISPATCH_N} single-event sealed batches over ${DISPATCH_K} keys, ` +
      `default [dispatch] (max_inflight 4 per dispatcher); PostgreSQL fsync ${FSYNC ? "on" : "OFF"}`,
    [
      "dispatchers",
      "round",
      "delivered",
      "dupes",
      "attempts",
      "drain s (from spawn)",
      "first 2xx s",
      "batches/s",
      "per dispatcher",
      "dispatcher CPU s",
      "postgres CPU s",
    ],
    drains.map((d) => [
      d.name,
      d.round,
      d.delivered,
      d.duplicates,
      d.attempts,
      d.drainS,
      d.firstS,
      d.rate,
      d.shares.join("+"),
      d.cpuHookspool,
      d.cpuPostgres,
    ]),
  );
  table(
    `postgres dispatch: batches/s over ${DRAIN_ROUNDS} round(s), against SQLite`,
    ["dispatchers", "batches/s", "vs sqlite"],
    layouts.map((name) => [name, rate(name), rate(name) / ref]),
  );
  console.error(
    `the PostgreSQL backlog (${DISPATCH_N} requests, 16 senders, one intake) took ${backlogS.toFixed(1)} s to build`,
  );
}

await main("postgres", 200, async () => {
  const pg = await startBenchPostgres({ fsync: FSYNC, statements: STATEMENTS });
  try {
    const fsync = FSYNC
      ? "ON (synchronous_commit, full_page_writes on)"
      : "OFF (synchronous_commit, full_page_writes off): it flatters PostgreSQL's commit cost";
    console.error(
      `postgres bench: ${pg.version}, a throwaway cluster on a unix socket${pg.asNobody ? " (run as nobody)" : ""}, ` +
        `fsync ${fsync}`,
    );
    emit("postgres", "server", 1, "server", {
      version: pg.version,
      fsync: FSYNC,
      synchronous_commit: FSYNC,
      socket: "unix",
      pool: POOL,
    });
    const rx = receiver();
    try {
      if (ONLY !== "dispatch") await intakeBench(pg, rx);
    } finally {
      rx.stop();
    }
    if (ONLY !== "intake") await dispatchBench(pg);
  } finally {
    await pg.stop();
  }
});
