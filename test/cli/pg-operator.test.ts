// The operator's verbs on PostgreSQL say and do what they say and do on SQLite: one spool is
// built on SQLite, moved with migrate-store, and then the same verbs run on both homes (the
// same config, HOOKSPOOL_BACKEND=postgres for the second) must print the same JSON, with only
// the times the verbs themselves stamp told apart. Skipped, saying so, without PostgreSQL.
import { afterAll, beforeAll, expect, setDefaultTimeout, test } from "bun:test";
import { cpSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { systemClock } from "../../src/clock.ts";
import { PgSpool } from "../../src/store/pg/db.ts";
import { openSpool } from "../../src/store/sqlite/db.ts";
import { markDead } from "../../src/store/sqlite/marks.ts";
import { claimBatch } from "../../src/store/sqlite/claim.ts";
import { sealReady } from "../../src/store/sqlite/queue.ts";
import { cli } from "../helpers/cli.ts";
import { SECRET_SENTINEL } from "../helpers/logs.ts";
import { startHookspool, waitFor } from "../helpers/proc.ts";
import { PG_BIN, PG_SKIP_MESSAGE, type PgServer, startPostgres } from "../helpers/pg.ts";
import { tempDir } from "../helpers/tmp.ts";

setDefaultTimeout(60_000);
let server: PgServer | null = null;

beforeAll(async () => {
  if (PG_BIN) server = await startPostgres();
}, 60_000);
afterAll(async () => {
  await server?.stop();
});

/** Times (Unix seconds of this run) become "T": each run stamps its own. */
function timeless(text: string): unknown {
  const now = systemClock.now();
  return JSON.parse(text, (_k, v) => (typeof v === "number" && Math.abs(v - now) < 3600 ? "T" : v));
}

test.skipIf(!PG_BIN)(
  "list, show, issues, pause, resume, replay, retry, split, exclude, drop, export and route test, --where " +
    "too: the same on PostgreSQL as on SQLite",
  async () => {
    const pg = server as PgServer;
    await pg.createDatabase("ops");
    const url = `postgres://${pg.user}@localhost/ops?host=${pg.socketDir}`;
    const lite = join(tempDir(), "home");
    expect((await cli(["--home", lite, "init"])).code).toBe(0);
    const file = join(lite, "config.toml");
    writeFileSync(
      file,
      readFileSync(file, "utf8").replace(/^\[spool\]$/m, '[spool]\nurl = { env = "HOOKSPOOL_PG_URL" }'),
    );
    for (const key of ["k1", "k1", "k1", "k2", "k3"])
      expect(
        (await cli(["--home", lite, "enqueue", "--source", "demo", "--key", key], { stdin: JSON.stringify({ key }) }))
          .code,
      ).toBe(0);
    // Sealed batches (windows over), k2's dead (the receiver refused it).
    const spool = openSpool(join(lite, "spool.db"));
    const now = systemClock.now();
    sealReady(spool, now + 60);
    const claim = claimBatch(spool, {
      batchId: 2,
      destination: "script:demo-log",
      now: now + 61,
      leaseUntil: now + 120,
      host: "h",
      pid: 1,
    });
    if (!claim) throw new Error("batch 2 was not claimed");
    markDead(spool, {
      batchId: 2,
      attemptId: claim.attemptId,
      owner: claim.owner,
      now: now + 62,
      attempt: { klass: "batch", status: 1, error: "exit 1", durationMs: 5, counted: true },
      deadReason: "rejected",
    });
    spool.close();

    const env = { HOOKSPOOL_PG_URL: url };
    const moved = await cli(["--home", lite, "migrate-store", "--to", "postgres"], { env });
    expect(moved.code, moved.err).toBe(0);
    // The PostgreSQL home: the same config; the backend switched by its environment variable.
    const pgHome = join(tempDir(), "home");
    cpSync(lite, pgHome, { recursive: true });
    for (const f of ["spool.db", "spool.db-wal", "spool.db-shm"]) rmSync(join(pgHome, f), { force: true });
    const onPg = { HOOKSPOOL_PG_URL: url, HOOKSPOOL_BACKEND: "postgres" };

    const verbs: string[][] = [
      ["list"],
      ["list", "--state", "sealed"],
      ["list", "--where", "key = k1"],
      ["list", "--where", "key in (k2, k3)", "--where", "key != k3"],
      ["show", "1", "--events", "--attempts"],
      ["show", "2", "--attempts", "--payload"],
      ["issues", "list", "--state", "all"],
      ["pause", "script:demo-log", "--reason", "maintenance window"],
      ["issues", "list"],
      ["resume", "script:demo-log"],
      ["resume", "script:demo-log"],
      ["replay", "--dead"],
      ["retry", "2"],
      ["show", "2"],
      ["exclude", "1", "2", "--yes"],
      ["show", "1", "--events"],
      ["split", "1", "--max-events", "1"],
      ["exclude", "3", "7", "--yes"],
      ["drop", "4", "--yes"],
      ["replay", "99"],
      ["list", "--limit", "20"],
      ["export"],
      ["export", "--limit", "2", "--after", "1"],
      ["route", "test"],
      ["route", "test", "--source", "demo", "--limit", "2"],
      ["export", "--where", "key ~ 1"],
      ["route", "test", "--where", "key in (k1, k3)"],
      ["replay", "--dead", "--where", "key = nope"],
    ];
    for (const argv of verbs) {
      const a = await cli(["--home", lite, "--json", ...argv], { env });
      const b = await cli(["--home", pgHome, "--json", ...argv], { env: onPg });
      const parse = (out: string) => out.trim().split("\n").filter(Boolean).map(timeless);
      expect({ argv, code: b.code, out: parse(b.out), err: b.err }).toEqual({
        argv,
        code: a.code,
        out: parse(a.out),
        err: a.err,
      });
      if (argv[0] !== "replay" || argv[1] !== "99") expect({ argv, code: a.code }).not.toEqual({ argv, code: 2 });
    }
    // The second home has no SQLite file at all: every verb ran on the database.
    const status = await cli(["--home", pgHome, "--json", "status"], { env: onPg });
    expect((JSON.parse(status.out) as { dispatchers: unknown[] }).dispatchers).toEqual([]);
  },
);

test.skipIf(!PG_BIN)(
  "enqueue, prune, watch and metrics on PostgreSQL; the dashboard serves its pages from the database",
  async () => {
    const pg = server as PgServer;
    await pg.createDatabase("ops2");
    const url = `postgres://${pg.user}@localhost/ops2?host=${pg.socketDir}`;
    const home = join(tempDir(), "home");
    expect((await cli(["--home", home, "init"])).code).toBe(0);
    for (const f of ["spool.db", "spool.db-wal", "spool.db-shm"]) rmSync(join(home, f), { force: true });
    const file = join(home, "config.toml");
    writeFileSync(
      file,
      readFileSync(file, "utf8").replace(
        /^\[spool\]$/m,
        '[spool]\nbackend = "postgres"\nurl = { env = "HOOKSPOOL_PG_URL" }',
      ),
    );
    const env = { HOOKSPOOL_PG_URL: url };
    // check reaches the server and reads the schema: none yet is a warning (migrate creates it).
    const before = await cli(["--home", home, "--json", "check"], { env });
    expect(before.out).toContain("the PostgreSQL database has no hookspool schema yet");
    const dryRun = await cli(["--home", home, "migrate", "--dry-run"], { env });
    expect(dryRun.out).toContain(
      "would apply 0001_schema, 0002_pacing, 0003_outcomes, 0004_raw_once, 0005_lz4, 0006_lean_batches, " +
        "0007_payload_json, 0008_versions, 0009_body_files, 0010_queue_statistics, 0011_path_values " +
        "(PostgreSQL schema 0)",
    );
    expect((await cli(["--home", home, "migrate"], { env })).code).toBe(0);
    const checked = await cli(["--home", home, "--json", "check"], { env });
    expect(checked.out).not.toContain("spool.url");
    // A server that does not answer, and no URL at all: errors naming spool.url, the URL never shown.
    const unreachable = await cli(["--home", home, "--json", "check"], {
      env: { HOOKSPOOL_PG_URL: `postgres://${pg.user}:${SECRET_SENTINEL}@localhost/ops2?host=/nonexistent-dir` },
    });
    expect(unreachable.code).toBe(2);
    expect(unreachable.out).toContain("cannot reach PostgreSQL");
    expect(`${unreachable.out}${unreachable.err}`).not.toContain(SECRET_SENTINEL);
    const unset = await cli(["--home", home, "--json", "check"], { env: {} });
    expect(unset.code).toBe(2);
    expect(unset.out).toContain("HOOKSPOOL_PG_URL");
    const queued = await cli(
      ["--home", home, "--json", "enqueue", "--source", "demo", "--key", "k1", "--dedup-id", "d1"],
      { env, stdin: '{"a":1}' },
    );
    expect(queued.code, queued.err).toBe(0);
    expect(JSON.parse(queued.out)).toMatchObject({
      status: "queued",
      placed: [{ batchId: 1, eventId: 1, route: "demo", destination: "script:demo-log" }],
    });
    const again = await cli(
      ["--home", home, "--json", "enqueue", "--source", "demo", "--key", "k1", "--dedup-id", "d1"],
      { env, stdin: '{"a":1}' },
    );
    expect(JSON.parse(again.out)).toMatchObject({ status: "duplicate", eventId: 1 });
    expect(
      (await cli(["--home", home, "enqueue", "--source", "demo", "--key", "k2"], { env, stdin: '{"b":2}' })).out,
    ).toContain("queued event 2 in batch 2");

    // watch from the start: both events, each with a cursor to go on from; then only what follows it.
    const watched = await cli(["--home", home, "--json", "watch", "--since", "0", "--count", "2", "--for", "10"], {
      env,
    });
    expect(watched.code, watched.err).toBe(0);
    const lines = watched.out
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { cursor: string; kind: string; batch: number; event: number; key: string });
    expect(lines.map((l) => [l.kind, l.batch, l.event, l.key])).toEqual([
      ["event", 1, 1, "k1"],
      ["event", 2, 2, "k2"],
    ]);
    expect(lines[0].cursor).toMatch(/^\d+:\d+$/);
    const after = await cli(
      ["--home", home, "--json", "watch", "--since", lines[0].cursor, "--count", "1", "--for", "10"],
      { env },
    );
    expect(JSON.parse(after.out).event).toBe(2);
    expect((await cli(["--home", home, "watch", "--since", "12"], { env })).err).toContain(
      "--since must be a cursor as watch prints it on PostgreSQL",
    );
    const text = await cli(["--home", home, "watch", "--since", "0", "--count", "1", "--for", "10", "--key", "k2"], {
      env,
    });
    expect(text.out).toMatch(/^\d+:\d+ \S+ event batch 2 event 2 demo -> script:demo-log key=k2/);

    // A config that no longer loads: the read verbs still read the database it names, never a SQLite file.
    const good = readFileSync(file, "utf8");
    writeFileSync(file, `${good}\n[dispatch]\nparallel = "many"\n`);
    const broken = await cli(["--home", home, "--json", "list"], { env });
    expect(broken.err).toContain("reading the database alone");
    expect((JSON.parse(broken.out) as { id: number }[]).map((b) => b.id)).toEqual([2, 1]);
    writeFileSync(file, good);

    const pruned = await cli(["--home", home, "--json", "prune"], { env });
    expect(JSON.parse(pruned.out)).toEqual({
      batches: 0,
      events: 0,
      attempts: 0,
      dedup: 0,
      issues: 0,
      body_files: 0,
      body_bytes: 0,
    });
    expect((await cli(["--home", home, "prune", "--vacuum"], { env })).err).toContain(
      "--vacuum applies to a SQLite spool",
    );

    // The spool's metrics, read from the database.
    const metrics = await cli(["--home", home, "metrics"], { env });
    expect(metrics.code, metrics.err).toBe(0);
    expect(metrics.out).toContain('hookspool_batches{state="open"} 2');
    expect(metrics.out).toContain('hookspool_destination_oldest_pending_age_seconds{destination="script:demo-log"}');

    // hookspool dashboard on its own: its own pool on the database, every page, the batches listed.
    const dashboard = await startHookspool(home, ["dashboard", "--listen", "127.0.0.1:0"], { env });
    try {
      const printed = await waitFor(
        "the dashboard's URL on stdout",
        () => /dashboard: (http:\/\/127\.0\.0\.1:\d+\/\?token=\S+)/.exec(dashboard.stdout())?.[1],
      );
      const first = await fetch(printed, { redirect: "manual" });
      expect(first.status).toBe(303);
      const headers = { Cookie: (first.headers.get("set-cookie") ?? "").split(";")[0] };
      for (const path of ["/", "/batches", "/sources", "/issues", "/live"]) {
        const res = await fetch(new URL(path, printed), { headers });
        expect({ path, status: res.status }).toEqual({ path, status: 200 });
      }
      expect(await (await fetch(new URL("/batches", printed), { headers })).text()).toContain("script:demo-log");
    } finally {
      dashboard.kill();
      await dashboard.exited;
    }
  },
);

