// hookspool migrate, and the schema gate every other command passes through; the payload
// indexes migrate (and the dispatcher's start) builds for a bobbin instance's `indexed` paths,
// and drops once no instance declares them.
import { afterEach, describe, expect, test } from "bun:test";
import { existsSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { FakeClock } from "../../src/clock.ts";
import { loadConfig } from "../../src/config/load.ts";
import { openStores } from "../../src/store/open.ts";
import { indexedPaths } from "../../src/store/schema.ts";
import { cli } from "../helpers/cli.ts";
import { tempDir } from "../helpers/tmp.ts";
import { bobbinRoot, manifestText, writeBobbin } from "../helpers/bobbins.ts";
import {
  enqueueJson,
  type Home,
  initHome,
  inHome,
  metaValue,
  oneErrorLine,
  spoolAtSchema,
  spoolFromTheFuture,
  tableNames,
  userVersion,
  withDb,
} from "./home.ts";

const ALL = [
  "0001_v2",
  "0002_unwrap",
  "0003_polls",
  "0004_quarantine",
  "0005_ready_index",
  "0006_dead_reason",
  "0007_trace",
  "0008_journal",
  "0009_actions",
  "0010_pacing",
  "0011_outcomes",
  "0012_raw_once",
  "0013_versions",
  "0014_body_files",
];

/** Every table of the schema, with the columns it must have. */
const SPEC_COLUMNS: Record<string, string[]> = {
  meta: ["key", "value"],
  events: [
    "id",
    "source",
    "route",
    "batch_id",
    "event_type",
    "dedup_id",
    "received_at",
    "payload",
    "raw",
    "raw_is_payload",
    "headers",
    "size",
    "excluded_at",
    "version",
  ],
  dedup: ["source", "dedup_id", "event_id", "seen_at", "dup_count"],
  batches: [
    "id",
    "route",
    "source",
    "destination",
    "key",
    "state",
    "first_at",
    "last_at",
    "quiet_s",
    "max_s",
    "max_events",
    "max_bytes",
    "not_before",
    "count",
    "bytes",
    "sealed_at",
    "content_hash",
    "attempts",
    "next_attempt_at",
    "lease_until",
    "lease_owner",
    "last_error",
    "last_class",
    "delivered_at",
    "result",
    "stale_floor",
    "floor_at",
  ],
  attempts: [
    "id",
    "batch_id",
    "n",
    "destination",
    "started_at",
    "finished_at",
    "outcome",
    "klass",
    "status",
    "error",
    "duration_ms",
    "probe",
    "counted",
    "delivery_id",
    "events_delivered",
    "failed_event_id",
  ],
  destinations: [
    "name",
    "state",
    "consecutive_failures",
    "opened_at",
    "cooldown_s",
    "probe_until",
    "last_probe_batch_id",
    "paused_at",
    "paused_by",
    "last_ok_at",
    "last_error",
    "retry_after_until",
  ],
  issues: [
    "id",
    "fingerprint",
    "kind",
    "destination",
    "route",
    "state",
    "first_at",
    "last_at",
    "count",
    "sample_batch_id",
    "last_error",
    "alerted_at",
  ],
  alerts: ["kind", "last_at", "suppressed"],
  delivered_versions: ["route", "key", "version", "batch_id", "at"],
  polls: [
    "instance",
    "next_at",
    "last_tick_at",
    "last_batch_id",
    "delivered_at",
    "delivered_tick_at",
    "skipped",
    "created_at",
  ],
};

/** The indexes the schema must have, as column lists. */
const SPEC_INDEXES: Record<string, string[][]> = {
  events: [
    ["batch_id", "id"],
    ["source", "received_at"],
  ],
  batches: [
    ["route", "key", "state"],
    ["state", "next_attempt_at"],
    ["destination", "state"],
    ["state", "delivered_at"],
  ],
};

const columns = (db: string, table: string) =>
  withDb(db, (d) => (d.query(`PRAGMA table_info(${table})`).all() as { name: string }[]).map((c) => c.name));

const indexes = (db: string, table: string) =>
  withDb(db, (d) =>
    (d.query(`PRAGMA index_list(${table})`).all() as { name: string }[]).map((i) =>
      (d.query(`PRAGMA index_info(${i.name})`).all() as { name: string }[]).map((c) => c.name),
    ),
  );

const mode = (path: string) => statSync(path).mode & 0o777;

/** Lock holders still running when a test ends (it failed before releasing). */
const holders: { kill(): void }[] = [];
afterEach(() => {
  for (const h of holders.splice(0)) h.kill();
});

/** Hold dispatch.lock in another process, as a running dispatcher would. */
async function holdLockElsewhere(path: string): Promise<{ release(): Promise<void> }> {
  const lockModule = join(import.meta.dir, "../../src/lock.ts");
  const child = Bun.spawn(
    [
      process.execPath,
      "-e",
      `import { acquireLock } from ${JSON.stringify(lockModule)}; ` +
        `acquireLock(${JSON.stringify(path)}); console.log("locked"); await Bun.stdin.text();`,
    ],
    { stdin: "pipe", stdout: "pipe", stderr: "inherit" },
  );
  const reader = child.stdout.getReader();
  let said = "";
  while (!said.includes("locked")) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`the lock holder exited early: ${said}`);
    said += new TextDecoder().decode(value);
  }
  reader.releaseLock();
  holders.push(child);
  return {
    async release() {
      child.stdin.end();
      await child.exited;
    },
  };
}

