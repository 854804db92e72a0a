// The dispatch half of the PostgreSQL benchmark. Two backlogs, each posted once through an
// intake into a template database every PostgreSQL drain copies (CREATE DATABASE ... TEMPLATE):
//
// - sealed: N single-event sealed batches over K keys (a source with max_events = 1, each batch
//   sealed in its enqueue transaction, as dispatch.ts builds it);
// - due: N one-event OPEN batches over N keys whose quiet window has ended, so the dispatcher
//   must seal them first (the start after an outage: how long until its first delivery).
//
// Each drained with the default [dispatch] config by ONE `hookspool dispatch`, and the sealed one
// also by TWO dispatchers in homes of their own sharing the database, started together. The
// reference is the same backlog on SQLite (built through its intake each time) drained by one
// `hookspool dispatch`. The sealed one again on both backends with parallel and the receiver's
// max_inflight at 16 (BENCH_PG_WIDE_PARALLEL): a tick claims at most `parallel` batches, and
// the claim's and the outcome's transactions cost much the same whatever they hold. In rounds,
// the layouts taking turns. batches/s from the first 2xx to the last, the time from spawn to
// the first and to the last 2xx, each dispatcher's share, and the CPU per batch of the
// dispatchers and of the server. Each copy is dropped after its drain, with
// a CHECKPOINT, so no drain pays for the previous one's writes. Checked: every batch reached the
// receiver exactly once, every batch row is delivered with one ok attempt, and the dispatchers'
// delivered lines add up.
import { Database } from "bun:sqlite";
import { join } from "node:path";
import { SQL } from "bun";
import { BACKLOG_BODY, backlogSource, makeHome } from "./homes.ts";
import { load } from "./load.ts";
import { SENDER_SECRET } from "./payload.ts";
import type { BenchPg } from "./pg.ts";
import { FSYNC, pgSpool, printStatements } from "./pg-setup.ts";
import { type Child, listeningPort, procCpuS, startHookspool } from "./procs.ts";
import { receiver } from "./receiver.ts";
import { emit } from "./report.ts";
import { type Backlog, DEFAULT_PARALLEL, type Drain, emitDrain, summarise } from "./pg-drain-report.ts";

const DISPATCH_N = Number(process.env.BENCH_PG_DISPATCH_N ?? 2000);
const DISPATCH_K = Number(process.env.BENCH_PG_DISPATCH_K ?? 2000);
const DUE_N = Number(process.env.BENCH_PG_DUE_N ?? 1000);
const DRAIN_ROUNDS = Number(process.env.BENCH_PG_DRAIN_ROUNDS ?? 2);
/** The wider parallel a layout drains with too (the receiver's max_inflight with it). */
const WIDE_PARALLEL = Number(process.env.BENCH_PG_WIDE_PARALLEL ?? 16);
/** The due backlog's quiet window: its batches are due this long after their one event. */
const DUE_QUIET_S = 0.5;

const source = (windows: string) => backlogSource("backlog", windows);

const BACKLOGS: Record<Backlog["kind"], Backlog> = {
  sealed: {
    kind: "sealed",
    n: DISPATCH_N,
    keys: DISPATCH_K,
    source: source("max_events = 1"),
    template: "backlog_template",
  },
  due: {
    kind: "due",
    n: DUE_N,
    keys: DUE_N,
    source: source(`quiet_s = ${DUE_QUIET_S}\nmax_s = 3600`),
    template: "due_template",
  },
};

async function until(what: string, ms: number, ok: () => boolean | Promise<boolean>): Promise<void> {
  const end = performance.now() + ms;
  while (!(await ok())) {
    if (performance.now() > end) throw new Error(`gave up waiting for ${what} after ${ms} ms`);
    await Bun.sleep(5);
  }
}

/** Post the backlog through `home`'s intake, then stop the intake; a due backlog's windows then end. */
async function fillBacklog(home: string, env: Record<string, string>, tag: string, b: Backlog): Promise<number> {
  const t = performance.now();
  const intake = await startHookspool(`backlog-${tag}-intake`, home, ["intake"], env);
  const r = await load(
    {
      url: `http://127.0.0.1:${await listeningPort(intake)}/hooks/backlog`,
      concurrency: 16,
      n: b.n,
      maxSeconds: 60,
      body: BACKLOG_BODY,
      keys: b.keys,
      headers: {},
      sign: { header: "X-Bench-Signature", prefix: "sha256=", secret: SENDER_SECRET },
    },
    home,
  );
  await intake.stop();
  if (r.ok !== b.n)
    throw new Error(`${tag} backlog: ${r.ok} of ${b.n} events accepted (${JSON.stringify(r.statuses)})`);
  const filled = Date.now() / 1000;
  if (b.kind === "due")
    await until("the backlog's quiet windows to end", 10_000, () => Date.now() / 1000 > filled + DUE_QUIET_S);
  return (performance.now() - t) / 1000;
}

