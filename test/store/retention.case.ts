// Retention: exactly the rows past their retention age, in small transactions, never a dead batch.
import { describe, expect, test } from "bun:test";
import type { Database } from "bun:sqlite";
import { statSync } from "node:fs";
import { join } from "node:path";
import { claimBatch } from "../../src/store/queue.ts";
import { markDead, markDelivered, markRetry, type AttemptRecord } from "../../src/store/marks.ts";
import { openSpool, quickCheck, type Spool } from "../../src/store/db.ts";
import { enqueue, quarantine } from "../../src/store/enqueue.ts";
import { dropBatches } from "../../src/store/drop.ts";
import { splitBatch } from "../../src/store/split.ts";
import { DEFAULT_DEDUP_WINDOW_S, policyFromConfig, type RetentionPolicy, runRetention } from "../../src/store/retention.ts";
import { sealBatchTx } from "../../src/store/batches.ts";
import { ev, T0 } from "../helpers/spool.ts";
import type { TestSpool } from "../helpers/spool.ts";
import type { OpenSpool } from "./suite.ts";

/** The retention cases, on whatever store fresh() opens. */
export function retentionCases(fresh: OpenSpool): void {
  type TS = TestSpool;
  const DAY = 86400;
  const NOW = T0 + 400 * DAY;

  const ok: AttemptRecord = { klass: null, status: 200, error: null, durationMs: 3, counted: true };
  const transport: AttemptRecord = { klass: "transport", status: 502, error: "bad gateway", durationMs: 3, counted: false };

  /** Defaults except dropped_days (3, so it cannot pass for delivered_days) and two dedup windows. */
  const policy = policyFromConfig({
    retention: { delivered_days: 7, attempts_days: 30, dropped_days: 3, issues_days: 90 },
    sources: { fast: { dedup_window_s: 600 }, slow: { dedup_window_s: 2 * DAY } },
    bobbins: { gmail: { dedup_window_s: 3600 } },
  });

  let keys = 0;

  /** An open batch of `n` events in a group of its own, received at `at`. */
  function openAt(t: TS, at: number, n = 2, source = "s"): { id: number; events: number[] } {
    const key = `k${++keys}`;
    const events: number[] = [];
    let id = 0;
    for (let i = 0; i < n; i++) {
      const r = enqueue(t.spool, ev({ source, key }), at);
      if (r.status !== "queued") throw new Error(r.status);
      id = r.placed[0].batchId;
      events.push(r.placed[0].eventId);
    }
    return { id, events };
  }

  function sealedAt(t: TS, at: number, n = 2): { id: number; events: number[] } {
    const b = openAt(t, at, n);
    t.spool.db.transaction(() => sealBatchTx(t.spool.db, b.id, at)).immediate();
    return b;
  }

  function claimAt(t: TS, id: number, at: number) {
    const c = claimBatch(t.spool, { batchId: id, destination: "http:d", now: at, leaseUntil: at + 90, host: "h", pid: 1 });
    if (!c) throw new Error(`claim ${id}`);
    return c;
  }

  function deliveredAt(t: TS, at: number, n = 2): { id: number; events: number[] } {
    const b = sealedAt(t, at - 10, n);
    const c = claimAt(t, b.id, at);
    markDelivered(t.spool, { batchId: b.id, attemptId: c.attemptId, owner: c.owner, now: at, attempt: ok });
    return b;
  }

  function deadAt(t: TS, at: number): { id: number; events: number[] } {
    const b = sealedAt(t, at - 10);
    const c = claimAt(t, b.id, at);
    markDead(t.spool, { batchId: b.id, attemptId: c.attemptId, owner: c.owner, now: at, attempt: { ...ok, klass: "permanent", status: 422 } });
    return b;
  }

  /** A failed attempt started and finished at `at`; the batch goes back to retry. */
  function failedAttemptAt(t: TS, id: number, at: number): number {
    const c = claimAt(t, id, at);
    markRetry(t.spool, { batchId: id, attemptId: c.attemptId, owner: c.owner, now: at, nextAttemptAt: at + 60, attempt: transport });
    return c.attemptId;
  }

  function ids(db: Database, sql: string): number[] {
    return (db.query(sql).all() as { id: number }[]).map((r) => r.id);
  }

  function insertIssue(db: Database, state: string, lastAt: number): number {
    return Number(
      db
        .query("INSERT INTO issues (fingerprint, kind, state, first_at, last_at) VALUES (?, 'delivery', ?, ?, ?)")
        .run(`fp${++keys}`, state, lastAt - DAY, lastAt).lastInsertRowid,
    );
  }

  function insertDedup(db: Database, source: string, seenAt: number): string {
    const id = `d${++keys}`;
    db.query("INSERT INTO dedup (source, dedup_id, event_id, seen_at) VALUES (?, ?, 999999, ?)").run(source, id, seenAt);
    return id;
  }

  describe("what a pass deletes", () => {
    test("exactly the rows past their retention age, at every boundary", async () => {
      const t = fresh();
      const db = t.spool.db;
      const gone = { batches: [] as number[], events: [] as number[], attempts: [] as number[], dedup: [] as string[], issues: [] as number[] };

      // delivered: 7 days after delivered_at, with events (attempts stay: they have their own age)
      const deliveredOld = deliveredAt(t, NOW - 8 * DAY);
      gone.batches.push(deliveredOld.id);
      gone.events.push(...deliveredOld.events);
      const deliveredNew = deliveredAt(t, NOW - 6 * DAY);
      const deliveredAtCutoff = deliveredAt(t, NOW - 7 * DAY);

      // dropped: 3 days here, counted from the drop (delivered_at), not from the events
      const droppedOld = sealedAt(t, NOW - 300 * DAY);
      dropBatches(t.spool, [droppedOld.id], NOW - 4 * DAY);
      gone.batches.push(droppedOld.id);
      gone.events.push(...droppedOld.events);
      const droppedNew = sealedAt(t, NOW - 300 * DAY);
      dropBatches(t.spool, [droppedNew.id], NOW - 2 * DAY);

      // a split original is dropped with no events left; its pieces keep theirs
      const original = sealedAt(t, NOW - 10 * DAY, 3);
      const pieces = splitBatch(t.spool, original.id, { maxEvents: 1 }, NOW - 5 * DAY);
      expect(pieces).toHaveLength(3);
      gone.batches.push(original.id);

      // dead: never, however old; quarantine batches are dead too; a reclassified one is delivered
      const deadAncient = deadAt(t, NOW - 365 * DAY);
      const q = quarantine(t.spool, { source: "gh", raw: new TextEncoder().encode("{}"), headers: {}, authHeaders: [], url: null, reason: "plugin_error:TypeError" }, NOW - 365 * DAY);

      // unfinished batches: never, however old
      const openOld = openAt(t, NOW - 365 * DAY);
      const sealedOld = sealedAt(t, NOW - 365 * DAY);
      const leasedOld = sealedAt(t, NOW - 365 * DAY);
      const runningAttempt = claimAt(t, leasedOld.id, NOW - 40 * DAY).attemptId; // never finished: kept
      const retryOld = sealedAt(t, NOW - 365 * DAY);

      // attempts: 30 days by started_at, finished ones only
      const attemptOld = failedAttemptAt(t, retryOld.id, NOW - 31 * DAY);
      const attemptNew = failedAttemptAt(t, retryOld.id, NOW - 29 * DAY);
      gone.attempts.push(attemptOld);
      const allAttempts = ids(db, "SELECT id FROM attempts ORDER BY id");
      // deadAncient's attempt is a year old: attempts age out whatever their batch's state
      const deadAttempt = ids(db, `SELECT id FROM attempts WHERE batch_id = ${deadAncient.id}`);
      gone.attempts.push(...deadAttempt);

      // dedup: each source's window; a source no longer configured gets the default
      const windows: [string, number][] = [["fast", 600], ["slow", 2 * DAY], ["gone", DEFAULT_DEDUP_WINDOW_S], ["gmail", 3600]];
      const keptDedup: string[] = [];
      for (const [source, w] of windows) {
        gone.dedup.push(insertDedup(db, source, NOW - w - 1));
        keptDedup.push(insertDedup(db, source, NOW - w), insertDedup(db, source, NOW - w + 1));
      }
      // a row another source's window would delete: "fast" rows 1 hour old go, "slow" ones stay
      gone.dedup.push(insertDedup(db, "fast", NOW - 3600));
      keptDedup.push(insertDedup(db, "slow", NOW - 3600));

      // issues: resolved and ignored after 90 days of quiet; open and acked never
      const keptIssues = ids(db, "SELECT id FROM issues ORDER BY id"); // quarantine's config:plugin:gh, open
      gone.issues.push(insertIssue(db, "resolved", NOW - 91 * DAY), insertIssue(db, "ignored", NOW - 91 * DAY));
      keptIssues.push(
        insertIssue(db, "resolved", NOW - 89 * DAY),
        insertIssue(db, "ignored", NOW - 89 * DAY),
        insertIssue(db, "open", NOW - 400 * DAY),
        insertIssue(db, "acked", NOW - 400 * DAY),
      );

      const batchesBefore = ids(db, "SELECT id FROM batches ORDER BY id");
      const eventsBefore = ids(db, "SELECT id FROM events ORDER BY id");
      const counts = await runRetention(t.spool, policy, NOW);

      expect(counts).toEqual({
        batches: gone.batches.length,
        events: gone.events.length,
        attempts: gone.attempts.length,
        dedup: gone.dedup.length,
        issues: gone.issues.length,
      });
      expect(ids(db, "SELECT id FROM batches ORDER BY id")).toEqual(batchesBefore.filter((id) => !gone.batches.includes(id)));
      expect(ids(db, "SELECT id FROM events ORDER BY id")).toEqual(eventsBefore.filter((id) => !gone.events.includes(id)));
      expect(ids(db, "SELECT id FROM attempts ORDER BY id")).toEqual(allAttempts.filter((id) => !gone.attempts.includes(id)));
      expect((db.query("SELECT dedup_id FROM dedup ORDER BY dedup_id").all() as { dedup_id: string }[]).map((r) => r.dedup_id)).toEqual([...keptDedup].sort());
      expect(ids(db, "SELECT id FROM issues ORDER BY id")).toEqual(keptIssues);

      // spelled out, for the reader: what stays
      const state = (id: number) => (db.query("SELECT state FROM batches WHERE id = ?").get(id) as { state: string } | null)?.state;
      const eventsOf = (id: number) => ids(db, `SELECT id FROM events WHERE batch_id = ${id} ORDER BY id`);
      expect(state(deadAncient.id)).toBe("dead");
      expect(eventsOf(deadAncient.id)).toEqual(deadAncient.events);
      expect(state(q.batchId)).toBe("dead");
      expect(eventsOf(q.batchId)).toEqual([q.eventId]);
      for (const b of [deliveredNew, deliveredAtCutoff, droppedNew, openOld, sealedOld, leasedOld, retryOld]) expect(eventsOf(b.id)).toEqual(b.events);
      expect(pieces.map((p) => eventsOf(p).length)).toEqual([1, 1, 1]);
      expect(ids(db, "SELECT id FROM attempts")).toContain(runningAttempt);
      expect(ids(db, "SELECT id FROM attempts")).toContain(attemptNew);
      // the deleted delivered batch's attempt outlives it (no foreign key)
      expect(ids(db, `SELECT id FROM attempts WHERE batch_id = ${deliveredOld.id}`)).toHaveLength(1);
      expect(db.query("PRAGMA foreign_key_check").all()).toEqual([]);

      // a second pass at the same time finds nothing
      expect(await runRetention(t.spool, policy, NOW)).toEqual({ batches: 0, events: 0, attempts: 0, dedup: 0, issues: 0 });
    });

    test("a dead batch is kept after years; a reclassified quarantine batch goes as delivered", async () => {
      const t = fresh();
      const dead = deadAt(t, T0);
      const q = quarantine(t.spool, { source: "gh", raw: new TextEncoder().encode('{"a":1}'), headers: {}, authHeaders: [], url: null, reason: "plugin_error:TypeError" }, T0);
      const kept = quarantine(t.spool, { source: "gh", raw: new TextEncoder().encode('{"a":2}'), headers: {}, authHeaders: [], url: null, reason: "plugin_error:TypeError" }, T0);
      t.spool.db.run("UPDATE batches SET state = 'delivered', delivered_at = ?, result = 'reclassified' WHERE id = ?", [T0 + DAY, q.batchId]);
      const counts = await runRetention(t.spool, policy, T0 + 5 * 365 * DAY);
      expect(counts.batches).toBe(1);
      expect(ids(t.spool.db, "SELECT id FROM batches ORDER BY id")).toEqual([dead.id, kept.batchId]);
      expect(ids(t.spool.db, "SELECT id FROM events ORDER BY id")).toEqual([...dead.events, kept.eventId]);
    });

    test("a deleted dedup row reopens the id: the same id enqueues again", async () => {
      const t = fresh();
      const first = enqueue(t.spool, ev({ source: "fast", key: "a", dedupId: "x", dedupWindowS: 600 }), T0);
      expect(first.status).toBe("queued");
      await runRetention(t.spool, policy, T0 + 601);
      expect(t.spool.db.query("SELECT COUNT(*) AS n FROM dedup").get()).toEqual({ n: 0 });
      expect(enqueue(t.spool, ev({ source: "fast", key: "a", dedupId: "x", dedupWindowS: 600 }), T0 + 602).status).toBe("queued");
    });
  });

  /** A view of the spool whose db records every transaction: rows changed and the loop turn it ran in. */
  function recording(spool: Spool, turn: () => number): { spool: Spool; txs: { rows: number; turn: number }[] } {
    const txs: { rows: number; turn: number }[] = [];
    const db = spool.db;
    const changes = () => (db.query("SELECT total_changes() AS n").get() as { n: number }).n;
    const wrapped = new Proxy(db, {
      get(target, prop) {
        if (prop === "transaction") {
          return (fn: (...a: unknown[]) => unknown) =>
            target.transaction((...a: unknown[]) => {
              const before = changes();
              const r = fn(...a);
              txs.push({ rows: changes() - before, turn: turn() });
              return r;
            });
        }
        const v = Reflect.get(target, prop, target);
        return typeof v === "function" ? v.bind(target) : v;
      },
    });
    return { spool: { ...spool, db: wrapped }, txs };
  }

  describe("small transactions (1,000 rows at most, yielding between)", () => {
    test("2,500+ deletable rows: no transaction over batchSize, the loop turns between them, the WAL is truncated", async () => {
      const t = fresh();
      const db = t.spool.db;
      const old = NOW - 100 * DAY;
      db.transaction(() => {
        const batch = db.query(`INSERT INTO batches (route, source, destination, key, state, first_at, last_at, quiet_s, max_s, max_events, max_bytes,
            count, bytes, sealed_at, content_hash, delivered_at)
          VALUES ('r', 's', 'http:d', ?, ?, ?, ?, 0, 0, 5000, 1000000, ?, ?, ?, 'sha256:x', ?)`);
        const event = db.query("INSERT INTO events (source, route, batch_id, received_at, payload, size) VALUES ('s', 'r', ?, ?, '{}', 2)");
        const add = (state: string, n: number) => {
          const id = Number(batch.run(`k${++keys}`, state, old, old, n, 2 * n, old, old).lastInsertRowid);
          for (let i = 0; i < n; i++) event.run(id, old);
        };
        for (let i = 0; i < 300; i++) add("delivered", 4); // 1,500 rows
        add("delivered", 2300); // one batch bigger than a transaction: 2,301 rows
        for (let i = 0; i < 100; i++) add("dropped", 2); // 300 rows
        for (let i = 0; i < 20; i++) add("dead", 3); // kept
        const attempt = db.query("INSERT INTO attempts (batch_id, n, destination, started_at, finished_at, outcome) VALUES (1, 1, 'http:d', ?, ?, 'retry')");
        for (let i = 0; i < 1200; i++) attempt.run(old, old);
        const dedup = db.query("INSERT INTO dedup (source, dedup_id, event_id, seen_at) VALUES ('s', ?, 1, ?)");
        for (let i = 0; i < 1200; i++) dedup.run(`id${i}`, old);
      }).immediate();

      let turns = 0;
      let spinning = true;
      const spin = () => {
        turns++;
        if (spinning) setImmediate(spin);
      };
      setImmediate(spin);
      const r = recording(t.spool, () => turns);
      const counts = await runRetention(r.spool, policy, NOW, { batchSize: 1000 });
      spinning = false;

      expect(counts).toEqual({ batches: 401, events: 1200 + 2300 + 200, attempts: 1200, dedup: 1200, issues: 0 });
      const busy = r.txs.filter((x) => x.rows > 0);
      expect(busy.length).toBeGreaterThanOrEqual(8);
      expect(Math.max(...r.txs.map((x) => x.rows))).toBeLessThanOrEqual(1000);
      // after every transaction that deleted something, the event loop ran before the next one
      r.txs.forEach((x, i) => {
        if (x.rows > 0 && i + 1 < r.txs.length) expect(r.txs[i + 1].turn).toBeGreaterThan(x.turn);
      });
      expect(db.query("SELECT COUNT(*) AS n FROM batches WHERE state = 'dead'").get()).toEqual({ n: 20 });
      expect(db.query("SELECT COUNT(*) AS n FROM events").get()).toEqual({ n: 60 });
      expect(statSync(`${t.path}-wal`).size).toBe(0);
      // the checkpoint waits less than the connection would; the connection's timeout is restored
      expect(db.query("PRAGMA busy_timeout").get()).toEqual({ timeout: 30000 });
    });

    test("batchSize 1 still finishes, one row per transaction", async () => {
      const t = fresh();
      const b = deliveredAt(t, NOW - 10 * DAY, 3);
      // The batch's journal rows (its events, seal, lease, delivery) go in the same pass.
      const journal = (t.spool.db.query("SELECT COUNT(*) AS n FROM journal WHERE batch_id = ?").get(b.id) as { n: number }).n;
      expect(journal).toBeGreaterThan(0);
      const r = recording(t.spool, () => 0);
      const counts = await runRetention(r.spool, { ...policy, attemptsDays: 1000 } satisfies RetentionPolicy, NOW, { batchSize: 1 });
      expect(counts).toMatchObject({ batches: 1, events: 3 });
      expect(r.txs.filter((x) => x.rows > 0).map((x) => x.rows)).toEqual(Array(4 + journal).fill(1));
      expect(t.spool.db.query("SELECT COUNT(*) AS n FROM journal WHERE batch_id = ?").get(b.id)).toEqual({ n: 0 });
      expect(t.spool.db.query("SELECT COUNT(*) AS n FROM events WHERE batch_id = ?").get(b.id)).toEqual({ n: 0 });
    });
  });

  const child = join(import.meta.dir, "..", "helpers", "children", "retention-once.ts");

  async function runChild(dbPath: string, now: number, batchSize: number, hook?: string) {
    const p = Bun.spawn([process.execPath, child, dbPath, String(now), String(batchSize)], {
      env: { ...process.env, HOOKSPOOL_TEST_HOOK: hook ?? "" },
      stdout: "pipe",
      stderr: "pipe",
    });
    const out = await new Response(p.stdout).text();
    await p.exited;
    return { exitCode: p.exitCode, signal: typeof p.signalCode === "string" ? p.signalCode : null, out };
  }

  /** Everything the crash test compares across runs, and the consistency checks. */
  function look(dbPath: string) {
    const s = openSpool(dbPath);
    try {
      const db: Database = s.db;
      const all = (sql: string) => db.query(sql).all();
      return {
        quickCheck: quickCheck(s),
        foreignKeys: all("PRAGMA foreign_key_check"),
        orphans: all("SELECT e.id FROM events e LEFT JOIN batches b ON b.id = e.batch_id WHERE b.id IS NULL"),
        // a batch that lost some events but not all would be a torn delete
        torn: all("SELECT b.id FROM batches b WHERE b.count <> (SELECT COUNT(*) FROM events e WHERE e.batch_id = b.id)"),
        batches: all("SELECT id, state FROM batches ORDER BY id") as { id: number; state: string }[],
        dead: all("SELECT b.id, COUNT(e.id) AS events FROM batches b LEFT JOIN events e ON e.batch_id = b.id WHERE b.state = 'dead' GROUP BY b.id ORDER BY b.id"),
        events: (all("SELECT COUNT(*) AS n FROM events") as { n: number }[])[0].n,
      };
    } finally {
      s.close();
    }
  }

  describe("crash safety", () => {
    test("killed at retention.before_commit: the open transaction rolls back, committed ones stay, dead batches untouched", async () => {
      const t = fresh();
      const db = t.spool.db;
      // 30 delivered batches of 2 events: 15 delivered at T0, 15 ten days later
      for (let i = 0; i < 30; i++) {
        const at = i < 15 ? T0 : T0 + 10 * DAY;
        let batchId = 0;
        for (let n = 0; n < 2; n++) {
          const r = enqueue(t.spool, ev({ key: `k${i}` }), at);
          if (r.status !== "queued") throw new Error(r.status);
          batchId = r.placed[0].batchId;
        }
        db.run("UPDATE batches SET state = 'delivered', sealed_at = ?, content_hash = 'sha256:x', delivered_at = ? WHERE id = ?", [at, at, batchId]);
      }
      // dead batches a year older than everything, and a quarantined request
      for (let i = 0; i < 5; i++) {
        const r = enqueue(t.spool, ev({ key: `dead${i}` }), T0 - 365 * DAY);
        if (r.status !== "queued") throw new Error(r.status);
        db.run("UPDATE batches SET state = 'dead', sealed_at = ?, content_hash = 'sha256:x' WHERE id = ?", [T0 - 365 * DAY, r.placed[0].batchId]);
      }
      quarantine(t.spool, { source: "gh", raw: new TextEncoder().encode("{}"), headers: {}, authHeaders: [], url: null, reason: "plugin_error:TypeError" }, T0 - 365 * DAY);
      t.spool.close();
      const start = look(t.path);
      expect(start.dead).toHaveLength(6);

      // a clean pass that deletes the first 15 batches, 3 per transaction (batchSize 10: 3 x (2 + 1) rows)
      const first = await runChild(t.path, T0 + 8 * DAY, 10);
      expect(first.exitCode).toBe(0);
      expect(JSON.parse(first.out)).toMatchObject({ batches: 15, events: 30 });
      const afterFirst = look(t.path);
      expect(afterFirst.batches).toHaveLength(start.batches.length - 15);

      // killed inside the first transaction of the next pass: it rolls back whole
      const killed = await runChild(t.path, T0 + 20 * DAY, 10, "retention.before_commit");
      expect(killed.signal).toBe("SIGKILL");
      const afterKill = look(t.path);
      expect(afterKill.quickCheck).toEqual([]);
      expect(afterKill.foreignKeys).toEqual([]);
      expect(afterKill.orphans).toEqual([]);
      expect(afterKill.torn).toEqual([]);
      expect(afterKill).toEqual(afterFirst);

      // the next pass finishes the job and still leaves every dead batch with its events
      const last = await runChild(t.path, T0 + 20 * DAY, 10);
      expect(last.exitCode).toBe(0);
      expect(JSON.parse(last.out)).toMatchObject({ batches: 15, events: 30 });
      const end = look(t.path);
      expect(end.quickCheck).toEqual([]);
      expect(end.orphans).toEqual([]);
      expect(end.batches.map((b) => b.state)).toEqual(Array(6).fill("dead"));
      expect(end.dead).toEqual(start.dead);
    });
  });
}