describe("migrate on a fresh home", () => {
  test("creates a private spool at the latest schema with every table of the data model", async () => {
    const home = tempDir();
    const r = await cli(["--home", home, "migrate"]);
    expect(r).toMatchObject({ code: 0, err: "" });
    expect(r.out).toContain(`applied ${ALL.join(", ")} (schema 0 -> 14)`);
    const db = join(home, "spool.db");
    expect(mode(home)).toBe(0o700);
    expect(mode(db)).toBe(0o600);
    expect(userVersion(db)).toBe(14);
    expect(metaValue(db, "schema_version")).toBe("14");
    expect(metaValue(db, "instance_id")).toMatch(/^[0-9a-f]+$/);
    expect(tableNames(db)).toEqual(expect.arrayContaining(Object.keys(SPEC_COLUMNS)));
    for (const [table, cols] of Object.entries(SPEC_COLUMNS)) {
      expect({ table, cols: columns(db, table) }).toEqual({ table, cols: expect.arrayContaining(cols) });
    }
    for (const [table, wanted] of Object.entries(SPEC_INDEXES)) {
      expect(indexes(db, table)).toEqual(expect.arrayContaining(wanted));
    }
  });

  test("--json reports from, to and what was applied", async () => {
    const home = tempDir();
    const r = await cli(["migrate", "--json", "--home", home]);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.out)).toEqual({ from: 0, to: 14, applied: ALL, indexes: { created: [], dropped: [] } });
  });

  test("--dry-run lists the migrations and creates nothing", async () => {
    const home = tempDir();
    const r = await cli(["--home", home, "migrate", "--dry-run"]);
    expect(r.code).toBe(0);
    for (const name of ALL) expect(r.out).toContain(name);
    expect(readdirSync(home)).toEqual([]);
  });

  test("a home that does not exist, and no config, is refused as a typo, dry run or not", async () => {
    const parent = tempDir();
    const home = join(parent, "tpyo");
    for (const argv of [["migrate"], ["migrate", "--dry-run"]]) {
      const r = await cli(["--home", home, ...argv]);
      expect({ argv, code: r.code }).toEqual({ argv, code: 1 });
      expect(oneErrorLine(r.err)).toContain(`no hookspool home at ${home}`);
      expect(r.err).toContain("hookspool init");
    }
    expect(readdirSync(parent)).toEqual([]);
  });

  test("a config naming a spool in a directory not yet made: migrate makes it, private", async () => {
    const home = tempDir();
    writeFileSync(join(home, "config.toml"), '[spool]\ndb = "state/spool.db"\n');
    const r = await cli(["--home", home, "migrate"]);
    expect(r).toMatchObject({ code: 0, err: "" });
    expect(mode(join(home, "state"))).toBe(0o700);
    expect(userVersion(join(home, "state", "spool.db"))).toBe(14);
  });

  test("a second migrate has nothing to apply and keeps instance_id", async () => {
    const home = tempDir();
    expect((await cli(["--home", home, "migrate"])).code).toBe(0);
    const db = join(home, "spool.db");
    const id = metaValue(db, "instance_id");
    const r = await cli(["--home", home, "migrate"]);
    expect(r.code).toBe(0);
    expect(r.out).toContain("nothing to apply");
    expect(r.out).not.toContain("applied");
    expect(metaValue(db, "instance_id")).toBe(id);
    expect(userVersion(db)).toBe(14);
  });
});