interface BatchCounts {
  open: number;
  sealed: number;
  undelivered: number;
  attempts: number;
  ok: number;
}

/** What a backlog must hold before its drain: all sealed, or all open. */
const ready = (b: Backlog, c: BatchCounts) => (b.kind === "sealed" ? c.sealed : c.open) === b.n;

async function countsPg(url: string): Promise<BatchCounts> {
  const sql = new SQL(url, { max: 1 });
  try {
    const [r] = await sql`SELECT COUNT(*) FILTER (WHERE state = 'open')::int AS o,
        COUNT(*) FILTER (WHERE state = 'sealed')::int AS s,
        COUNT(*) FILTER (WHERE state <> 'delivered')::int AS u,
        (SELECT COUNT(*)::int FROM attempts) AS a,
        (SELECT COUNT(*)::int FROM attempts WHERE outcome = 'ok') AS ok
      FROM batches`;
    return {
      open: Number(r.o),
      sealed: Number(r.s),
      undelivered: Number(r.u),
      attempts: Number(r.a),
      ok: Number(r.ok),
    };
  } finally {
    await sql.close();
  }
}

function countsSqlite(home: string): BatchCounts {
  const db = new Database(join(home, "spool.db"), { readonly: true });
  try {
    const n = (q: string) => Number((db.query(q).get() as { n: number }).n);
    return {
      open: n("SELECT COUNT(*) AS n FROM batches WHERE state = 'open'"),
      sealed: n("SELECT COUNT(*) AS n FROM batches WHERE state = 'sealed'"),
      undelivered: n("SELECT COUNT(*) AS n FROM batches WHERE state <> 'delivered'"),
      attempts: n("SELECT COUNT(*) AS n FROM attempts"),
      ok: n("SELECT COUNT(*) AS n FROM attempts WHERE outcome = 'ok'"),
    };
  } finally {
    db.close();
  }
}

/**
 * Drain one backlog: on SQLite one built now through the home's intake; on PostgreSQL a copy of
 * its template database, so every PostgreSQL drain starts from the same rows. `dispatchers`
 * processes in homes of their own start together; checked at the end.
 */
