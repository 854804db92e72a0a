// The intake half of the PostgreSQL benchmark: the signed ~6 KB GitHub push of intake.ts into
// `hookspool intake` on SQLite, ONE `hookspool intake` on PostgreSQL, and TWO intakes (two homes,
// as on two hosts) sharing one database, at 16 and 64 senders. Every cell's senders are two
// load-generator processes of half the senders each, both at the one intake, or one at each of
// the two, so the load client costs the same everywhere. Sent in rounds, the servers taking
// turns, as intake.ts does. req/s, p50/p99, the ratio to SQLite, and the CPU per event (one per
// request) of the intakes and of the PostgreSQL server's processes (read from /proc), with what
// one server core would carry at that cost. Checked: no non-2xx, every request answered 2xx
// (warm-ups included) is in its spool, and no delivery id is stored twice.
import { existsSync, readFileSync } from "node:fs";
import { Database } from "bun:sqlite";
import { join } from "node:path";
import { SQL } from "bun";
import { makeHome } from "./homes.ts";
import { load, type LoadResult, type LoadSpec, merge } from "./load.ts";
import { SENDER_SECRET, githubPush } from "./payload.ts";
import type { BenchPg } from "./pg.ts";
import { FSYNC, POOL, pgSpool, printStatements } from "./pg-setup.ts";
import { type Child, listeningPort, procCpuS, startHookspool, tempHome } from "./procs.ts";
import type { Receiver } from "./receiver.ts";
import { emit, table } from "./report.ts";

const INTAKE_N = Number(process.env.BENCH_PG_INTAKE_N ?? 3000);
const CONCURRENCY = [16, 64];
const ROUNDS = 3;
const WARMUP = 200;
/** The intake cells together: each round gets its share of this, so a slow machine stays bounded. */
const INTAKE_BUDGET_S = 60;
/** Warm-up requests an intake did not answer 2xx (they are not in its spool): a problem the run reports. */
const warmupRefused: string[] = [];

/** One cell's CPU per event: the intakes' and the PostgreSQL server's, in milliseconds. */
export interface IntakeCost {
  server: string;
  backend: "sqlite" | "postgres";
  intakes: number;
  concurrency: number;
  intakeMs: number;
  postgresMs: number;
}

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

export async function intakeBench(pg: BenchPg, rx: Receiver): Promise<IntakeCost[]> {
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
  const costs: IntakeCost[] = [];
  const cpuOf = (name: string, c: number) => {
    const k = cpu.get(`${name}/${c}`) ?? { hookspool: Number.NaN, postgres: Number.NaN, requests: 1 };
    return (k.hookspool * 1000) / k.requests;
  };
  const refCost = (c: number) => cpuOf("sqlite: 1 intake", c);
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
      const intakeMs = (k.hookspool * 1000) / k.requests;
      const postgresMs = (k.postgres * 1000) / k.requests;
      costs.push({ server: s.name, backend: s.backend, intakes: s.intakes, concurrency: c, intakeMs, postgresMs });
      emit("postgres_intake", "intake_cpu_per_event", intakeMs, "ms", config);
      if (s.backend === "postgres") {
        emit("postgres_intake", "postgres_cpu_per_event", postgresMs, "ms", config);
        // What one core of the server would carry at this cost per event, nothing else running on it.
        emit("postgres_intake", "events_per_s_per_server_core", 1000 / postgresMs, "events/s", config);
        emit("postgres_intake", "intake_cpu_ratio_vs_sqlite", intakeMs / refCost(c), "ratio", config);
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
        intakeMs,
        s.backend === "postgres" ? postgresMs : "-",
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
      "intake CPU ms/event",
      "postgres CPU ms/event",
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
  return costs;
}