describe("an older schema", () => {
  for (const version of [1, 2, 3]) {
    test(`schema ${version}: every non-migrating command exits 2 and asks for migrate; migrate upgrades`, async () => {
      const h = await initHome();
      spoolAtSchema(h, version);
      const attempts: [string, string[], string?][] = [
        ["list", ["list"]],
        ["show", ["show", "1"]],
        ["status", ["status"]],
        ["enqueue", ["enqueue", "--source", "demo", "--key", "k"], '{"a":1}'],
      ];
      for (const [name, argv, stdin] of attempts) {
        const r = await inHome(h, argv, { stdin });
        expect({ name, code: r.code }).toEqual({ name, code: 2 });
        expect(oneErrorLine(r.err)).toContain("run hookspool migrate");
      }
      expect(userVersion(h.db)).toBe(version);
      expect(tableNames(h.db).includes("polls")).toBe(version >= 3);

      const m = await inHome(h, ["migrate"]);
      expect(m.code).toBe(0);
      expect(m.out).toContain(`applied ${ALL.slice(version).join(", ")} (schema ${version} -> 14)`);
      expect(userVersion(h.db)).toBe(14);
      expect(metaValue(h.db, "schema_version")).toBe("14");
      expect(metaValue(h.db, "instance_id")).toBe("0123456789ab");
      expect(columns(h.db, "attempts")).toEqual(expect.arrayContaining(["events_delivered", "failed_event_id"]));
      expect(tableNames(h.db)).toContain("polls");
      expect(columns(h.db, "events")).toContain("url");
      expect((await inHome(h, ["list"])).code).toBe(0);
    });
  }

  test("schema 3 -> 4 keeps every issue as it was and lets the new kinds in", async () => {
    const h = await initHome();
    spoolAtSchema(h, 3);
    withDb(h.db, (db) => {
      db.run(
        "INSERT INTO issues (fingerprint, kind, destination, state, first_at, last_at, count, " +
          "sample_batch_id, last_error, alerted_at) VALUES ('delivery:a:timeout', 'delivery', 'a', " +
          "'acked', 1, 2, 5, 9, 'slow', 3)",
      );
      expect(() =>
        db.run(
          "INSERT INTO issues (fingerprint, kind, state, first_at, last_at) VALUES " +
            "('source:quarantine:x', 'source', 'open', 1, 1)",
        ),
      ).toThrow();
    });
    expect((await inHome(h, ["migrate"])).code).toBe(0);
    withDb(h.db, (db) => {
      expect(
        db
          .query(
            "SELECT id, fingerprint, kind, destination, state, first_at, last_at, count, " +
              "sample_batch_id, last_error, alerted_at FROM issues",
          )
          .all(),
      ).toEqual([
        {
          id: 1,
          fingerprint: "delivery:a:timeout",
          kind: "delivery",
          destination: "a",
          state: "acked",
          first_at: 1,
          last_at: 2,
          count: 5,
          sample_batch_id: 9,
          last_error: "slow",
          alerted_at: 3,
        },
      ]);
      for (const kind of ["source", "internal"])
        db.run("INSERT INTO issues (fingerprint, kind, state, first_at, last_at) VALUES (?, ?, 'open', 1, 1)", [
          `${kind}:x`,
          kind,
        ]);
      expect(() =>
        db.run(
          "INSERT INTO issues (fingerprint, kind, state, first_at, last_at) VALUES ('x', 'nonsense', 'open', 1, 1)",
        ),
      ).toThrow();
    });
    expect(indexes(h.db, "issues")).toEqual(expect.arrayContaining([["state", "last_at"], ["fingerprint"]]));
  });

  test(
    "schema 10 -> 11 rebuilds batches and journal keeping every row, their references and the " +
      "journal's high-water mark",
    async () => {
      const h = await initHome();
      spoolAtSchema(h, 10);
      withDb(h.db, (db) => {
        db.run(
          `INSERT INTO batches (id, route, source, destination, key, state, first_at, last_at, ` +
            `quiet_s, max_s, max_events, max_bytes, count, bytes, sealed_at, content_hash, attempts, ` +
            `next_attempt_at, last_class, last_error, dead_reason)
        VALUES (7, 'r', 's', 'd', 'k', 'dead', 1, 2, 0, 0, 10, 100, 1, 5, 2, 'sha256:x', 3, NULL, ` +
            `'batch', 'boom', 'exhausted')`,
        );
        db.run(
          "INSERT INTO events (source, route, batch_id, received_at, payload, size) VALUES ('s', 'r', 7, 1, '{}', 2)",
        );
        for (let i = 0; i < 3; i++)
          db.run(
            "INSERT INTO journal (at, kind, batch_id, source, destination, key) VALUES (1, 'event', 7, 's', 'd', 'k')",
          );
        // The newest rows gone (as if pruned): the next id still follows the highest ever given.
        db.run("DELETE FROM journal WHERE id > 1");
        expect(() => db.run("UPDATE batches SET state = 'awaiting' WHERE id = 7")).toThrow();
      });
      expect((await inHome(h, ["migrate"])).code).toBe(0);
      withDb(h.db, (db) => {
        expect(
          db.query("SELECT id, state, attempts, last_class, last_error, dead_reason, content_hash FROM batches").all(),
        ).toEqual([
          {
            id: 7,
            state: "dead",
            attempts: 3,
            last_class: "batch",
            last_error: "boom",
            dead_reason: "exhausted",
            content_hash: "sha256:x",
          },
        ]);
        expect(db.query("PRAGMA foreign_key_check").all()).toEqual([]);
        expect(db.query("SELECT batch_id FROM events").all()).toEqual([{ batch_id: 7 }]);
        db.run(
          "INSERT INTO journal (at, kind, batch_id, source, destination, key) VALUES (2, 'awaiting', 7, 's', 'd', 'k')",
        );
        expect(db.query("SELECT id, kind FROM journal ORDER BY id").all()).toEqual([
          { id: 1, kind: "event" },
          { id: 4, kind: "awaiting" },
        ]);
        db.run("UPDATE batches SET state = 'awaiting', last_class = 'agent', dead_reason = NULL WHERE id = 7");
        expect(() => db.run("UPDATE batches SET state = 'nonsense' WHERE id = 7")).toThrow();
        // Events still reference the rebuilt table: the foreign key holds.
        db.run("PRAGMA foreign_keys = ON");
        expect(() =>
          db.run(
            "INSERT INTO events (source, route, batch_id, received_at, payload, size) VALUES ('s', " +
              "'r', 999, 1, '{}', 2)",
          ),
        ).toThrow();
      });
      expect(indexes(h.db, "batches")).toEqual(
        expect.arrayContaining([["route", "key", "first_at", "id"], ["next_attempt_at"]]),
      );
    },
  );

  test("schema 11 -> 12: events written before keep their raw bodies, stored apart (raw_is_payload 0)", async () => {
    const h = await initHome();
    spoolAtSchema(h, 11);
    withDb(h.db, (db) => {
      db.run(
        "INSERT INTO batches (id, route, source, destination, key, state, first_at, last_at, quiet_s, max_s, " +
          "max_events, max_bytes) VALUES (1, 'r', 's', 'd', 'k', 'open', 1, 1, 0, 0, 10, 100)",
      );
      db.run(
        "INSERT INTO events (source, route, batch_id, received_at, payload, raw, size) " +
          "VALUES ('s', 'r', 1, 1, '{}', CAST('{}' AS BLOB), 2)",
      );
    });
    expect((await inHome(h, ["migrate"])).code).toBe(0);
    withDb(h.db, (db) => {
      const row = db.query("SELECT raw, raw_is_payload FROM events").get() as {
        raw: Uint8Array;
        raw_is_payload: number;
      };
      expect([new TextDecoder().decode(row.raw), row.raw_is_payload]).toEqual(["{}", 0]);
      expect(() => db.run("UPDATE events SET raw_is_payload = 2")).toThrow();
    });
  });

  test("--dry-run on an older spool names the pending migrations and changes nothing", async () => {
    const h = await initHome();
    spoolAtSchema(h, 1);
    const r = await inHome(h, ["migrate", "--dry-run"]);
    expect(r.code).toBe(0);
    expect(r.out).toContain("0002_unwrap, 0003_polls, 0004_quarantine, 0005_ready_index");
    expect(r.out).not.toContain("0001_v2");
    expect(userVersion(h.db)).toBe(1);
    expect(metaValue(h.db, "schema_version")).toBe("1");
    expect(tableNames(h.db)).not.toContain("polls");
  });
});

