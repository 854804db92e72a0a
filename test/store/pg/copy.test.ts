// Moving a spool from SQLite to PostgreSQL (`hookspool migrate-store --to postgres`): a SQLite
// spool with rows in every table, made by the store's own operations, arrives row for row with
// its ids, its instance id and its raw bytes; new rows on PostgreSQL take ids past every copied
// one and an event for a copied open batch's (route, key) joins it; a target with rows is
// refused and left as it was; a copy that cannot finish (the file changed underneath) leaves the
// target empty; the verification catches a changed value; and the CLI end to end, never
// printing the URL. On a throwaway PostgreSQL server; skipped, saying so, without one.
import { afterAll, afterEach, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { recordAction } from "../../../src/store/sqlite/actions.ts";
import { openSpool, type SqliteSpool } from "../../../src/store/sqlite/db.ts";
import { pauseDestination, recordTransportFailureTx } from "../../../src/store/sqlite/destinations.ts";
import { dropBatches } from "../../../src/store/sqlite/operator.ts";
import { enqueue, quarantine } from "../../../src/store/sqlite/enqueue.ts";
import { markAlerted, raiseIssue } from "../../../src/store/sqlite/issues.ts";
import { acquireLock } from "../../../src/lock.ts";
import { markDead, markDelivered, markRetry } from "../../../src/store/sqlite/marks.ts";
import { instanceId } from "../../../src/store/sqlite/meta.ts";
import { stepPoll } from "../../../src/store/sqlite/polls.ts";
import { claimBatch } from "../../../src/store/sqlite/claim.ts";
import { sealReady } from "../../../src/store/sqlite/queue.ts";
import { splitBatch } from "../../../src/store/sqlite/operator.ts";
import { claimPg } from "../../../src/store/pg/claim.ts";
import { COPY_TABLES, copySqliteToPg, verifyCopy } from "../../../src/store/copy.ts";
import { PgSpool } from "../../../src/store/pg/db.ts";
import { enqueuePg } from "../../../src/store/pg/enqueue.ts";
import { raiseIssuePg } from "../../../src/store/pg/issues.ts";
import { migratePg, PG_LATEST_SCHEMA } from "../../../src/store/pg/migrate.ts";
import { cli } from "../../helpers/cli.ts";
import { SECRET_SENTINEL } from "../../helpers/logs.ts";
import { PG_BIN, PG_SKIP_MESSAGE, type PgServer, startPostgres } from "../../helpers/pg.ts";
import { copy, ev, freshSpool, T0 } from "../../helpers/spool.ts";
import { tempDir } from "../../helpers/tmp.ts";

if (!PG_BIN) console.log(PG_SKIP_MESSAGE);
setDefaultTimeout(60_000);

const TABLES = COPY_TABLES.map((t) => t.name);
const ok = { klass: null, status: 200, error: null, durationMs: 5, counted: false };
const fail = (status: number) => ({ klass: "batch", status, error: `HTTP ${status}`, durationMs: 9, counted: true });
/** Bytes no text column could hold: a NUL and bytes that are not UTF-8. */
const RAW = new Uint8Array([0x7b, 0x00, 0xff, 0xfe, 0x80, 0x7d]);

/**
 * A SQLite spool with rows in every table, through the store's own operations: queued, sealed,
 * leased, delivered, retry, dead, dropped and split batches, a quarantined request, raw bodies,
 * dedup ids, a tee, an open batch left open, a tripped and a paused destination, issues and an
 * alert, a poll clock, an operator's action, a key's last delivered version, and the journal
 * they all wrote (its newest rows pruned, so SQLite's AUTOINCREMENT has given ids the table no
 * longer holds).
 */
function populate(lite: SqliteSpool): { openBatch: number } {
  const one = { max_events: 1 };
  const claim = (id: number, now: number) => {
    const c = claimBatch(lite, {
      batchId: id,
      destination: "http:d",
      now,
      leaseUntil: now + 60,
      host: "h",
      pid: 1,
      deliveryId: (a, n) => `${a}-${n}`,
    });
    if (!c) throw new Error(`batch ${id} not claimable`);
    return { batchId: id, attemptId: c.attemptId, owner: c.owner };
  };
  const place = (r: ReturnType<typeof enqueue>) => {
    if (r.status !== "queued") throw new Error(`expected queued, got ${r.status}`);
    return r.placed[0].batchId;
  };
  // 1-4: single-event batches, sealed at once; 1 with a raw body, a dedup id and a version (its
  // delivery records its key's last delivered version).
  const b1 = place(
    enqueue(
      lite,
      ev({
        key: "a",
        dedupId: "d-1",
        raw: RAW,
        headers: { "X-Event": "push" },
        version: 1_700_000_000.25,
        copies: [copy("r", "http:d", one)],
      }),
      T0,
    ),
  );
  const b2 = place(enqueue(lite, ev({ key: "b", dedupId: "d-2", copies: [copy("r", "http:d", one)] }), T0 + 1));
  const b3 = place(enqueue(lite, ev({ key: "c", copies: [copy("r", "http:d", one)] }), T0 + 2));
  const b4 = place(enqueue(lite, ev({ key: "d", copies: [copy("r", "http:d", one)] }), T0 + 3));
  enqueue(lite, ev({ key: "b", dedupId: "d-2" }), T0 + 4); // a duplicate: dup_count 1
  // Delivered, retry, dead, leased.
  markDelivered(lite, { ...claim(b1, T0 + 10), now: T0 + 11, attempt: ok, result: "200 ok" });
  markRetry(lite, { ...claim(b2, T0 + 12), now: T0 + 13, attempt: fail(503), nextAttemptAt: T0 + 100 });
  markDead(lite, { ...claim(b3, T0 + 14), now: T0 + 15, attempt: fail(422), deadReason: "rejected" });
  claim(b4, T0 + 16);
  // A batch of five events (one with a tee to another destination), sealed by its window, then split.
  for (let i = 0; i < 5; i++) {
    enqueue(
      lite,
      ev({
        key: "five",
        payload: JSON.stringify({ i, pad: "é".repeat(i) }),
        copies: i === 0 ? [copy("r", "http:d"), copy("t", "http:e", {}, true)] : [copy("r", "http:d")],
      }),
      T0 + 20 + i,
    );
  }
  sealReady(lite, T0 + 20 + 301);
  const five = (
    lite.db.query("SELECT id FROM batches WHERE key = 'five' AND destination = 'http:d'").get() as { id: number }
  ).id;
  splitBatch(lite, five, { maxEvents: 2 }, T0 + 400);
  // Dropped.
  const dropped = place(enqueue(lite, ev({ key: "gone", copies: [copy("r", "http:d", one)] }), T0 + 410));
  dropBatches(lite, [dropped], T0 + 411);
  // Quarantined, with its raw body and its issue.
  quarantine(
    lite,
    { source: "s", raw: RAW, headers: { "X-Event": "push" }, authHeaders: [], url: "/hooks/s?x=1", reason: "not_json" },
    T0 + 420,
  );
  // Destinations: one tripped, one paused.
  lite.db.transaction(() =>
    recordTransportFailureTx(lite.db, "http:d", {
      now: T0 + 430,
      startedAt: T0 + 430,
      tripAfter: 1,
      cooldownInitialS: 10,
      cooldownMaxS: 60,
      error: "HTTP 503",
    }),
  )();
  pauseDestination(lite, "http:e", "ops", T0 + 431);
  // Issues and an alert.
  const issue = raiseIssue(lite, {
    fingerprint: "delivery:http:d:transport",
    kind: "delivery",
    destination: "http:d",
    batchId: b2,
    error: "HTTP 503",
    now: T0 + 440,
  });
  markAlerted(lite, issue.id, "delivery", T0 + 441);
  // The poll clock: scheduled, then a tick.
  const rng = { next: () => 0.5 };
  const tick = (at: number) =>
    ev({
      source: "feed",
      key: "feed",
      dedupId: `poll:feed:${at}`,
      payload: JSON.stringify({ tick_at: at }),
      copies: [copy("feed", "script:feed", { quiet_s: 0, max_s: 0, max_events: 1 })],
    });
  stepPoll(lite, { instance: "feed", everyS: 60, jitterS: 10 }, T0 + 450, rng, tick);
  stepPoll(lite, { instance: "feed", everyS: 60, jitterS: 10 }, T0 + 600, rng, tick);
  // An operator's action, with its change.
  recordAction(lite, { at: T0 + 460, via: "cli", verb: "pause", target: "destination http:f" }, () =>
    pauseDestination(lite, "http:f", "cli", T0 + 460),
  );
  // Left open: a later event for (r, open) must join it.
  const openBatch = place(enqueue(lite, ev({ key: "open" }), T0 + 470));
  enqueue(lite, ev({ key: "open" }), T0 + 471);
  // The journal's newest rows go (as retention or a crash could leave it): their ids stay given.
  lite.db.run("DELETE FROM journal WHERE id > (SELECT MAX(id) - 2 FROM journal)");
  return { openBatch };
}

/** A value as both sides compare: bytes as hex, BIGINT strings as numbers. */
function norm(v: unknown, udt?: string): unknown {
  if (v instanceof Uint8Array) return `hex:${Buffer.from(v).toString("hex")}`;
  if (typeof v === "string" && udt === "int8") return Number(v);
  return v;
}

const ORDER: Record<string, string> = Object.fromEntries(COPY_TABLES.map((t) => [t.name, t.key.join(", ")]));

describe.skipIf(!PG_BIN)("migrate-store: SQLite to PostgreSQL", () => {
  let server: PgServer;
  const open: { close(): unknown }[] = [];
  let n = 0;

  beforeAll(async () => {
    server = await startPostgres();
  }, 60_000);
  afterEach(async () => {
    for (const o of open.splice(0).reverse()) await o.close();
  });
  afterAll(async () => {
    await server?.stop();
  });

  const urlOf = (database: string) =>
    `postgres://${server.user}@localhost/${database}?host=${server.socketDir}` +
    `&application_name=SENTINEL123${SECRET_SENTINEL}`;

  /** A new database, migrated unless told; the pool closes after the test. */
  async function target(o: { migrate?: boolean } = {}): Promise<{ pg: PgSpool; database: string }> {
    const database = `c${++n}`;
    await server.createDatabase(database);
    const pg = new PgSpool({ path: server.socket, user: server.user, database });
    open.push(pg);
    if (o.migrate !== false) await migratePg(pg, "ffffffffffff");
    return { pg, database };
  }

  function source(): { lite: SqliteSpool; path: string; openBatch: number } {
    const { spool: lite, path } = freshSpool();
    open.push(lite);
    return { lite, path, ...populate(lite) };
  }

  /** Every row of a table on both sides, ordered by its key (bytewise on both), normalized. */
  async function rows(lite: SqliteSpool, pg: PgSpool, table: string): Promise<{ lite: unknown[]; pg: unknown[] }> {
    const types = new Map(
      (
        (await pg.sql`SELECT column_name, udt_name FROM information_schema.columns
          WHERE table_schema = current_schema() AND table_name = ${table}`) as {
          column_name: string;
          udt_name: string;
        }[]
      ).map((c) => [c.column_name, c.udt_name]),
    );
    const where = table === "meta" ? "WHERE key <> 'schema_version'" : "";
    const order = ORDER[table].split(", ");
    const l = (
      lite.db
        .query(`SELECT * FROM ${table} ${where} ORDER BY ${order.map((c) => `${c} COLLATE BINARY`).join(", ")}`)
        .all() as Record<string, unknown>[]
    ).map((r) => Object.fromEntries(Object.entries(r).map(([k, v]) => [k, norm(v)])));
    const p = (
      (await pg.sql.unsafe(
        `SELECT * FROM ${table} ${where} ORDER BY ${order
          .map((c) => (types.get(c) === "text" ? `${c} COLLATE ` + `"C"` : c))
          .join(", ")}`,
      )) as Record<string, unknown>[]
    ).map((r) =>
      Object.fromEntries(
        Object.entries(r)
          // Columns only PostgreSQL has: the journal's xid, the values an event's writer read (null when copied).
          .filter(([k]) => !((table === "journal" && k === "xid") || (table === "events" && k === "path_values")))
          .map(([k, v]) => [k, norm(v, types.get(k))]),
      ),
    );
    return { lite: l, pg: p };
  }

  async function pgCounts(pg: PgSpool): Promise<Record<string, number>> {
    const out: Record<string, number> = {};
    for (const t of [...TABLES, "dispatchers"])
      out[t] = Number((await pg.sql.unsafe(`SELECT COUNT(*) AS n FROM ${t}`))[0].n);
    return out;
  }

  const maxOf = (lite: SqliteSpool, sql: string) => Number((lite.db.query(sql).get() as { m: number | null }).m ?? 0);

  test(
    "every table arrives row for row, ids, raw bytes and instance id kept; new rows take ids past the copied ones " +
      "and join the copied open batch",
    async () => {
      const { lite, openBatch } = source();
      for (const t of TABLES)
        expect({ t, rows: (lite.db.query(`SELECT COUNT(*) AS n FROM ${t}`).get() as { n: number }).n > 0 }).toEqual({
          t,
          rows: true,
        });
      const { pg } = await target();
      const progress: [string, number, number][] = [];
      const report = await copySqliteToPg(lite, pg, {
        batchSize: 3,
        onProgress: (t, c, total) => progress.push([t, c, total]),
      });

      // Every table, parents first, with the rows SQLite has (meta without schema_version).
      expect(report.tables.map((t) => t.name)).toEqual(TABLES);
      for (const t of report.tables) {
        const where = t.name === "meta" ? " WHERE key <> 'schema_version'" : "";
        expect(t).toEqual({
          name: t.name,
          rows: (lite.db.query(`SELECT COUNT(*) AS n FROM ${t.name}${where}`).get() as { n: number }).n,
        });
      }
      // In chunks of three, each table's last report its total.
      const events = progress.filter(([t]) => t === "events").map(([, c]) => c);
      const total = report.tables.find((t) => t.name === "events")?.rows ?? 0;
      expect(events).toEqual(Array.from({ length: Math.ceil(total / 3) }, (_, i) => Math.min(3 * (i + 1), total)));
      for (const t of TABLES) {
        const mine = progress.filter(([x]) => x === t);
        expect(mine[mine.length - 1][1]).toBe(mine[mine.length - 1][2]);
      }
      expect(events.length).toBeGreaterThan(1);

      // Row for row.
      for (const t of TABLES) {
        const { lite: l, pg: p } = await rows(lite, pg, t);
        expect({ t, rows: p }).toEqual({ t, rows: l });
      }
      // The webhook-ids' instance id is the SQLite spool's; the schema version PostgreSQL's own.
      const meta = Object.fromEntries(
        ((await pg.sql`SELECT key, value FROM meta`) as { key: string; value: string }[]).map((r) => [r.key, r.value]),
      );
      expect(meta.instance_id).toBe(instanceId(lite));
      expect(meta.schema_version).toBe(String(PG_LATEST_SCHEMA));
      // The raw bodies byte for byte (a NUL and bytes that are not UTF-8).
      const raws = (await pg.sql`SELECT raw FROM events WHERE raw IS NOT NULL ORDER BY id`) as { raw: Uint8Array }[];
      expect(raws.length).toBe(2);
      for (const r of raws) expect(new Uint8Array(r.raw)).toEqual(RAW);

      // New rows on PostgreSQL: past every copied id, and past the journal ids SQLite gave.
      const maxBatch = maxOf(lite, "SELECT MAX(id) AS m FROM batches");
      const maxEvent = maxOf(lite, "SELECT MAX(id) AS m FROM events");
      const maxAttempt = maxOf(lite, "SELECT MAX(id) AS m FROM attempts");
      const journalIssued = maxOf(lite, "SELECT seq AS m FROM sqlite_sequence WHERE name = 'journal'");
      expect(journalIssued).toBeGreaterThan(maxOf(lite, "SELECT MAX(id) AS m FROM journal"));
      const copiedJournal = ((await pg.sql`SELECT id FROM journal`) as { id: string }[]).map((r) => Number(r.id));
      const joined = await enqueuePg(pg, ev({ key: "open" }), T0 + 500);
      if (joined.status !== "queued") throw new Error(joined.status);
      expect(joined.placed[0].batchId).toBe(openBatch);
      expect(joined.placed[0].eventId).toBe(maxEvent + 1);
      const [{ count }] = await pg.sql`SELECT count FROM batches WHERE id = ${openBatch}`;
      expect(count).toBe(3);
      const fresh = await enqueuePg(pg, ev({ key: "new", copies: [copy("r", "http:d", { max_events: 1 })] }), T0 + 501);
      if (fresh.status !== "queued") throw new Error(fresh.status);
      expect(fresh.placed[0].batchId).toBe(maxBatch + 1);
      // A dedup id seen on SQLite is a duplicate on PostgreSQL.
      expect((await enqueuePg(pg, ev({ key: "a", dedupId: "d-1" }), T0 + 502)).status).toBe("duplicate");
      const [c] = await claimPg(pg, [
        {
          batchId: fresh.placed[0].batchId,
          route: "r",
          key: "new",
          destination: "http:d",
          now: T0 + 503,
          leaseUntil: T0 + 563,
          host: "h",
          pid: 2,
        },
      ]);
      expect(c).toMatchObject({ attemptId: maxAttempt + 1 });
      const newest = ((await pg.sql`SELECT id FROM journal ORDER BY id`) as { id: string }[])
        .map((r) => Number(r.id))
        .filter((id) => !copiedJournal.includes(id));
      expect(newest.length).toBeGreaterThan(0);
      expect(newest[0]).toBe(journalIssued + 1);
      const issue = await pg.sql.begin((tx) =>
        raiseIssuePg(tx, { fingerprint: "spool:new", kind: "spool", now: T0 + 504 }),
      );
      expect(issue.id).toBe(maxOf(lite, "SELECT MAX(id) AS m FROM issues") + 1);
    },
  );

  test("a target with rows is refused, and left as it was", async () => {
    const { lite } = source();
    // A database that already holds a spool.
    const { pg } = await target();
    await copySqliteToPg(lite, pg);
    const before = await pgCounts(pg);
    const err = await copySqliteToPg(lite, pg).catch((e) => e);
    expect(err).toMatchObject({ code: "E_USAGE" });
    expect(err.message).toBe(
      "the PostgreSQL spool is not empty (meta holds more than migrate wrote); migrate-store copies only into an " +
        "empty database",
    );
    expect(await pgCounts(pg)).toEqual(before);
    // One row in a table only PostgreSQL has is rows too.
    const { pg: other } = await target();
    await other.sql`INSERT INTO dispatchers (id, started_at, heartbeat_at, last_tick_at) VALUES ('h:1', 1, 1, 1)`;
    const err2 = await copySqliteToPg(lite, other).catch((e) => e);
    expect(err2).toMatchObject({ code: "E_USAGE", message: expect.stringContaining("(dispatchers holds rows)") });
    expect((await pg.sql`SELECT value FROM meta WHERE key = 'instance_id'`)[0].value).toBe(instanceId(lite));
    expect((await other.sql`SELECT value FROM meta WHERE key = 'instance_id'`)[0].value).toBe("ffffffffffff");
    expect(await pgCounts(other)).toEqual({
      ...Object.fromEntries(TABLES.map((t) => [t, 0])),
      meta: 2,
      dispatchers: 1,
    });
    // An unmigrated database is refused before anything is read.
    const { pg: bare } = await target({ migrate: false });
    await expect(copySqliteToPg(lite, bare)).rejects.toThrow(/at schema 0/);
  });

  test(
    "a copy that cannot finish leaves the target empty: the SQLite file changed underneath (an intake still " +
      "running)",
    async () => {
      const { lite, path } = source();
      const { pg } = await target();
      const writer = openSpool(path);
      open.push(writer);
      let wrote = false;
      const err = await copySqliteToPg(lite, pg, {
        onProgress: (t) => {
          if (t === "events" && !wrote) {
            wrote = true;
            enqueue(writer, ev({ key: "late" }), T0 + 900);
          }
        },
      }).catch((e) => e);
      expect(err).toMatchObject({
        code: "E_SPOOL",
        message: "the SQLite spool changed while it was copied; nothing was copied",
      });
      expect(await pgCounts(pg)).toEqual({ ...Object.fromEntries(TABLES.map((t) => [t, 0])), meta: 2, dispatchers: 0 });
      // Nothing held: a second try (nobody writing now) goes through, the late event with it.
      const report = await copySqliteToPg(lite, pg);
      expect(report.tables.find((t) => t.name === "events")?.rows).toBe(
        (lite.db.query("SELECT COUNT(*) AS n FROM events").get() as { n: number }).n,
      );
      expect(
        (
          await pg.sql`SELECT COUNT(*)::int AS n FROM events
            WHERE batch_id IN (SELECT id FROM batches WHERE key = 'late')`
        )[0].n,
      ).toBe(1);
    },
  );

  test("the verification names the table whose rows or values differ", async () => {
    const { lite } = source();
    const { pg } = await target();
    await copySqliteToPg(lite, pg);
    expect((await verifyCopy(lite, pg.sql)).tables.length).toBe(TABLES.length);
    await pg.sql`UPDATE events SET payload = payload || ' '
      WHERE id = (SELECT MIN(id) FROM events WHERE payload IS NOT NULL)`;
    await expect(verifyCopy(lite, pg.sql)).rejects.toThrow("verify: events differs between SQLite and PostgreSQL");
    await pg.sql`UPDATE events SET payload = rtrim(payload, ' ')`;
    await verifyCopy(lite, pg.sql);
    const [{ id, content_hash: hash }] =
      await pg.sql`SELECT id, content_hash FROM batches WHERE content_hash IS NOT NULL ORDER BY id LIMIT 1`;
    await pg.sql`UPDATE batches SET content_hash = 'sha256:00' WHERE id = ${id}`;
    await expect(verifyCopy(lite, pg.sql)).rejects.toThrow("verify: batches differs");
    await pg.sql`UPDATE batches SET content_hash = ${hash} WHERE id = ${id}`;
    await pg.sql`UPDATE attempts SET duration_ms = duration_ms + 1 WHERE id = 1`;
    await expect(verifyCopy(lite, pg.sql)).rejects.toThrow("verify: attempts differs");
    await pg.sql`UPDATE attempts SET duration_ms = duration_ms - 1 WHERE id = 1`;
    await pg.sql`DELETE FROM dedup WHERE dedup_id = 'd-2'`;
    await expect(verifyCopy(lite, pg.sql, { batchSize: 1 })).rejects.toThrow(
      "verify: dedup holds 3 rows in SQLite but 2 in PostgreSQL",
    );
  });

  describe("the CLI", () => {
    /**
     * A starter home (SQLite), a few events queued through the CLI, [spool] url naming HOOKSPOOL_PG_URL unless told.
     */
    async function home(o: { url?: boolean } = {}): Promise<{ home: string; env: Record<string, string> }> {
      const h = join(tempDir(), "home");
      expect((await cli(["--home", h, "init"])).code).toBe(0);
      const file = join(h, "config.toml");
      if (o.url !== false)
        writeFileSync(
          file,
          readFileSync(file, "utf8").replace(/^\[spool\]$/m, '[spool]\nurl = { env = "HOOKSPOOL_PG_URL" }'),
        );
      for (const key of ["k1", "k1", "k2"]) {
        const r = await cli(["--home", h, "enqueue", "--source", "demo", "--key", key], {
          stdin: JSON.stringify({ key }),
        });
        expect(r.code).toBe(0);
      }
      return { home: h, env: {} };
    }

    test(
      "migrate-store --to postgres: exit 0, progress on stderr, the summary line, the rows in PostgreSQL, the URL " +
        "never shown",
      async () => {
        const { home: h } = await home();
        const { pg, database } = await target({ migrate: false });
        const url = urlOf(database);
        const r = await cli(["--home", h, "migrate-store", "--to", "postgres"], { env: { HOOKSPOOL_PG_URL: url } });
        expect({ code: r.code, err: r.err.split("\n").filter((l) => l.startsWith("hookspool:")) }).toEqual({
          code: 0,
          err: [],
        });
        expect(r.out.trim()).toBe(
          "copied 2 batches, 3 events, 0 dedup rows, 0 attempts, 0 destination states, 0 issues, 0 alert limits, " +
            "0 poll clocks, 3 journal rows, 0 operator actions, 0 delivered versions into PostgreSQL; " +
            'set [spool] backend = "postgres" and start the services',
        );
        expect(r.err).toContain(`migrate-store: PostgreSQL schema 0 -> ${PG_LATEST_SCHEMA}`);
        expect(r.err).toContain("migrate-store: events: 3 of 3 rows");
        expect(r.err).toContain("migrate-store: verified: every table holds the same rows and values on both sides");
        for (const secret of ["SENTINEL123", SECRET_SENTINEL, server.socketDir, url]) {
          expect({ secret, out: r.out.includes(secret), err: r.err.includes(secret) }).toEqual({
            secret,
            out: false,
            err: false,
          });
        }
        expect((await pg.sql`SELECT COUNT(*)::int AS n FROM events`)[0].n).toBe(3);
        // Done once; a second run is refused, the database untouched.
        const again = await cli(["--home", h, "--json", "migrate-store", "--to", "postgres"], {
          env: { HOOKSPOOL_PG_URL: url },
        });
        expect(again.code).toBe(2);
        expect(JSON.parse(again.out)).toMatchObject({ code: "E_USAGE", error: expect.stringContaining("not empty") });
        expect((await pg.sql`SELECT COUNT(*)::int AS n FROM events`)[0].n).toBe(3);
      },
    );

    test("--url-env moves before the backend is switched; --json prints the report", async () => {
      const { home: h } = await home({ url: false });
      const { pg, database } = await target();
      const r = await cli(["--home", h, "--json", "migrate-store", "--to", "postgres", "--url-env", "MOVE_TO"], {
        env: { MOVE_TO: urlOf(database) },
      });
      expect(r.code).toBe(0);
      const doc = JSON.parse(r.out);
      expect(doc.tables.find((t: { name: string }) => t.name === "batches")).toEqual({ name: "batches", rows: 2 });
      expect(doc.tables.map((t: { name: string }) => t.name)).toEqual(TABLES);
      expect(r.out + r.err).not.toContain("SENTINEL123");
      expect((await pg.sql`SELECT COUNT(*)::int AS n FROM batches`)[0].n).toBe(2);
    });

    test(
      "refusals: no --to, no URL, no spool file, dispatch.lock held, an unreachable server; each one line, " +
        "nothing printed of the URL",
      async () => {
        const { home: h } = await home();
        const { database } = await target();
        const env = { HOOKSPOOL_PG_URL: urlOf(database) };
        const line = (r: { err: string }) =>
          r.err
            .trim()
            .split("\n")
            .filter((l) => l.startsWith("hookspool:"));
        const noTo = await cli(["--home", h, "migrate-store"], { env });
        expect({ code: noTo.code, err: line(noTo) }).toEqual({
          code: 2,
          err: ["hookspool: migrate-store needs --to postgres (see hookspool migrate-store --help)"],
        });
        const noUrl = await cli(["--home", h, "migrate-store", "--to", "postgres"]);
        expect({ code: noUrl.code, err: line(noUrl) }).toEqual({
          code: 2,
          err: [
            "hookspool: secret (environment variable HOOKSPOOL_PG_URL) is not set (fix the reference or the file's " +
              "permissions)",
          ],
        });
        const lock = acquireLock(join(h, "dispatch.lock"));
        try {
          const held = await cli(["--home", h, "migrate-store", "--to", "postgres"], { env });
          expect(held.code).toBe(3);
          expect(line(held)).toEqual([
            `hookspool: ${join(h, "dispatch.lock")} is held by another process (a SQLite dispatcher or hookspool ` +
              `migrate is already running; stop it first)`,
          ]);
        } finally {
          lock.release();
        }
        const down = await cli(["--home", h, "migrate-store", "--to", "postgres"], {
          env: {
            HOOKSPOOL_PG_URL: `postgres://u:${SECRET_SENTINEL}@localhost/x?host=${join(tempDir(), "nothing-here")}`,
          },
        });
        expect(down.code).toBe(2);
        expect(line(down)).toHaveLength(1);
        expect(line(down)[0]).toStartWith("hookspool: spool.url: cannot reach PostgreSQL");
        expect(down.out + down.err).not.toContain(SECRET_SENTINEL);
        rmSync(join(h, "spool.db"));
        const gone = await cli(["--home", h, "migrate-store", "--to", "postgres"], { env });
        expect({ code: gone.code, err: line(gone) }).toEqual({
          code: 1,
          err: [
            `hookspool: no SQLite spool at ${join(h, "spool.db")}; there is nothing to move ` +
              `(migrate-store copies the spool.db of --home (or [spool] home and db))`,
          ],
        });
      },
    );

    test("--help", async () => {
      const r = await cli(["migrate-store", "--help"]);
      expect(r.code).toBe(0);
      expect(r.out).toStartWith("hookspool migrate-store - move the SQLite spool into an empty PostgreSQL database");
      expect(r.out).toContain("--url-env <NAME>");
    });
  });
});
