// The operator's verbs on PostgreSQL say and do what they say and do on SQLite: one spool is
// built on SQLite, moved with migrate-store, and then the same verbs run on both homes (the
// same config, HOOKSPOOL_BACKEND=postgres for the second) must print the same JSON, with only
// the times the verbs themselves stamp told apart. Skipped, saying so, without PostgreSQL.
import { afterAll, beforeAll, expect, setDefaultTimeout, test } from "bun:test";
import { cpSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { systemClock } from "../../src/clock.ts";
import { openSpool } from "../../src/store/db.ts";
import { markDead } from "../../src/store/marks.ts";
import { claimBatch, sealReady } from "../../src/store/queue.ts";
import { cli } from "../helpers/cli.ts";
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

test.skipIf(!PG_BIN)("list, show, issues, pause, resume, replay, retry, split, exclude, drop and export: the same on PostgreSQL as on SQLite", async () => {
  const pg = server as PgServer;
  await pg.createDatabase("ops");
  const url = `postgres://${pg.user}@localhost/ops?host=${pg.socketDir}`;
  const lite = join(tempDir(), "home");
  expect((await cli(["--home", lite, "init"])).code).toBe(0);
  const file = join(lite, "config.toml");
  writeFileSync(file, readFileSync(file, "utf8").replace(/^\[spool\]$/m, '[spool]\nurl = { env = "HOOKSPOOL_PG_URL" }'));
  for (const key of ["k1", "k1", "k1", "k2", "k3"]) expect((await cli(["--home", lite, "enqueue", "--source", "demo", "--key", key], { stdin: JSON.stringify({ key }) })).code).toBe(0);
  // Sealed batches (windows over), k2's dead (the receiver refused it).
  const spool = openSpool(join(lite, "spool.db"));
  const now = systemClock.now();
  sealReady(spool, now + 60);
  const claim = claimBatch(spool, { batchId: 2, destination: "script:demo-log", now: now + 61, leaseUntil: now + 120, host: "h", pid: 1 });
  if (!claim) throw new Error("batch 2 was not claimed");
  markDead(spool, { batchId: 2, attemptId: claim.attemptId, owner: claim.owner, now: now + 62, attempt: { klass: "batch", status: 1, error: "exit 1", durationMs: 5, counted: true }, deadReason: "rejected" });
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
  ];
  for (const argv of verbs) {
    const a = await cli(["--home", lite, "--json", ...argv], { env });
    const b = await cli(["--home", pgHome, "--json", ...argv], { env: onPg });
    const parse = (out: string) => out.trim().split("\n").filter(Boolean).map(timeless);
    expect({ argv, code: b.code, out: parse(b.out), err: b.err }).toEqual({ argv, code: a.code, out: parse(a.out), err: a.err });
    if (argv[0] !== "replay" || argv[1] !== "99") expect({ argv, code: a.code }).not.toEqual({ argv, code: 2 });
  }
  // The second home has no SQLite file at all: every verb ran on the database.
  const status = await cli(["--home", pgHome, "--json", "status"], { env: onPg });
  expect((JSON.parse(status.out) as { dispatchers: unknown[] }).dispatchers).toEqual([]);
});

if (!PG_BIN) test("operator verbs on PostgreSQL", () => console.info(PG_SKIP_MESSAGE));