describe("a newer schema", () => {
  test("every command exits 2, migrate and --dry-run included, and the spool is left alone", async () => {
    const h = await initHome();
    spoolFromTheFuture(h);
    const attempts: [string, string[], string?][] = [
      ["list", ["list"]],
      ["show", ["show", "1"]],
      ["status", ["status"]],
      ["enqueue", ["enqueue", "--source", "demo", "--key", "k"], '{"a":1}'],
      ["migrate", ["migrate"]],
      ["migrate --dry-run", ["migrate", "--dry-run"]],
    ];
    for (const [name, argv, stdin] of attempts) {
      const r = await inHome(h, argv, { stdin });
      expect({ name, code: r.code }).toEqual({ name, code: 2 });
      expect(oneErrorLine(r.err)).toContain("newer");
    }
    expect(userVersion(h.db)).toBe(99);
  });
});

describe("a missing spool", () => {
  test("list, show, status and enqueue exit 2 and never create it", async () => {
    const h = await initHome();
    for (const suffix of ["", "-wal", "-shm"]) rmSync(h.db + suffix, { force: true });
    const before = readdirSync(h.home).sort();
    for (const argv of [["list"], ["status"], ["show", "1"], ["enqueue", "--source", "demo", "--key", "k"]]) {
      const r = await inHome(h, argv, { stdin: '{"a":1}' });
      expect({ argv, code: r.code }).toEqual({ argv, code: 2 });
      expect(oneErrorLine(r.err)).toContain("no spool database");
    }
    expect(existsSync(h.db)).toBe(false);
    expect(readdirSync(h.home).sort()).toEqual(before);
  });
});