test.skipIf(!PG_BIN)("hookspool run on PostgreSQL: send --follow sees its event queued and delivered", async () => {
  const pg = server as PgServer;
  await pg.createDatabase("ops3");
  const env = { HOOKSPOOL_PG_URL: `postgres://${pg.user}@localhost/ops3?host=${pg.socketDir}` };
  const home = tempDir("hookspool-pgrun-");
  writeFileSync(join(home, "in-secret"), "pg-run-secret", { mode: 0o600 });
  writeFileSync(
    join(home, "config.toml"),
    `[spool]\nbackend = "postgres"\nurl = { env = "HOOKSPOOL_PG_URL" }\n\n[intake]\nlisten = ` +
      `"127.0.0.1:0"\n\n[dispatch]\npoll_s = 0.2\n\n[sources.load]\ntemplate = { scheme = ` +
      `"hmac-sha256-hex", header = "X-Sig", prefix = "sha256=", key = "key", event_type = "type", dedup ` +
      `= "id" }\nsecrets.secret = { file = "${join(home, "in-secret")}" }\nspan = "immediate"\naction = ` +
      `"script:sink"\n\n[destinations."script:sink"]\nargv = ["/bin/sh", "-c", "cat > /dev/null"]\n`,
  );
  const run = await startHookspool(home, ["run"], { env });
  try {
    const port = await run.port();
    const r = await cli(
      [
        "--home",
        home,
        "--json",
        "send",
        "load",
        "--url",
        `http://127.0.0.1:${port}/hooks/load`,
        "--data",
        '{"id":"s1","key":"k","type":"t"}',
        "--follow",
      ],
      { env },
    );
    expect({ code: r.code, err: r.err }).toEqual({ code: 0, err: "" });
    const [answer, ...steps] = r.out
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(answer).toMatchObject({ status: 202, body: '{"status":"queued"}' });
    expect(steps.at(-1)).toMatchObject({ batch: 1, state: "delivered" });
  } finally {
    run.kill("SIGTERM");
    expect(await run.exited).toBe(0);
  }
});

