// The scale-out backend on a real PostgreSQL server (a throwaway cluster on a unix socket):
// migrations under an advisory lock with the version contract, the join rule and dedup safe
// under concurrent intakes, content hashes identical to SQLite's, claims that deliver only the
// head of each (route, key) group with two dispatchers racing, fenced marks, lease recovery,
// and one maintenance holder at a time. Skipped, saying so, when PostgreSQL is not installed.
import { sealReady as sealReadySqlite } from "../../../src/store/sqlite/queue.ts";
import { contentHash } from "../../../src/store/content.ts";
import { afterAll, afterEach, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { enqueue as enqueueSqlite } from "../../../src/store/sqlite/enqueue.ts";
import type { EnqueueResult, NewEvent } from "../../../src/store/enqueue.ts";
import { PgSpool } from "../../../src/store/pg/db.ts";
import { INDEX_LOCK, syncPayloadIndexesPg } from "../../../src/store/pg/where.ts";
import { enqueueGroupPg, enqueuePg } from "../../../src/store/pg/enqueue.ts";
import type { Claim } from "../../../src/store/queue.ts";
import { claimPg } from "../../../src/store/pg/claim.ts";
import { candidatesPg, recoverExpiredPg, sealReadyPg } from "../../../src/store/pg/queue.ts";
import { markDeliveredPg, markRetryPg } from "../../../src/store/pg/marks.ts";
import { MaintenanceLock, maintenanceHolder } from "../../../src/store/pg/leader.ts";
import { journalAfterPg, PG_CURSOR_START } from "../../../src/store/pg/journal.ts";
import { listenForWork, notifyWork } from "../../../src/store/pg/wakeups.ts";
import { dispatchersPg, effectiveNowPg, forgetDispatcherPg, writeHeartbeatPg } from "../../../src/store/pg/meta.ts";
import { HEARTBEAT_STALE_S } from "../../../src/obs/status.ts";
import { migratePg, PG_LATEST_SCHEMA, pgSchemaVersion, requirePgSchema } from "../../../src/store/pg/migrate.ts";
import { join } from "node:path";
import { PG_BIN, PG_SKIP_MESSAGE, type PgServer, startPostgres } from "../../helpers/pg.ts";
import { waitFor } from "../../helpers/proc.ts";
import { copy, ev, freshSpool, T0 } from "../../helpers/spool.ts";

if (!PG_BIN) console.log(PG_SKIP_MESSAGE);
setDefaultTimeout(30_000);

describe.skipIf(!PG_BIN)("the spool on PostgreSQL", () => {
  let server: PgServer;
  const pools: PgSpool[] = [];
  let n = 0;

  beforeAll(async () => {
    server = await startPostgres();
  }, 60_000);

  afterEach(async () => {
    for (const p of pools.splice(0)) await p.close().catch(() => {});
  });

  afterAll(async () => {
    await server?.stop();
  });

  /** A fresh database; `pools` more connections pools to it (another intake, another dispatcher). */
  async function fresh(o: { migrate?: boolean; pools?: number } = {}): Promise<PgSpool[]> {
    const database = `t${++n}`;
    await server.createDatabase(database);
    const out: PgSpool[] = [];
    for (let i = 0; i < (o.pools ?? 1); i++) {
      const p = new PgSpool({ path: server.socket, user: server.user, database }, { max: 4 });
      pools.push(p);
      out.push(p);
    }
    if (o.migrate !== false) await migratePg(out[0], "0123456789ab");
    return out;
  }

  test("payload indexes: a process finding another building them leaves them; an invalid one is rebuilt", async () => {
    const [a, b] = await fresh({ pools: 2 });
    const valid = async () =>
      (
        (await a.sql`SELECT c.relname AS name, i.indisvalid AS valid FROM pg_index i
          JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relname LIKE 'events_where_%'`) as {
          name: string;
          valid: boolean;
        }[]
      ).map((r) => [r.name, r.valid]);
    // b holds the index lock, as a dispatcher building them does: a does nothing and says so.
    const holder = await b.sql.reserve();
    try {
      await holder`SELECT pg_advisory_lock(${INDEX_LOCK}::bigint)`;
      expect(await syncPayloadIndexesPg(a, ["repository.full_name"])).toEqual({ created: [], dropped: [], busy: true });
      expect(await valid()).toEqual([]);
      await holder`SELECT pg_advisory_unlock(${INDEX_LOCK}::bigint)`;
    } finally {
      holder.release();
    }
    const built = await syncPayloadIndexesPg(a, ["repository.full_name"]);
    expect(built.created).toHaveLength(1);
    const name = built.created[0].name;
    expect(await valid()).toEqual([[name, true]]);
    // A build interrupted leaves the index invalid: the next sync drops it and builds it again.
    await a.sql`UPDATE pg_index SET indisvalid = false WHERE indexrelid = ${name}::regclass`;
    expect(await syncPayloadIndexesPg(b, ["repository.full_name"])).toEqual({
      created: built.created,
      dropped: [name],
    });
    expect(await valid()).toEqual([[name, true]]);
    expect(await syncPayloadIndexesPg(b, ["repository.full_name"])).toEqual({ created: [], dropped: [] });
  });

  const queued = (r: EnqueueResult) => {
    if (r.status !== "queued") throw new Error(`expected queued, got ${r.status}`);
    return r.placed;
  };
  const row = async (p: PgSpool, id: number) =>
    (await p.sql`SELECT * FROM batches WHERE id = ${id}`)[0] as Record<string, unknown>;

  describe("schema", () => {
    test("migrate applies the schema once, under its lock, even when two processes start together", async () => {
      const [a, b] = await fresh({ migrate: false, pools: 2 });
      expect(await pgSchemaVersion(a)).toBe(0);
      await expect(requirePgSchema(a)).rejects.toThrow(/at schema 0; this build needs 11/);
      const [ra, rb] = await Promise.all([migratePg(a, "aaaaaaaaaaaa"), migratePg(b, "bbbbbbbbbbbb")]);
      expect([...ra.applied, ...rb.applied]).toEqual([
        "0001_schema",
        "0002_pacing",
        "0003_outcomes",
        "0004_raw_once",
        "0005_lz4",
        "0006_lean_batches",
        "0007_payload_json",
        "0008_versions",
        "0009_body_files",
        "0010_queue_statistics",
        "0011_path_values",
      ]);
      expect(await pgSchemaVersion(b)).toBe(PG_LATEST_SCHEMA);
      await requirePgSchema(b);
      expect((await migratePg(a, "cccccccccccc")).applied).toEqual([]);
      // The first migrate's instance id stays.
      const [id] = await a.sql`SELECT value FROM meta WHERE key = 'instance_id'`;
      expect(["aaaaaaaaaaaa", "bbbbbbbbbbbb"]).toContain(id.value);
    });

    test("batches holds only the indexes its queries search, most partial, with room for HOT updates", async () => {
      const [a] = await fresh();
      const rows = (await a.sql`SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'batches'
          ORDER BY indexname`) as { indexname: string; indexdef: string }[];
      expect(rows.map((r) => r.indexname)).toEqual([
        "batches_dead_reason",
        "batches_destination",
        "batches_due",
        "batches_finished",
        "batches_group",
        "batches_leased",
        "batches_one_open",
        "batches_pkey",
        "batches_queue",
        "batches_ready",
      ]);
      // Every index but the key, what a destination holds and a group's batches covers only some states.
      const full = rows.filter((r) => !r.indexdef.includes(" WHERE ")).map((r) => r.indexname);
      expect(full).toEqual(["batches_destination", "batches_group", "batches_pkey"]);
      const [t] = await a.sql`SELECT reloptions FROM pg_class WHERE relname = 'batches'`;
      expect(t.reloptions).toEqual(["fillfactor=90"]);
    });

    test("payloads and raw bodies are compressed with LZ4 where the server has it, and read back whole", async () => {
      const [p] = await fresh();
      // Whether this server takes lz4 at all (built --with-lz4, PostgreSQL 14 or later).
      const lz4 = await p.sql
        .begin(async (tx) => {
          await tx`SELECT set_config('default_toast_compression', 'lz4', true)`;
          return true;
        })
        .catch(() => false);
      const cols = (await p.sql`SELECT attname, attcompression::text AS c FROM pg_attribute
          WHERE attrelid = 'events'::regclass AND attname IN ('payload', 'raw') ORDER BY attname`) as {
        attname: string;
        c: string;
      }[];
      expect(cols.map((c) => [c.attname, c.c])).toEqual([
        ["payload", lz4 ? "l" : ""],
        ["raw", lz4 ? "l" : ""],
      ]);
      const payload = JSON.stringify({ text: "lorem ipsum ".repeat(1000) });
      const raw = new TextEncoder().encode(`${payload} `);
      const [placed] = queued(await enqueuePg(p, ev({ payload, raw }), T0));
      const [r] = await p.sql`SELECT payload, raw, pg_column_compression(payload) AS how FROM events
          WHERE id = ${placed.eventId}`;
      expect([r.payload, Buffer.from(r.raw).equals(Buffer.from(raw)), r.how]).toEqual([
        payload,
        true,
        lz4 ? "lz4" : "pglz",
      ]);
    });

    test("a schema newer than this build is refused by migrate and by every reader", async () => {
      const [p] = await fresh();
      await p.sql`UPDATE meta SET value = '99' WHERE key = 'schema_version'`;
      await expect(migratePg(p, "x")).rejects.toThrow(/schema 99, newer than this build/);
      await expect(requirePgSchema(p)).rejects.toThrow(/schema 99, newer than this build/);
    });

    test("the one-open-batch-per-group rule is a partial unique index", async () => {
      const [p] = await fresh();
      const open = (id: number) => p.sql`INSERT
        INTO batches (id, route, source, destination, key, state, first_at, last_at, quiet_s, max_s, max_events,
        max_bytes)
          VALUES (${id}, 'r', 's', 'http:d', 'k', 'open', 1, 1, 1, 1, 1, 1)`;
      await open(1);
      await expect(open(2)).rejects.toThrow(/batches_one_open/);
    });
  });

  describe("enqueue", () => {
    test("the join rule: one (route, key) joins its open batch; other keys and routes get their own", async () => {
      const [p] = await fresh();
      const a = queued(await enqueuePg(p, ev(), T0))[0];
      const b = queued(await enqueuePg(p, ev(), T0 + 3))[0];
      const otherKey = queued(await enqueuePg(p, ev({ key: "k2" }), T0 + 3))[0];
      const otherRoute = queued(await enqueuePg(p, ev({ copies: [copy("r2", "http:d")] }), T0 + 3))[0];
      expect(b.batchId).toBe(a.batchId);
      expect(new Set([a.batchId, otherKey.batchId, otherRoute.batchId]).size).toBe(3);
      expect(await row(p, a.batchId)).toMatchObject({ state: "open", count: 2, first_at: T0, last_at: T0 + 3 });
    });

    test(
      "sealed on size in the enqueue's transaction, with the content hash SQLite computes for the same " + "events",
      async () => {
        const [p] = await fresh();
        const sqlite = freshSpool();
        const events: NewEvent[] = [1, 2, 3].map((i) =>
          ev({
            payload: JSON.stringify({ n: i, big: 1.2345678901234567e19 }),
            headers: i === 2 ? { "x-kept": "v" } : {},
            copies: [copy("r", "http:d", { max_events: 3 })],
          }),
        );
        let last: EnqueueResult | null = null;
        for (const e of events) {
          last = await enqueuePg(p, e, T0);
          enqueueSqlite(sqlite.spool, e, T0);
        }
        const placed = queued(last as EnqueueResult)[0];
        expect(placed.sealed).toBe(true);
        const pg = await row(p, placed.batchId);
        const lite = sqlite.spool.db.query("SELECT state, content_hash FROM batches WHERE id = 1").get() as {
          state: string;
          content_hash: string;
        };
        expect(pg.state).toBe("sealed");
        expect(lite.state).toBe("sealed");
        expect(pg.content_hash).toBe(lite.content_hash);
        // Stored byte for byte: the 64-bit number in the payload is not re-encoded.
        const [e] = await p.sql`SELECT payload FROM events WHERE id = 1`;
        expect(e.payload).toBe(events[0].payload);
        sqlite.spool.close();
      },
    );

    test("max_bytes stays a true bound: a batch that would grow past it is sealed first", async () => {
      const [p] = await fresh();
      const big = (i: number) =>
        ev({
          payload: JSON.stringify({ pad: "x".repeat(400), i }),
          copies: [copy("r", "http:d", { max_bytes: 1000 })],
        });
      const first = queued(await enqueuePg(p, big(1), T0))[0];
      const second = queued(await enqueuePg(p, big(2), T0))[0];
      const third = queued(await enqueuePg(p, big(3), T0))[0];
      expect(second.batchId).toBe(first.batchId);
      expect(third.batchId).not.toBe(first.batchId);
      expect(await row(p, first.batchId)).toMatchObject({ state: "sealed", count: 2 });
    });

    test(
      "dedup: a repeat inside the window is a duplicate, after it is new; a dead batch's repeat replays " + "it",
      async () => {
        const [p] = await fresh();
        const first = queued(await enqueuePg(p, ev({ dedupId: "d1", dedupWindowS: 60 }), T0))[0];
        expect(await enqueuePg(p, ev({ dedupId: "d1", dedupWindowS: 60 }), T0 + 30)).toEqual({
          status: "duplicate",
          eventId: first.eventId,
        });
        const [d] = await p.sql`SELECT dup_count FROM dedup WHERE dedup_id = 'd1'`;
        expect(d.dup_count).toBe(1);
        expect((await enqueuePg(p, ev({ dedupId: "d1", dedupWindowS: 60 }), T0 + 61)).status).toBe("queued");
        await p.sql`UPDATE batches SET state = 'dead', content_hash = 'sha256:x', dead_reason = 'rejected'
          WHERE id = ${first.batchId}`;
        await p.sql`UPDATE dedup SET event_id = ${first.eventId}, seen_at = ${T0 + 61} WHERE dedup_id = 'd1'`;
        expect(await enqueuePg(p, ev({ dedupId: "d1", dedupWindowS: 60 }), T0 + 62)).toEqual({
          status: "replayed",
          eventId: first.eventId,
          batchId: first.batchId,
        });
        expect(await row(p, first.batchId)).toMatchObject({ state: "retry", attempts: 0, next_attempt_at: T0 + 62 });
      },
    );

    test("a group commit: one request that fails is rolled back alone; the rest commit", async () => {
      const [p] = await fresh();
      const out = await enqueueGroupPg(
        p,
        [[ev({ key: "a" })], [ev({ key: "" })], [ev({ key: "b" }), ev({ key: "c" })]],
        T0,
      );
      expect("ok" in out[0] && "ok" in out[2]).toBe(true);
      expect("error" in out[1] && String((out[1] as { error: Error }).error.message)).toContain(
        "the coalesce key is empty",
      );
      const keys = (await p.sql`SELECT key FROM batches ORDER BY key`).map((r: { key: string }) => r.key);
      expect(keys).toEqual(["a", "b", "c"]);
      const [m] = await p.sql`SELECT value FROM meta WHERE key = 'source:s:last_event_at'`;
      expect(Number(m.value)).toBe(T0);
    });

    test(
      "an intake whose clock is behind another's still queues behind it: a new batch's first_at is never before " +
        "its group's unfinished ones",
      async () => {
        const [ahead, behind] = await fresh({ pools: 2 });
        const x = queued(
          await enqueuePg(ahead, ev({ key: "k", copies: [copy("r", "http:d", { max_events: 1 })] }), T0 + 5),
        )[0];
        const y = queued(
          await enqueuePg(behind, ev({ key: "k", copies: [copy("r", "http:d", { max_events: 1 })] }), T0),
        )[0];
        expect((await row(ahead, y.batchId)).first_at).toBe(T0 + 5);
        expect((await candidatesPg(ahead, T0 + 10)).map((c) => c.id)).toEqual([x.batchId]);
        // Once nothing of the group is unfinished, a batch takes its own time again.
        await ahead.sql`UPDATE batches SET state = 'delivered' WHERE key = 'k'`;
        const z = queued(await enqueuePg(behind, ev({ key: "k" }), T0 + 1))[0];
        expect((await row(ahead, z.batchId)).first_at).toBe(T0 + 1);
      },
    );

    test(
      "a request with a NUL in its key fails alone, before any lock; the others in its commit are " + "queued",
      async () => {
        const [p] = await fresh();
        const out = await enqueueGroupPg(
          p,
          [
            [ev({ key: "a" })],
            [ev({ key: "bad\u0000key" })],
            [ev({ key: "b", dedupId: "x\u0000" })],
            [ev({ key: "c" })],
          ],
          T0,
        );
        expect(
          out.map((o) => ("ok" in o ? "ok" : String((o.error as Error).message).includes("NUL") ? "nul" : "other")),
        ).toEqual(["ok", "nul", "nul", "ok"]);
        expect((await p.sql`SELECT key FROM batches ORDER BY key`).map((r: { key: string }) => r.key)).toEqual([
          "a",
          "c",
        ]);
      },
    );

    test(
      "two intakes on one database: concurrent group commits over the same groups and dedup ids never open two " +
        "batches or accept an id twice",
      async () => {
        const [a, b] = await fresh({ pools: 2 });
        const keys = ["k0", "k1", "k2", "k3", "k4"];
        const jobs = (who: string) =>
          Array.from({ length: 20 }, (_, g) =>
            Array.from({ length: 5 }, (_, i) => [
              ev({
                key: keys[(g + i) % keys.length],
                dedupId: `id-${g}-${i}`,
                copies: [copy("r", "http:d", { max_events: 7 }), copy("t", "http:tee", {}, true)],
              }),
            ]),
          ).map((group) => ({ who, group }));
        const all = [...jobs("a"), ...jobs("b")];
        // Both intakes send the same 100 dedup ids: each accepted once, the other copy a duplicate.
        const results = await Promise.all(
          all.map(({ who, group }, i) => enqueueGroupPg(who === "a" ? a : b, group, T0 + i * 0.001)),
        );
        const outcomes = results.flat();
        expect(outcomes.filter((o) => "error" in o)).toEqual([]);
        const statuses = outcomes.map((o) => ("ok" in o ? o.ok[0].status : "error"));
        expect(statuses.filter((s) => s === "queued")).toHaveLength(100);
        expect(statuses.filter((s) => s === "duplicate")).toHaveLength(100);
        const [{ events }] = await a.sql`SELECT COUNT(*)::int AS events FROM events`;
        expect(events).toBe(200); // 100 accepted, each with its tee copy
        const open =
          await a.sql`SELECT route, key, COUNT(*)::int AS n FROM batches WHERE state = 'open' GROUP BY route, key
            HAVING COUNT(*) > 1`;
        expect(open.length).toBe(0);
        const bad =
          await a.sql`SELECT id FROM batches WHERE count > max_events OR (state = 'open' AND count >= max_events)`;
        expect(bad.length).toBe(0);
        const [{ total }] = await a.sql`SELECT SUM(count)::int AS total FROM batches WHERE route = 'r'`;
        expect(total).toBe(100);
      },
    );
  });

  describe("delivery with two dispatchers", () => {
    /** A claim without max_inflight, so never "gated" (as an operator's or SQLite's). */
    const claim = async (
      p: PgSpool,
      c: { id: number; route: string; key: string; destination: string },
      now: number,
      host: string,
    ): Promise<(Claim | null)[]> =>
      (
        await claimPg(p, [
          {
            batchId: c.id,
            route: c.route,
            key: c.key,
            destination: c.destination,
            now,
            leaseUntil: now + 60,
            host,
            pid: 1,
          },
        ])
      ).map((x) => {
        if (x === "gated") throw new Error("an ungated claim was gated");
        return x;
      });
    const ok = { klass: null, status: 200, error: null, durationMs: 3, counted: true };

    test(
      "a tick's ready batches are sealed in a few transactions, not one each, with the hashes SQLite computes, " +
        "while intakes go on joining",
      async () => {
        const [a, b] = await fresh({ pools: 2 });
        const lite = freshSpool();
        const quiet = { quiet_s: 1, max_s: 60 };
        const groups = Array.from({ length: 1200 }, (_, i) =>
          ev({ key: `k${i}`, payload: `{"n":${i}}`, copies: [copy("r", "http:d", quiet)] }),
        );
        await enqueueGroupPg(
          a,
          groups.map((e) => [e]),
          T0,
        );
        for (const e of groups) enqueueSqlite(lite.spool, e, T0);
        // An intake joins some groups while the seal runs: each join is either in the sealed content or in a new batch.
        const late = Array.from({ length: 50 }, (_, i) =>
          ev({ key: `k${i * 7}`, payload: `{"late":${i}}`, copies: [copy("r", "http:d", quiet)] }),
        );
        const [sealed] = await Promise.all([
          sealReadyPg(b, T0 + 2),
          Promise.all(late.map((e) => enqueuePg(a, e, T0 + 2))),
        ]);
        expect(sealed.length).toBeGreaterThan(1100);
        const xids = await a.sql`SELECT COUNT(DISTINCT xid)::int AS n FROM journal WHERE kind = 'sealed'`;
        expect(xids[0].n).toBeLessThanOrEqual(3);
        // Every sealed batch's hash is its content's, as SQLite computes it for the same events.
        const rows = (await a.sql`SELECT id, content_hash FROM batches WHERE state = 'sealed' ORDER BY id`) as {
          id: string;
          content_hash: string;
        }[];
        expect(rows.length).toBe(sealed.length);
        for (const r of rows.slice(0, 50)) {
          const content = (await a.sql`SELECT id, event_type, received_at, dedup_id, payload, headers FROM events
              WHERE batch_id = ${r.id}::bigint AND excluded_at IS NULL ORDER BY id`) as Record<string, unknown>[];
          expect(r.content_hash).toBe(
            contentHash(
              content.map((e) => ({
                id: Number(e.id),
                event_type: String(e.event_type),
                received_at: Number(e.received_at),
                dedup_id: (e.dedup_id as string | null) ?? null,
                payload: e.payload as string,
                headers: String(e.headers),
              })),
            ),
          );
        }
        // Groups no late event touched have the same hash on SQLite, sealed there at the same time.
        sealReadySqlite(lite.spool, T0 + 2);
        const liteHashes = lite.spool.db
          .query("SELECT id, content_hash FROM batches WHERE id > 400 AND id <= 410 ORDER BY id")
          .all();
        const pgHashes = (
          await a.sql`SELECT id, content_hash FROM batches WHERE id > 400 AND id <= 410 ORDER BY id`
        ).map((r: { id: string; content_hash: string }) => ({ id: Number(r.id), content_hash: r.content_hash }));
        expect(pgHashes).toEqual(liteHashes);
        // No event is in an open and a sealed batch at once, and no group has two open batches.
        const twice =
          await a.sql`SELECT route, key FROM batches WHERE state = 'open' GROUP BY route, key HAVING COUNT(*) > 1`;
        expect(twice).toEqual([]);
        expect((await a.sql`SELECT COUNT(*)::int AS n FROM events`)[0].n).toBe(1250);
      },
    );

    test("sealed when ready; only the head of each group is a candidate; a racing pair claims it once", async () => {
      const [a, b] = await fresh({ pools: 2 });
      for (let i = 0; i < 3; i++)
        await enqueuePg(a, ev({ key: "k", copies: [copy("r", "http:d", { max_events: 1 })] }), T0 + i);
      await enqueuePg(a, ev({ key: "other", copies: [copy("r", "http:d", { quiet_s: 5, max_s: 60 })] }), T0);
      expect(await sealReadyPg(a, T0 + 4)).toEqual([]);
      expect(await sealReadyPg(b, T0 + 5)).toEqual([4]);
      const heads = await candidatesPg(a, T0 + 5);
      expect(heads.map((c) => [c.id, c.key])).toEqual([
        [1, "k"],
        [4, "other"],
      ]);
      const [ca, cb] = await Promise.all([claim(a, heads[0], T0 + 5, "a"), claim(b, heads[0], T0 + 5, "b")]);
      expect([ca[0], cb[0]].filter((x) => x !== null)).toHaveLength(1);
      const won = (ca[0] ?? cb[0]) as Claim;
      // While the head is leased its group yields nothing: batch 2 is not a candidate.
      expect((await candidatesPg(b, T0 + 6)).map((c) => c.id)).toEqual([4]);
      // A batch that is not its group's head is refused even when asked for by id.
      expect(await claim(b, { id: 2, route: "r", key: "k", destination: "http:d" }, T0 + 6, "b")).toEqual([null]);
      expect(
        await markDeliveredPg(ca[0] ? a : b, {
          batchId: 1,
          attemptId: won.attemptId,
          owner: won.owner,
          now: T0 + 7,
          attempt: ok,
        }),
      ).toBe(true);
      // Batch 2 heads its group now; batch 4's group is older (first_at T0), so it comes first.
      expect((await candidatesPg(a, T0 + 7)).map((c) => c.id)).toEqual([4, 2]);
      const [j] = await a.sql`SELECT string_agg(kind, ',' ORDER BY id) AS kinds FROM journal WHERE batch_id = 1`;
      expect(j.kinds).toBe("event,sealed,leased,delivered");
    });

    test(
      "a dispatcher's claim checks the gate again under the destination's lock: max_inflight and the one probe " +
        "hold across dispatchers",
      async () => {
        const [a, b] = await fresh({ pools: 2 });
        for (const key of ["k1", "k2", "k3", "k4"])
          await enqueuePg(a, ev({ key, copies: [copy("r", "http:d", { max_events: 1 })] }), T0);
        const cs = await candidatesPg(a, T0 + 1);
        const gated = (p: PgSpool, c: (typeof cs)[number], by: string, o: { probe?: boolean; now?: number } = {}) =>
          claimPg(p, [
            {
              batchId: c.id,
              route: c.route,
              key: c.key,
              destination: c.destination,
              now: o.now ?? T0 + 1,
              leaseUntil: (o.now ?? T0 + 1) + 60,
              host: by,
              pid: 1,
              maxInflight: 2,
              probe: o.probe,
            },
          ]);
        // max_inflight 2: each dispatcher's gate saw 0 in flight, but the third claim is refused whoever makes it.
        const first = (await gated(a, cs[0], "a"))[0] as Claim;
        expect(first).toMatchObject({ n: 1 });
        expect((await gated(b, cs[1], "b"))[0]).toMatchObject({ n: 1 });
        expect(await gated(b, cs[2], "b")).toEqual(["gated"]);
        expect(await gated(a, cs[2], "a")).toEqual(["gated"]);
        // Two claims in one transaction count each other too.
        const both = await claimPg(
          a,
          [cs[2], cs[3]].map((c) => ({
            batchId: c.id,
            route: c.route,
            key: c.key,
            destination: c.destination,
            now: T0 + 1,
            leaseUntil: T0 + 61,
            host: "a",
            pid: 1,
            maxInflight: 3,
          })),
        );
        expect(both.map((c) => (c === "gated" ? c : c?.n))).toEqual([1, "gated"]);
        // An open breaker (another dispatcher's outcome tripped it) claims nothing; half-open, one probe in all.
        await a.sql`INSERT INTO destinations (name, state, opened_at, cooldown_s) VALUES ('http:d', 'open', ${T0}, 10)
          ON CONFLICT (name) DO UPDATE
            SET state = 'open', opened_at = excluded.opened_at, cooldown_s = excluded.cooldown_s`;
        await a.sql`UPDATE batches SET state = 'sealed', lease_owner = NULL, lease_until = NULL WHERE state = 'leased'`;
        expect(await gated(b, cs[3], "b")).toEqual(["gated"]);
        await a.sql`UPDATE destinations SET state = 'half_open' WHERE name = 'http:d'`;
        expect(await gated(b, cs[3], "b")).toEqual(["gated"]);
        expect((await gated(b, cs[3], "b", { probe: true }))[0]).toMatchObject({ n: 1 });
        expect(await gated(a, cs[0], "a", { probe: true })).toEqual(["gated"]);
        // Two dispatchers claiming at the same instant for a destination with max_inflight 1: one wins.
        for (const key of ["e1", "e2"])
          await enqueuePg(a, ev({ key, copies: [copy("r", "http:e", { max_events: 1 })] }), T0);
        const es = (await candidatesPg(a, T0 + 1)).filter((c) => c.destination === "http:e");
        const race = await Promise.all(
          es.map((c, i) =>
            claimPg([a, b][i], [
              {
                batchId: c.id,
                route: c.route,
                key: c.key,
                destination: c.destination,
                now: T0 + 1,
                leaseUntil: T0 + 61,
                host: `h${i}`,
                pid: 1,
                maxInflight: 1,
              },
            ]),
          ),
        );
        expect(race.map(([c]) => (c === "gated" ? c : c === null ? null : "claimed")).sort()).toEqual([
          "claimed",
          "gated",
        ]);
        // A claim that gives no max_inflight (an operator's, a test's) is not gated, as on SQLite.
        expect((await claim(a, cs[0], T0 + 2, "a"))[0]).toMatchObject({ n: 2 });
      },
    );

    test(
      "FIFO per key with two dispatchers draining a backlog together: every batch once, in order per " + "key",
      async () => {
        const [a, b] = await fresh({ pools: 2 });
        const keys = ["k0", "k1", "k2", "k3"];
        for (let i = 0; i < 40; i++)
          await enqueuePg(
            a,
            ev({ key: keys[i % 4], payload: JSON.stringify({ i }), copies: [copy("r", "http:d", { max_events: 1 })] }),
            T0 + i * 0.01,
          );
        const delivered: { id: number; key: string; by: string }[] = [];
        // Each dispatcher claims one head a round, and neither marks its first claim until the other holds one too,
        // so both are seen draining at once. A dispatcher that finds no candidate stops only when all 40 are
        // delivered: an empty list also means the other one holds every key's head for the moment.
        const firstClaim = { a: Promise.withResolvers<void>(), b: Promise.withResolvers<void>() };
        const drain = async (p: PgSpool, by: "a" | "b") => {
          const other = by === "a" ? "b" : "a";
          let claimed = false;
          for (let round = 0; delivered.length < 40; round++) {
            if (round > 10_000) throw new Error(`${by} gave up with ${delivered.length} of 40 delivered`);
            const [c] = await candidatesPg(p, T0 + 10);
            if (!c) {
              await Bun.sleep(1);
              continue;
            }
            const [claim] = await claimPg(p, [
              {
                batchId: c.id,
                route: c.route,
                key: c.key,
                destination: c.destination,
                now: T0 + 10,
                leaseUntil: T0 + 70,
                host: by,
                pid: 1,
              },
            ]);
            if (!claim || claim === "gated") continue;
            if (!claimed) {
              claimed = true;
              firstClaim[by].resolve();
              await firstClaim[other].promise;
            }
            if (
              await markDeliveredPg(p, {
                batchId: c.id,
                attemptId: claim.attemptId,
                owner: claim.owner,
                now: T0 + 10,
                attempt: ok,
              })
            )
              delivered.push({ id: c.id, key: c.key, by });
          }
        };
        await Promise.all([drain(a, "a"), drain(b, "b")]);
        expect(delivered.map((d) => d.id).sort((x, y) => x - y)).toEqual(Array.from({ length: 40 }, (_, i) => i + 1));
        for (const k of keys) {
          const ids = delivered.filter((d) => d.key === k).map((d) => d.id);
          expect(ids).toEqual([...ids].sort((x, y) => x - y));
        }
        expect(new Set(delivered.map((d) => d.by)).size).toBe(2);
      },
    );

    test(
      "a mark by an owner that lost its lease is fenced: the attempt is discarded, the batch " + "untouched",
      async () => {
        const [p] = await fresh();
        await enqueuePg(p, ev({ copies: [copy("r", "http:d", { max_events: 1 })] }), T0);
        const [c] = await claim(p, { id: 1, route: "r", key: "k", destination: "http:d" }, T0, "a");
        if (!c) throw new Error("not claimed");
        expect(await recoverExpiredPg(p, T0 + 59)).toEqual([]);
        expect(await recoverExpiredPg(p, T0 + 61)).toEqual([1]);
        expect(await row(p, 1)).toMatchObject({
          state: "retry",
          lease_owner: null,
          last_error: "lease expired",
          next_attempt_at: T0 + 61,
        });
        expect(
          await markRetryPg(p, {
            batchId: 1,
            attemptId: c.attemptId,
            owner: c.owner,
            now: T0 + 62,
            nextAttemptAt: T0 + 70,
            attempt: { ...ok, status: 503, klass: "transport" },
          }),
        ).toBe(false);
        // As on SQLite: the late mark records its attempt as discarded, and changes nothing else.
        const [a] = await p.sql`SELECT outcome FROM attempts WHERE id = ${c.attemptId}::bigint`;
        expect(a.outcome).toBe("discarded");
        expect(await row(p, 1)).toMatchObject({ state: "retry", next_attempt_at: T0 + 61 });
        // The next claim delivers it, once.
        const [again] = await claim(p, { id: 1, route: "r", key: "k", destination: "http:d" }, T0 + 62, "b");
        expect(again?.n).toBe(2);
        expect(
          await markDeliveredPg(p, {
            batchId: 1,
            attemptId: again!.attemptId,
            owner: again!.owner,
            now: T0 + 63,
            attempt: ok,
          }),
        ).toBe(true);
        expect(
          await markDeliveredPg(p, { batchId: 1, attemptId: c.attemptId, owner: c.owner, now: T0 + 63, attempt: ok }),
        ).toBe(false);
        expect(await row(p, 1)).toMatchObject({ state: "delivered" });
      },
    );

    test(
      "one maintenance holder at a time; when its process is killed (kill -9) the next dispatcher takes " + "over",
      async () => {
        const [b] = await fresh();
        const database = `t${n}`;
        // The holder is a real process: it takes the lock, says so, and waits to be killed.
        const child = Bun.spawn(
          [
            process.execPath,
            join(import.meta.dir, "..", "..", "helpers", "children", "pg-maintenance-holder.ts"),
            server.socket,
            server.user,
            database,
          ],
          { stdout: "pipe", stderr: "pipe" },
        );
        const reader = (child.stdout as ReadableStream<Uint8Array>).getReader();
        let said = "";
        while (!said.includes("held")) {
          const { value, done } = await reader.read();
          if (done) throw new Error(`the holder exited: ${await new Response(child.stderr).text()}`);
          said += new TextDecoder().decode(value);
        }
        const lb = new MaintenanceLock(b, "host-b:2");
        try {
          expect(await lb.tryTake(T0)).toBe(false);
          expect(await maintenanceHolder(b)).toEqual({ holder: "host-a:1", since: T0 });
          child.kill("SIGKILL");
          await child.exited;
          // The server notices the dead session and frees its lock.
          const held = await waitFor("the lock to be free", async () => lb.tryTake(T0 + 1), 15_000);
          expect(held).toBe(true);
          expect(await maintenanceHolder(b)).toEqual({ holder: "host-b:2", since: T0 + 1 });
        } finally {
          await lb.release();
          child.kill("SIGKILL");
        }
      },
    );

    test(
      "the journal as a cursor: a change of a transaction still running holds back later ones, so a reader never " +
        "skips a row that commits late",
      async () => {
        const [a, b] = await fresh({ pools: 2 });
        queued(await enqueuePg(a, ev({ key: "seen" }), T0));
        let cursor = PG_CURSOR_START;
        const read = async () => {
          const r = await journalAfterPg(b, cursor, 100);
          cursor = r.cursor;
          return r.rows.map((x) => x.key);
        };
        expect(await read()).toEqual(["seen"]);
        // A transaction takes its xid first (a write), journals later, and stays open meanwhile.
        let release = () => {};
        const held = new Promise<void>((r) => {
          release = r;
        });
        let wrote = () => {};
        const written = new Promise<void>((r) => {
          wrote = r;
        });
        const slow = a.sql.begin(async (tx) => {
          await tx`INSERT INTO meta (key, value) VALUES ('slow', '1')`;
          wrote();
          await held;
          await tx`INSERT INTO journal (at, kind, batch_id, source, destination, key)
            VALUES (${T0}, 'event', 1, 's', 'http:d', 'late')`;
        });
        await written;
        // A later transaction commits first: its row has the lower id, but it is not given yet.
        queued(await enqueuePg(b, ev({ key: "early" }), T0 + 1));
        expect(await read()).toEqual([]);
        release();
        await slow;
        expect(await read()).toEqual(["late", "early"]);
        expect(await read()).toEqual([]);
      },
    );

    test(
      "wake-ups across hosts: a committed enqueue notifies every listener with when its batch may be delivered; a " +
        "rolled-back one never",
      async () => {
        const [intake, dispatcher] = await fresh({ pools: 2 });
        const got: number[] = [];
        const listening = await listenForWork(dispatcher, (at) => got.push(at));
        try {
          await enqueuePg(intake, ev({ key: "w", copies: [copy("r", "http:d", { quiet_s: 5, max_s: 60 })] }), T0);
          await waitFor("the wake-up", () => got.length === 1);
          expect(got).toEqual([T0 + 5]);
          // Sealed by its bound in the same transaction: deliverable at once.
          await enqueuePg(intake, ev({ key: "s", copies: [copy("r", "http:d", { max_events: 1 })] }), T0 + 1);
          await waitFor("the second wake-up", () => got.length === 2);
          expect(got[1]).toBe(T0 + 1);
          // A transaction that rolls back wakes nobody.
          await intake.sql
            .begin(async (tx) => {
              await notifyWork(tx, T0 + 2);
              throw new Error("rolled back");
            })
            .catch(() => {});
          await enqueuePg(intake, ev({ key: "z", copies: [copy("r", "http:d", { max_events: 1 })] }), T0 + 3);
          await waitFor("the third wake-up", () => got.length === 3);
          expect(got[2]).toBe(T0 + 3);
        } finally {
          await listening.stop();
        }
      },
    );

    test(
      "heartbeats: one row per dispatcher by the database's clock, a stale one not alive; now_eff never behind " +
        "the latest tick",
      async () => {
        const [p] = await fresh();
        const now = await p.now();
        await writeHeartbeatPg(p, "host-a:1", now);
        await writeHeartbeatPg(p, "host-b:2", now, '{"tick":1}');
        await p.sql`UPDATE dispatchers SET heartbeat_at = heartbeat_at - 120 WHERE id = 'host-b:2'`;
        const beats = await dispatchersPg(p, HEARTBEAT_STALE_S);
        expect(beats.map((b) => [b.id, b.alive])).toEqual([
          ["host-a:1", true],
          ["host-b:2", false],
        ]);
        // A dispatcher whose clock ran ahead recorded a later tick: the spool's time does not go back.
        await writeHeartbeatPg(p, "host-c:3", now + 3600);
        await writeHeartbeatPg(p, "host-a:1", now + 1);
        expect(await effectiveNowPg(p)).toBeGreaterThanOrEqual(now + 3600);
        await forgetDispatcherPg(p, "host-c:3");
        expect((await dispatchersPg(p, HEARTBEAT_STALE_S)).map((b) => b.id)).toEqual(["host-a:1", "host-b:2"]);
      },
    );

    test("the wall clock guard reads the database's clock", async () => {
      const [p] = await fresh();
      const t = await p.now();
      expect(Math.abs(t - Date.now() / 1000)).toBeLessThan(5);
    });
  });
});
