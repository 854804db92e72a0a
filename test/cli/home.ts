// A starter home for CLI tests: `hookspool init` in a temp dir, a few extra sources and
// destinations, and ways to look at (or age) its spool behind the CLI's back.
import { Database } from "bun:sqlite";
import { appendFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { expect } from "bun:test";
import { openSpool, type SqliteSpool } from "../../src/store/sqlite/db.ts";
import { setMetaTx } from "../../src/store/sqlite/meta.ts";
import { MIGRATIONS } from "../../src/store/sqlite/migrate.ts";
import { cli } from "../helpers/cli.ts";
import { tempDir } from "../helpers/tmp.ts";

/**
 * Appended to the starter config: `small` caps bodies at 64 bytes, `once` seals every batch
 * at its first event, `web` is a second valid destination for --destination.
 */
export const EXTRA_CONFIG = `
[sources.small]
max_body_bytes = 64
action = "script:demo-log"

[sources.once]
max_events = 1
action = "script:demo-log"

[destinations.web]
type = "http"
url = "https://receiver.example/hook"
unsigned = true
`;

export interface Home {
  home: string;
  db: string;
  config: string;
}

/** `hookspool init` in a fresh temp dir, with EXTRA_CONFIG appended unless told otherwise. */
export async function initHome(opts: { extra?: string } = {}): Promise<Home> {
  const home = join(tempDir(), "home");
  const r = await cli(["--home", home, "init"]);
  expect(r).toMatchObject({ code: 0, err: "" });
  const config = join(home, "config.toml");
  appendFileSync(config, opts.extra ?? EXTRA_CONFIG);
  return { home, db: join(home, "spool.db"), config };
}

/** Run the CLI against this home (`--home` first, as an operator types it). */
export function inHome(h: Home, argv: string[], opts: Parameters<typeof cli>[1] = {}) {
  return cli(["--home", h.home, ...argv], opts);
}

/** Enqueue one payload through the CLI; returns the batch id it landed in. */
export async function enqueueJson(
  h: Home,
  source: string,
  key: string,
  payload: unknown,
  extra: string[] = [],
): Promise<number> {
  const r = await inHome(h, ["--json", "enqueue", "--source", source, "--key", key, ...extra], {
    stdin: JSON.stringify(payload),
  });
  expect(r).toMatchObject({ code: 0, err: "" });
  const doc = JSON.parse(r.out);
  expect(doc.status).toBe("queued");
  return doc.placed[0].batchId;
}

/** Open the spool file directly (no CLI), run `fn`, close. */
export function withDb<T>(path: string, fn: (db: Database) => T): T {
  const db = new Database(path);
  try {
    return fn(db);
  } finally {
    db.close();
  }
}

/** Open the spool through the store (for fixtures the CLI cannot make yet: attempts, quarantine). */
export function withSpool<T>(path: string, fn: (spool: SqliteSpool) => T): T {
  const spool = openSpool(path);
  try {
    return fn(spool);
  } finally {
    spool.close();
  }
}

/** Everything a failed command must leave alone: row counts and every meta value. */
export function storedState(path: string) {
  return withDb(path, (db) => {
    const count = (table: string) => (db.query(`SELECT COUNT(*) AS n FROM ${table}`).get() as { n: number }).n;
    return {
      events: count("events"),
      batches: count("batches"),
      dedup: count("dedup"),
      dupCounts: db.query("SELECT source, dedup_id, dup_count FROM dedup ORDER BY source, dedup_id").all(),
      batchRows: db.query("SELECT id, state, count, bytes, last_at FROM batches ORDER BY id").all(),
      meta: db.query("SELECT key, value FROM meta ORDER BY key").all(),
    };
  });
}

export function userVersion(path: string): number {
  return withDb(path, (db) => (db.query("PRAGMA user_version").get() as { user_version: number }).user_version);
}

export function metaValue(path: string, key: string): string | null {
  return withDb(
    path,
    (db) => (db.query("SELECT value FROM meta WHERE key = ?").get(key) as { value: string } | null)?.value ?? null,
  );
}

export function tableNames(path: string): string[] {
  return withDb(path, (db) =>
    (db.query("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").all() as { name: string }[]).map(
      (r) => r.name,
    ),
  );
}

/**
 * Replace the home's spool with one an older build made: only the migrations up to
 * `version` applied, as that build's migrate would have left it.
 */
export function spoolAtSchema(h: Home, version: number): void {
  for (const suffix of ["", "-wal", "-shm"]) rmSync(h.db + suffix, { force: true });
  const spool = openSpool(h.db, { create: true });
  try {
    for (const m of MIGRATIONS.filter((x) => x.version <= version)) {
      spool.db
        .transaction(() => {
          spool.db.run(m.sql);
          setMetaTx(spool.db, "schema_version", m.version);
          setMetaTx(spool.db, "instance_id", "0123456789ab");
          spool.db.run(`PRAGMA user_version = ${m.version}`);
        })
        .immediate();
    }
  } finally {
    spool.close();
  }
}

/** Mark the spool as written by a newer build. */
export function spoolFromTheFuture(h: Home, version = 99): void {
  withDb(h.db, (db) => {
    db.run(`PRAGMA user_version = ${version}`);
    db.run("UPDATE meta SET value = ? WHERE key = 'schema_version'", [String(version)]);
  });
}

/** stderr holds exactly one line, the operator's error. */
export function oneErrorLine(err: string): string {
  const lines = err.trimEnd().split("\n");
  expect(lines).toHaveLength(1);
  expect(lines[0]).toStartWith("hookspool: ");
  return lines[0];
}
