// The last mile to an agent gateway: N events on N keys, each its own batch, to one hermes route
// whose gateway (test/helpers/hermes-gateway.ts: the upstream handler's rolling window, which
// records only the requests it lets in and answers the rest 429 with no Retry-After) takes
// LIMIT per WINDOW_S. The gateway's real window is 60 s; a shorter one keeps the run short, and
// the figure that matters is the ratio to the floor, N / LIMIT windows. The destination is
// paced with rate = "LIMIT/WINDOW_Ss", as it would read rate_limit from the gateway per minute.
//
// Figures, per layout: drain time (the first event acked to the gateway's last accepted
// request), the floor, their ratio, answers 429, batches delivered and dead. Layouts: SQLite
// under `hookspool run`; PostgreSQL (when installed) with one intake and two dispatchers.
//
//   bun scripts/bench/pacing.ts     BENCH_PACING_N (200), BENCH_PACING_LIMIT (30), BENCH_PACING_WINDOW_S (10)
import { createHmac } from "node:crypto";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { HermesGateway } from "../../test/helpers/hermes-gateway.ts";
import { BENCH_TEMPLATE } from "./lib/homes.ts";
import { PG_BIN, startBenchPostgres } from "./lib/pg.ts";
import { type Child, hookspoolVerb, listeningPort, main, startHookspool, tempHome } from "./lib/procs.ts";
import { emit, table } from "./lib/report.ts";

const N = Number(process.env.BENCH_PACING_N ?? 200);
const LIMIT = Number(process.env.BENCH_PACING_LIMIT ?? 30);
const WINDOW_S = Number(process.env.BENCH_PACING_WINDOW_S ?? 10);
const SENDER_SECRET = "bench-pacing-sender";
const ROUTE_SECRET = "whsec_YmVuY2gtcGFjaW5nLXJvdXRlLXNlY3JldA==";
const FLOOR_S = (N / LIMIT) * WINDOW_S;

interface Layout {
  name: string;
  backend: "sqlite" | "postgres";
  dispatchers: number;
}

interface Result {
  layout: Layout;
  drainS: number;
  answers429: number;
  delivered: number;
  dead: number;
  accepted: number;
}

function homeFor(prefix: string, gw: HermesGateway, spool: string): string {
  const home = tempHome(prefix);
  mkdirSync(join(home, "secrets"), { mode: 0o700 });
  writeFileSync(join(home, "secrets", "sender"), SENDER_SECRET, { mode: 0o600 });
  writeFileSync(
    join(home, "config.toml"),
    `# written by scripts/bench/pacing.ts
[intake]
listen = "127.0.0.1:0"
${spool}
[hermes]
base_url = "${gw.url}"
subscriptions_path = "${gw.subscriptionsPath}"

[sources.bench]
${BENCH_TEMPLATE}
secrets.secret = { file = "secrets/sender" }
quiet_s = 0
max_s = 0
action = "hermes:bench"

[destinations."hermes:bench"]
rate = "${LIMIT}/${WINDOW_S}s"
`,
    { mode: 0o600 },
  );
  return home;
}

/** N signed events, one per key, to the intake; the time the first was acked. */
async function send(port: number): Promise<number> {
  let firstAck = Number.POSITIVE_INFINITY;
  const one = async (i: number) => {
    const body = JSON.stringify({ id: `e${i}`, key: `k${i}`, type: "issue.updated", n: i });
    const sig = `sha256=${createHmac("sha256", SENDER_SECRET).update(body).digest("hex")}`;
    const res = await fetch(`http://127.0.0.1:${port}/hooks/bench`, {
      method: "POST",
      body,
      headers: { "content-type": "application/json", "x-bench-signature": sig },
    });
    if (res.status >= 300) throw new Error(`event ${i}: HTTP ${res.status}`);
    await res.arrayBuffer();
    firstAck = Math.min(firstAck, Date.now() / 1000);
  };
  for (let i = 0; i < N; i += 20) await Promise.all(Array.from({ length: Math.min(20, N - i) }, (_, j) => one(i + j)));
  return firstAck;
}

/** Wait until the gateway accepted N requests (or the deadline); the time of the last. */
async function drained(gw: HermesGateway, limitS: number): Promise<number> {
  const until = Date.now() / 1000 + limitS;
  for (;;) {
    const accepted = gw.hits.filter((h) => h.status === 202);
    if (accepted.length >= N) return Math.max(...accepted.map((h) => h.countedAt ?? 0));
    if (Date.now() / 1000 > until)
      throw new Error(`only ${accepted.length} of ${N} accepted after ${limitS} s (${JSON.stringify(gw.counts())})`);
    await Bun.sleep(50);
  }
}