test.skipIf(!PG_BIN)("migrate builds a bobbin's payload indexes on PostgreSQL too, and drops them", async () => {
  const pg = server as PgServer;
  await pg.createDatabase("ops4");
  const home = join(tempDir(), "home");
  expect((await cli(["--home", home, "init"])).code).toBe(0);
  const file = join(home, "config.toml");
  writeFileSync(join(home, "github-secret"), "a-secret-for-tests", { mode: 0o600 });
  const instance =
    `\n[bobbins.gh]\nbobbin = "github.repo"\nsecrets.secret = { file = "${join(home, "github-secret")}" }\n` +
    `outputs = { "*" = "script:demo-log" }\n`;
  const config = readFileSync(file, "utf8").replace(
    /^\[spool\]$/m,
    '[spool]\nbackend = "postgres"\nurl = { env = "HOOKSPOOL_PG_URL" }',
  );
  writeFileSync(file, config + instance);
  const env = { HOOKSPOOL_PG_URL: `postgres://${pg.user}@localhost/ops4?host=${pg.socketDir}` };
  const dry = await cli(["--home", home, "migrate", "--dry-run"], { env });
  expect(dry.out).toMatch(
    /^payload index events_where_repository_full_name_\w+: would build for repository\.full_name$/m,
  );
  const built = JSON.parse((await cli(["--home", home, "--json", "migrate"], { env })).out);
  expect(built.indexes).toEqual({
    created: [{ path: "repository.full_name", name: expect.stringMatching(/^events_where_repository_full_name_/) }],
    dropped: [],
  });
  // The index is there, a hash index over the payload read as jsonb at the path.
  const spool = new PgSpool({ url: env.HOOKSPOOL_PG_URL });
  const indexes = async () =>
    (
      (await spool.sql`SELECT indexname, indexdef FROM pg_indexes
        WHERE tablename = 'events' AND indexname LIKE 'events_where_%'`) as { indexname: string; indexdef: string }[]
    ).map((r) => [r.indexname, r.indexdef]);
  try {
    expect(await indexes()).toEqual([
      [
        built.indexes.created[0].name,
        // The path from the values the writer read, else parsed from the payload.
        expect.stringMatching(
          new RegExp(
            [
              String.raw`USING hash \(\(\s*CASE\s+WHEN jsonb_exists\(path_values, 'repository\.full_name'::text\)`,
              String.raw`THEN \(\(path_values -> 'repository\.full_name'::text\) -> 0\)`,
              String.raw`ELSE \(hookspool_payload_json\(payload\) #> '\{repository,full_name\}'::text\[\]\)\s+END\)\)`,
            ].join(String.raw`\s+`),
          ),
        ),
      ],
    ]);
  } finally {
    await spool.close();
  }
  const again = await cli(["--home", home, "migrate"], { env });
  expect(again.out).not.toContain("payload index");
  expect(JSON.parse((await cli(["--home", home, "--json", "migrate", "--dry-run"], { env })).out).indexes).toEqual({
    created: [],
    dropped: [],
  });
  const queued = await cli(["--home", home, "enqueue", "--source", "gh", "--key", "acme/api:push"], {
    env,
    stdin: '{"repository":{"full_name":"acme/api"}}',
  });
  expect(queued.code, queued.err).toBe(0);
  const listed = await cli(["--home", home, "--json", "list", "--where", "repository.full_name = acme/api"], { env });
  expect((JSON.parse(listed.out) as { id: number }[]).map((b) => b.id)).toEqual([1]);
  writeFileSync(file, config);
  const dropped = JSON.parse((await cli(["--home", home, "--json", "migrate"], { env })).out);
  expect(dropped.indexes).toEqual({ created: [], dropped: [built.indexes.created[0].name] });
  const after = new PgSpool({ url: env.HOOKSPOOL_PG_URL });
  try {
    expect(await after.sql`SELECT indexname FROM pg_indexes WHERE indexname LIKE 'events_where_%'`).toEqual([]);
  } finally {
    await after.close();
  }
  const twice = JSON.parse((await cli(["--home", home, "--json", "migrate"], { env })).out);
  expect(twice.indexes).toEqual({ created: [], dropped: [] });
});

if (!PG_BIN) test("operator verbs on PostgreSQL", () => console.info(PG_SKIP_MESSAGE));