describe("dispatch.lock", () => {
  test(
    "migrate exits 3 while another process holds the lock (a dry run still looks), and works once " + "it is released",
    async () => {
      const h: Home = await initHome();
      spoolAtSchema(h, 1);
      const holder = await holdLockElsewhere(join(h.home, "dispatch.lock"));
      const r = await inHome(h, ["migrate"]);
      expect(r.code).toBe(3);
      expect(oneErrorLine(r.err)).toContain("dispatch.lock");
      expect(r.out).toBe("");
      expect(userVersion(h.db)).toBe(1);
      const dry = await inHome(h, ["migrate", "--dry-run"]);
      expect(dry).toMatchObject({ code: 0, err: "" });
      expect(dry.out).toContain("would apply 0002_unwrap");
      expect(userVersion(h.db)).toBe(1);
      await holder.release();
      const again = await inHome(h, ["migrate"]);
      expect(again.code).toBe(0);
      expect(userVersion(h.db)).toBe(14);
    },
  );
});

describe("payload indexes", () => {
  /** The ids list --json gives for these arguments. */
  async function listed(h: Home, argv: string[]): Promise<number[]> {
    const r = await inHome(h, ["--json", "list", ...argv]);
    expect(r).toMatchObject({ code: 0, err: "" });
    return (JSON.parse(r.out) as { id: number }[]).map((b) => b.id);
  }

  /** A home with a github.repo instance (its `indexed`: repository.full_name). */
  async function githubHome() {
    const h = await initHome();
    writeFileSync(join(h.home, "github-secret"), "a-secret-for-tests", { mode: 0o600 });
    const instance =
      `\n[bobbins.gh]\nbobbin = "github.repo"\nsecrets.secret = { file = "${join(h.home, "github-secret")}" }\n` +
      `outputs = { "*" = "script:demo-log" }\n`;
    writeFileSync(h.config, readFileSync(h.config, "utf8") + instance);
    return { h, without: () => writeFileSync(h.config, readFileSync(h.config, "utf8").replace(instance, "")) };
  }
  const indexes = (db: string) =>
    withDb(db, (d) =>
      (
        d.query("SELECT name FROM sqlite_master WHERE type = 'index' AND name LIKE 'events_where%'").all() as {
          name: string;
        }[]
      ).map((r) => r.name),
    );

  test("migrate builds one for each path a bobbin of the config indexes, and drops it when none does", async () => {
    const { h, without } = await githubHome();
    expect(indexes(h.db)).toEqual([]);
    const dry = await inHome(h, ["migrate", "--dry-run"]);
    expect(dry.out).toMatch(
      /^payload index events_where_repository_full_name_\w+: would build for repository\.full_name$/m,
    );
    expect(indexes(h.db)).toEqual([]);
    const built = await inHome(h, ["migrate"]);
    expect(built.code).toBe(0);
    expect(built.out).toMatch(
      /^payload index (events_where_repository_full_name_\w+): built for repository\.full_name$/m,
    );
    const [name] = indexes(h.db);
    expect(name).toMatch(/^events_where_repository_full_name_/);
    expect((await inHome(h, ["migrate"])).out).not.toContain("payload index");
    expect(JSON.parse((await inHome(h, ["--json", "migrate"])).out).indexes).toEqual({ created: [], dropped: [] });
    // The list reads through it.
    await enqueueJson(h, "gh", "acme/api:push", { repository: { full_name: "acme/api" } });
    expect(await listed(h, ["--where", "repository.full_name = acme/api"])).toHaveLength(1);
    without();
    const dropped = JSON.parse((await inHome(h, ["--json", "migrate"])).out);
    expect(dropped.indexes).toEqual({ created: [], dropped: [name] });
    expect(indexes(h.db)).toEqual([]);
  });

  test("a bobbin whose indexed list is malformed: migrate refuses in one line naming the entry, exit 2", async () => {
    const h = await initHome();
    const root = bobbinRoot();
    const manifest = manifestText("acme.widgets").replace("summary =", 'indexed = ["widget.owner", "a..b"]\nsummary =');
    writeBobbin(root, "acme/widgets", manifest);
    const secret = join(h.home, "widgets-secret");
    writeFileSync(secret, "a-secret-for-tests", { mode: 0o600 });
    const config = readFileSync(h.config, "utf8").replace(/^\[spool\]$/m, `[spool]\nbobbin_path = ["${root}"]`);
    writeFileSync(
      h.config,
      `${config}\n[bobbins.w]\nbobbin = "acme.widgets"\nsecrets.secret = { file = "${secret}" }\n` +
        `outputs = { "*" = "script:demo-log" }\n`,
    );
    const r = await inHome(h, ["migrate"]);
    expect(r.code).toBe(2);
    expect(r.out).toBe("");
    expect(r.err.trim().split("\n")).toEqual([
      expect.stringMatching(/^hookspool: .*bobbin\.toml: indexed\[1\]: a path is keys of letters, digits, _, \$ and -/),
    ]);
    expect(indexes(h.db)).toEqual([]);
  });

  test("the dispatcher's start builds them too, as it migrates", async () => {
    const { h } = await githubHome();
    const loaded = loadConfig({ home: h.home, env: {} });
    // The instance's expanded source carries its bobbin's indexed paths.
    expect(loaded.config.sources.gh.indexed).toEqual(["repository.full_name"]);
    expect(indexedPaths(loaded.config)).toEqual(["repository.full_name"]);
    const stores = await openStores(loaded.config, {
      mode: "dispatch",
      paths: loaded.paths,
      env: {},
      clock: new FakeClock(1_700_000_000),
    });
    await stores.close();
    expect(indexes(h.db)).toHaveLength(1);
  });
});