async function states(home: string, env: Record<string, string> = {}): Promise<{ delivered: number; dead: number }> {
  const doc = JSON.parse(
    await hookspoolVerb(home, ["--json", "status"], env).catch((e: Error) => e.message.slice(e.message.indexOf("{"))),
  );
  return { delivered: doc.batches?.delivered ?? Number.NaN, dead: doc.batches?.dead ?? Number.NaN };
}

async function sqliteRun(): Promise<Result> {
  const gw = new HermesGateway({ routes: { bench: { secret: ROUTE_SECRET } }, rateLimit: LIMIT, windowS: WINDOW_S });
  const home = homeFor("pacing-sqlite", gw, "");
  await hookspoolVerb(home, ["migrate"]);
  const run = await startHookspool("pacing-run", home, ["run"]);
  try {
    const port = await listeningPort(run);
    const t0 = await send(port);
    const last = await drained(gw, FLOOR_S * 3 + 60);
    const s = await states(home);
    return {
      layout: { name: "sqlite: run", backend: "sqlite", dispatchers: 1 },
      drainS: last - t0,
      answers429: gw.counts()["Rate limit exceeded"] ?? 0,
      accepted: gw.counts().accepted ?? 0,
      ...s,
    };
  } finally {
    await run.stop();
    gw.stop();
  }
}

async function postgresRun(): Promise<Result | null> {
  if (!PG_BIN) return null;
  const pg = await startBenchPostgres({ fsync: true });
  const gw = new HermesGateway({ routes: { bench: { secret: ROUTE_SECRET } }, rateLimit: LIMIT, windowS: WINDOW_S });
  const url = await pg.createDatabase("pacing");
  const env = { HOOKSPOOL_PG_URL: url };
  const spool = `\n[spool]\nbackend = "postgres"\nurl = { env = "HOOKSPOOL_PG_URL" }\npool = 4\n`;
  const homes = [0, 1, 2].map((i) => homeFor(`pacing-pg-${i}`, gw, spool));
  await hookspoolVerb(homes[0], ["migrate"], env);
  const children: Child[] = [];
  try {
    children.push(await startHookspool("pacing-pg-intake", homes[0], ["intake"], env));
    children.push(
      await startHookspool("pacing-pg-dispatch-1", homes[1], ["dispatch"], env),
      await startHookspool("pacing-pg-dispatch-2", homes[2], ["dispatch"], env),
    );
    const port = await listeningPort(children[0]);
    const t0 = await send(port);
    const last = await drained(gw, FLOOR_S * 3 + 60);
    const s = await states(homes[0], env);
    return {
      layout: { name: "postgres: 1 intake, 2 dispatchers", backend: "postgres", dispatchers: 2 },
      drainS: last - t0,
      answers429: gw.counts()["Rate limit exceeded"] ?? 0,
      accepted: gw.counts().accepted ?? 0,
      ...s,
    };
  } finally {
    for (const c of children) await c.stop();
    gw.stop();
    await pg.stop();
  }
}

await main("pacing", Math.ceil(FLOOR_S * 8 + 300), async () => {
  const results = [await sqliteRun()];
  const pg = await postgresRun();
  if (pg) results.push(pg);
  else
    console.log(
      JSON.stringify({
        bench: "pacing",
        skipped: "postgres layout: PostgreSQL not installed (apt-get install postgresql)",
      }),
    );
  const problems: string[] = [];
  for (const r of results) {
    const config = {
      backend: r.layout.backend,
      dispatchers: r.layout.dispatchers,
      events: N,
      limit: LIMIT,
      window_s: WINDOW_S,
    };
    emit("pacing", "drain_s", r.drainS, "s", config);
    emit("pacing", "floor_s", FLOOR_S, "s", config);
    emit("pacing", "drain_ratio_vs_floor", r.drainS / FLOOR_S, "ratio", config);
    emit("pacing", "answers_429", r.answers429, "requests", config);
    emit("pacing", "delivered", r.delivered, "batches", config);
    emit("pacing", "dead", r.dead, "batches", config);
    if (r.delivered !== N) problems.push(`${r.layout.name}: ${r.delivered} of ${N} batches delivered`);
    if (r.dead !== 0) problems.push(`${r.layout.name}: ${r.dead} dead`);
  }
  table(
    `pacing: ${N} events on ${N} keys to a gateway that takes ` +
      `${LIMIT} per ${WINDOW_S} s (floor ${FLOOR_S.toFixed(1)} s)`,
    ["layout", "drain s", "ratio to floor", "429s", "accepted", "delivered", "dead"],
    results.map((r) => [r.layout.name, r.drainS, r.drainS / FLOOR_S, r.answers429, r.accepted, r.delivered, r.dead]),
  );
  if (problems.length) throw new Error(problems.join("; "));
});