async function drain(
  pg: BenchPg,
  b: Backlog,
  backend: "sqlite" | "postgres",
  dispatchers: number,
  round: number,
  parallel = DEFAULT_PARALLEL,
): Promise<Drain> {
  const tag = `${b.kind}${backend}${dispatchers}p${parallel}r${round}`;
  const rx = receiver();
  const children: Child[] = [];
  try {
    const url = backend === "postgres" ? await pg.createDatabase(`drain_${tag}`, b.template) : "";
    const env: Record<string, string> = backend === "postgres" ? { HOOKSPOOL_PG_URL: url } : {};
    const widened = parallel === DEFAULT_PARALLEL ? "" : `\n[dispatch]\nparallel = ${parallel}\n`;
    const extra = `${b.source}${backend === "postgres" ? pgSpool() : ""}${widened}`;
    const homes: string[] = [];
    for (let i = 0; i < dispatchers; i++)
      homes.push(
        await makeHome(`pg-drain-${tag}-${i}`, {
          receiverPort: rx.port,
          noGithub: true,
          extra,
          env,
          receiverInflight: parallel === DEFAULT_PARALLEL ? undefined : parallel,
        }),
      );
    if (backend === "sqlite") await fillBacklog(homes[0], env, tag, b);
    const count = () => (backend === "postgres" ? countsPg(url) : Promise.resolve(countsSqlite(homes[0])));
    const before = await count();
    if (!ready(b, before))
      throw new Error(`${tag}: ${JSON.stringify(before)} before the drain, expected ${b.n} ${b.kind}`);

    if (backend === "postgres") await pg.statements();
    const pgCpu0 = pg.cpuS();
    const t0 = Date.now() / 1000;
    for (let i = 0; i < dispatchers; i++)
      children.push(await startHookspool(`drain-${tag}-dispatch-${i}`, homes[i], ["dispatch"], env));
    const distinct = () => new Set(rx.arrivals.map((a) => a.batchId)).size;
    await until(`${b.n} batches delivered (${tag})`, 60_000, () => {
      for (const c of children)
        if (c.proc.exitCode !== null || c.proc.signalCode) throw new Error(`${c.name} exited: ${c.log().slice(-600)}`);
      return distinct() >= b.n;
    });
    const at = rx.arrivals.map((a) => a.at).sort((x, y) => x - y);
    const first = at[0] ?? Number.NaN;
    const last = at[at.length - 1] ?? Number.NaN;
    // The outcome commits just after the receiver's 2xx: wait for the last ones.
    let after = await count();
    const settle = performance.now() + 15_000;
    while ((after.undelivered !== 0 || after.ok !== b.n) && performance.now() < settle) {
      await Bun.sleep(20);
      after = await count();
    }
    const cpuHookspool = children.reduce((a, c) => a + procCpuS(c.proc.pid), 0);
    const cpuPostgres = pg.cpuS() - pgCpu0;
    for (const c of children) await c.stop();
    if (backend === "postgres" && round === 1)
      await printStatements(pg, `drain of ${b.kind}, ${dispatchers} dispatcher(s)`);
    const shares = children.map((c) => (c.log().match(/: delivered .*batch=/g) ?? []).length);
    const d: Drain = {
      name:
        `${b.kind}, ${backend}: ${dispatchers} dispatcher${dispatchers > 1 ? "s" : ""}` +
        (parallel === DEFAULT_PARALLEL ? "" : `, parallel ${parallel}`),
      parallel,
      kind: b.kind,
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
    if (d.delivered !== b.n) problems.push(`${d.delivered} distinct batches delivered of ${b.n}`);
    if (d.duplicates !== 0) problems.push(`${d.duplicates} batches delivered more than once`);
    if (after.undelivered !== 0) problems.push(`${after.undelivered} batch rows not delivered`);
    if (after.ok !== b.n) problems.push(`${after.ok} ok attempts for ${b.n} batches`);
    if (shares.reduce((x, y) => x + y, 0) !== b.n)
      problems.push(`the dispatchers logged ${shares.join("+")} deliveries`);
    emitDrain(d, b, FSYNC);
    if (problems.length) throw new Error(`${d.name}, round ${round}: ${problems.join("; ")}`);
    return d;
  } finally {
    for (const c of children) await c.stop();
    rx.stop();
    // Drop the copy and CHECKPOINT, so the next drain does not pay for this one's writes.
    if (backend === "postgres") await pg.dropDatabase(`drain_${tag}`);
  }
}

/** Build a backlog's PostgreSQL template once, through an intake. */
async function buildTemplate(pg: BenchPg, b: Backlog): Promise<number> {
  const rx = receiver();
  try {
    const env = { HOOKSPOOL_PG_URL: await pg.createDatabase(b.template) };
    const home = await makeHome(`pg-${b.kind}-backlog`, {
      receiverPort: rx.port,
      noGithub: true,
      extra: `${b.source}${pgSpool()}`,
      env,
    });
    const s = await fillBacklog(home, env, `${b.kind}-template`, b);
    const c = await countsPg(env.HOOKSPOOL_PG_URL);
    if (!ready(b, c)) throw new Error(`${b.kind} template backlog: ${JSON.stringify(c)}, expected ${b.n} ${b.kind}`);
    return s;
  } finally {
    rx.stop();
  }
}

/** What the drains cost per batch delivered (one dispatcher, the sealed backlog, all rounds). */
export interface DrainCost {
  postgresMsPerBatch: number;
  dispatcherMsPerBatch: number;
  sqliteDispatcherMsPerBatch: number;
}

export async function dispatchBench(pg: BenchPg): Promise<DrainCost> {
  // The PostgreSQL backlogs, built once through an intake into the templates every drain copies.
  // A TEMPLATE copy needs no session on the template; the intakes and migrate have gone.
  for (const b of Object.values(BACKLOGS)) {
    const s = await buildTemplate(pg, b);
    emit("postgres_dispatch", "backlog_build_time", s, "s", {
      backlog: b.kind,
      batches: b.n,
      senders: 16,
      pg_fsync: FSYNC,
    });
  }
  await pg.dropDatabase("intake");

  const layouts = [
    [BACKLOGS.sealed, "sqlite", 1],
    [BACKLOGS.sealed, "postgres", 1],
    [BACKLOGS.sealed, "postgres", 2],
    [BACKLOGS.due, "sqlite", 1],
    [BACKLOGS.due, "postgres", 1],
    // Wider ticks: a tick claims at most `parallel` batches, and a transaction's cost is mostly fixed.
    [BACKLOGS.sealed, "sqlite", 1, WIDE_PARALLEL],
    [BACKLOGS.sealed, "postgres", 1, WIDE_PARALLEL],
  ] as const;
  const drains: Drain[] = [];
  for (let r = 1; r <= DRAIN_ROUNDS; r++)
    for (const [b, backend, n, parallel] of layouts) drains.push(await drain(pg, b, backend, n, r, parallel));
  summarise(drains, { rounds: DRAIN_ROUNDS, sealedN: DISPATCH_N, sealedKeys: DISPATCH_K, dueN: DUE_N, fsync: FSYNC });
  const of = (name: string) => drains.filter((d) => d.name === name);
  const perBatch = (ds: Drain[], cpu: (d: Drain) => number) =>
    (ds.reduce((a, d) => a + cpu(d), 0) * 1000) / ds.reduce((a, d) => a + d.delivered, 0);
  return {
    postgresMsPerBatch: perBatch(of("sealed, postgres: 1 dispatcher"), (d) => d.cpuPostgres),
    dispatcherMsPerBatch: perBatch(of("sealed, postgres: 1 dispatcher"), (d) => d.cpuHookspool),
    sqliteDispatcherMsPerBatch: perBatch(of("sealed, sqlite: 1 dispatcher"), (d) => d.cpuHookspool),
  };
}
