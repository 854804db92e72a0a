// Retention: exactly the rows past their retention age, never a dead batch, as maintenance runs
// it (MaintenanceStore.runRetention); the rows it judges come the services' way (the intake's
// enqueue and quarantine, the dispatcher's claims and recorded outcomes, the operator's drop and
// split). That a pass goes in small transactions, yielding between them, is each dialect's own
// loop: retention-chunks.ts, run by retention-chunks.test.ts and pg/retention-chunks.test.ts.
import { describe, expect, test } from "bun:test";
import type { Database } from "bun:sqlite";
import { join } from "node:path";
import { openSpool, quickCheck } from "../../src/store/sqlite/db.ts";
import type { NewEvent, QuarantineInput } from "../../src/store/enqueue.ts";
import { DEFAULT_DEDUP_WINDOW_S, policyFromConfig } from "../../src/store/retention.ts";
import { claimOne, end } from "../helpers/attempts.ts";
import { copy, ev, T0, WIDE } from "../helpers/spool.ts";
import type { StoreUnderTest, Where } from "../helpers/store-under-test.ts";
import type { Suite } from "./suite.ts";

export const DAY = 86400;
export const NOW = T0 + 400 * DAY;

/** Defaults except dropped_days (3, so it cannot pass for delivered_days) and two dedup windows. */
export const RETENTION_POLICY = policyFromConfig({
  retention: { delivered_days: 7, attempts_days: 30, dropped_days: 3, issues_days: 90 },
  sources: { fast: { dedup_window_s: 600 }, slow: { dedup_window_s: 2 * DAY } },
  bobbins: { gmail: { dedup_window_s: 3600 } },
});

/** A batch of `n` events in group `key`, received at `at` (through the intake), with route r's window. */
export async function batchIn(
  s: StoreUnderTest,
  key: string,
  at: number,
  n: number,
  window = WIDE,
  source = "s",
): Promise<{ id: number; events: number[] }> {
  const events: number[] = [];
  let id = 0;
  for (let i = 0; i < n; i++) {
    const [r] = await s.intake.enqueueAll([ev({ source, key, copies: [copy("r", "http:d", window)] })], at);
    if (r.status !== "queued") throw new Error(r.status);
    id = r.placed[0].batchId;
    events.push(r.placed[0].eventId);
  }
  return { id, events };
}

/** Claim batch `id` at `at`, as the dispatcher does. */
export async function claimIn(s: StoreUnderTest, id: number, at: number) {
  const c = await claimOne(s, { batchId: id, destination: "http:d", now: at, leaseUntil: at + 90, host: "h", pid: 1 });
  if (!c) throw new Error(`claim ${id}`);
  return c;
}

/** A batch of `n` events in group `key`, sealed at `at - 10` by its max_events, claimed and delivered at `at`. */
export async function deliveredIn(
  s: StoreUnderTest,
  key: string,
  at: number,
  n = 2,
): Promise<{ id: number; events: number[] }> {
  const b = await batchIn(s, key, at - 10, n, { ...WIDE, max_events: n });
  const c = await claimIn(s, b.id, at);
  await end(s, { batchId: b.id, attemptId: c.attemptId, owner: c.owner, now: at, ending: { kind: "delivered" } });
  return b;
}

/** The retention cases, on whatever store fresh() opens. */
export function retentionCases({ fresh, caps }: Suite): void {
  type S = StoreUnderTest;
  const policy = RETENTION_POLICY;

  let keys = 0;

  /** A batch of `n` events in a group of its own, received at `at` (through the intake), with route r's window. */
  const batchAt = (s: S, at: number, n: number, window = WIDE, source = "s") =>
    batchIn(s, `k${++keys}`, at, n, window, source);

  /** An open batch of `n` events, received at `at`. */
  const openAt = (s: S, at: number, n = 2) => batchAt(s, at, n);

  /** A batch of `n` events sealed at `at`: its max_events reached by the last, as the join rule seals. */
  const sealedAt = (s: S, at: number, n = 2) => batchAt(s, at, n, { ...WIDE, max_events: n });

  /** One request of one event, through the intake, at `at`. */
  const enqueue = async (s: S, e: NewEvent, at: number) => (await s.intake.enqueueAll([e], at))[0];

  /** A request quarantined at `at`. */
  const quarantineAt = (s: S, q: QuarantineInput, at: number) => s.intake.quarantine(q, at);

  const claimAt = claimIn;
  const deliveredAt = (s: S, at: number, n = 2) => deliveredIn(s, `k${++keys}`, at, n);

  async function deadAt(s: S, at: number): Promise<{ id: number; events: number[] }> {
    const b = await sealedAt(s, at - 10);
    const c = await claimAt(s, b.id, at);
    await end(s, {
      batchId: b.id,
      attemptId: c.attemptId,
      owner: c.owner,
      now: at,
      ending: { kind: "dead", status: 422 },
    });
    return b;
  }

  /** A failed attempt started and finished at `at`; the batch goes back to retry. */
  async function failedAttemptAt(s: S, id: number, at: number): Promise<number> {
    const c = await claimAt(s, id, at);
    await end(s, {
      batchId: id,
      attemptId: c.attemptId,
      owner: c.owner,
      now: at,
      ending: { kind: "retry", nextAttemptAt: at + 60 },
    });
    return c.attemptId;
  }

  /** The ids of a table's rows (matching `where`), in id order. */
  async function ids(s: S, table: string, where?: Where): Promise<number[]> {
    return (await s.rows<{ id: number }>(table, { cols: ["id"], where, order: "id" })).map((r) => r.id);
  }

  async function insertIssue(s: S, state: string, lastAt: number): Promise<number> {
    const [id] = await s.insert("issues", [
      { fingerprint: `fp${++keys}`, kind: "delivery", state, first_at: lastAt - DAY, last_at: lastAt },
    ]);
    return id;
  }

  async function insertDedup(s: S, source: string, seenAt: number): Promise<string> {
    const id = `d${++keys}`;
    await s.insert("dedup", [{ source, dedup_id: id, event_id: 999999, seen_at: seenAt }]);
    return id;
  }

  describe("what a pass deletes", () => {
    test("exactly the rows past their retention age, at every boundary", async () => {
      const s = await fresh();
      const gone = {
        batches: [] as number[],
        events: [] as number[],
        attempts: [] as number[],
        dedup: [] as string[],
        issues: [] as number[],
      };

      // delivered: 7 days after delivered_at, with events (attempts stay: they have their own age)
      const deliveredOld = await deliveredAt(s, NOW - 8 * DAY);
      gone.batches.push(deliveredOld.id);
      gone.events.push(...deliveredOld.events);
      const deliveredNew = await deliveredAt(s, NOW - 6 * DAY);
      const deliveredAtCutoff = await deliveredAt(s, NOW - 7 * DAY);

      // dropped: 3 days here, counted from the drop (delivered_at), not from the events
      const droppedOld = await sealedAt(s, NOW - 300 * DAY);
      await s.operator.dropBatches([droppedOld.id], NOW - 4 * DAY);
      gone.batches.push(droppedOld.id);
      gone.events.push(...droppedOld.events);
      const droppedNew = await sealedAt(s, NOW - 300 * DAY);
      await s.operator.dropBatches([droppedNew.id], NOW - 2 * DAY);

      // a split original is dropped with no events left; its pieces keep theirs
      const original = await sealedAt(s, NOW - 10 * DAY, 3);
      const pieces = await s.operator.splitBatch(original.id, { maxEvents: 1 }, NOW - 5 * DAY);
      expect(pieces).toHaveLength(3);
      gone.batches.push(original.id);

      // dead: never, however old; quarantine batches are dead too; a reclassified one is delivered
      const deadAncient = await deadAt(s, NOW - 365 * DAY);
      const q = await quarantineAt(
        s,
        {
          source: "gh",
          raw: new TextEncoder().encode("{}"),
          headers: {},
          authHeaders: [],
          url: null,
          reason: "plugin_error:TypeError",
        },
        NOW - 365 * DAY,
      );

      // unfinished batches: never, however old
      const openOld = await openAt(s, NOW - 365 * DAY);
      const sealedOld = await sealedAt(s, NOW - 365 * DAY);
      const leasedOld = await sealedAt(s, NOW - 365 * DAY);
      const runningAttempt = (await claimAt(s, leasedOld.id, NOW - 40 * DAY)).attemptId; // never finished: kept
      const retryOld = await sealedAt(s, NOW - 365 * DAY);

      // attempts: 30 days by started_at, finished ones only
      const attemptOld = await failedAttemptAt(s, retryOld.id, NOW - 31 * DAY);
      const attemptNew = await failedAttemptAt(s, retryOld.id, NOW - 29 * DAY);
      gone.attempts.push(attemptOld);
      const allAttempts = await ids(s, "attempts");
      // deadAncient's attempt is a year old: attempts age out whatever their batch's state
      const deadAttempt = await ids(s, "attempts", { batch_id: deadAncient.id });
      gone.attempts.push(...deadAttempt);

      // dedup: each source's window; a source no longer configured gets the default
      const windows: [string, number][] = [
        ["fast", 600],
        ["slow", 2 * DAY],
        ["gone", DEFAULT_DEDUP_WINDOW_S],
        ["gmail", 3600],
      ];
      const keptDedup: string[] = [];
      for (const [source, w] of windows) {
        gone.dedup.push(await insertDedup(s, source, NOW - w - 1));
        keptDedup.push(await insertDedup(s, source, NOW - w), await insertDedup(s, source, NOW - w + 1));
      }
      // a row another source's window would delete: "fast" rows 1 hour old go, "slow" ones stay
      gone.dedup.push(await insertDedup(s, "fast", NOW - 3600));
      keptDedup.push(await insertDedup(s, "slow", NOW - 3600));

      // issues: resolved and ignored after 90 days of quiet; open and acked never
      const keptIssues = await ids(s, "issues"); // quarantine's config:plugin:gh, open
      gone.issues.push(
        await insertIssue(s, "resolved", NOW - 91 * DAY),
        await insertIssue(s, "ignored", NOW - 91 * DAY),
      );
      keptIssues.push(
        await insertIssue(s, "resolved", NOW - 89 * DAY),
        await insertIssue(s, "ignored", NOW - 89 * DAY),
        await insertIssue(s, "open", NOW - 400 * DAY),
        await insertIssue(s, "acked", NOW - 400 * DAY),
      );

      const batchesBefore = await ids(s, "batches");
      const eventsBefore = await ids(s, "events");
      const counts = await s.maintenance.runRetention(policy, NOW);

      expect(counts).toEqual({
        batches: gone.batches.length,
        events: gone.events.length,
        attempts: gone.attempts.length,
        dedup: gone.dedup.length,
        issues: gone.issues.length,
      });
      expect(await ids(s, "batches")).toEqual(batchesBefore.filter((id) => !gone.batches.includes(id)));
      expect(await ids(s, "events")).toEqual(eventsBefore.filter((id) => !gone.events.includes(id)));
      expect(await ids(s, "attempts")).toEqual(allAttempts.filter((id) => !gone.attempts.includes(id)));
      expect(
        (await s.rows<{ dedup_id: string }>("dedup", { cols: ["dedup_id"], order: "dedup_id" })).map((r) => r.dedup_id),
      ).toEqual([...keptDedup].sort());
      expect(await ids(s, "issues")).toEqual(keptIssues);

      // spelled out, for the reader: what stays
      const state = async (id: number) => (await s.batch(id))?.state;
      expect(await state(deadAncient.id)).toBe("dead");
      expect(await s.eventsOf(deadAncient.id)).toEqual(deadAncient.events);
      expect(await state(q.batchId)).toBe("dead");
      expect(await s.eventsOf(q.batchId)).toEqual([q.eventId]);
      for (const b of [deliveredNew, deliveredAtCutoff, droppedNew, openOld, sealedOld, leasedOld, retryOld])
        expect(await s.eventsOf(b.id)).toEqual(b.events);
      const pieceSizes = [];
      for (const p of pieces) pieceSizes.push((await s.eventsOf(p)).length);
      expect(pieceSizes).toEqual([1, 1, 1]);
      expect(await ids(s, "attempts")).toContain(runningAttempt);
      expect(await ids(s, "attempts")).toContain(attemptNew);
      // the deleted delivered batch's attempt outlives it (no foreign key)
      expect(await ids(s, "attempts", { batch_id: deliveredOld.id })).toHaveLength(1);
      // SQLite checks its foreign keys on request; PostgreSQL enforces events.batch_id at every write.
      if (s.sqlite) expect(s.sqlite.spool.db.query("PRAGMA foreign_key_check").all()).toEqual([]);

      // a second pass at the same time finds nothing
      expect(await s.maintenance.runRetention(policy, NOW)).toEqual({
        batches: 0,
        events: 0,
        attempts: 0,
        dedup: 0,
        issues: 0,
      });
    });

    test("a dead batch is kept after years; a reclassified quarantine batch goes as delivered", async () => {
      const s = await fresh();
      const dead = await deadAt(s, T0);
      const q = await quarantineAt(
        s,
        {
          source: "gh",
          raw: new TextEncoder().encode('{"a":1}'),
          headers: {},
          authHeaders: [],
          url: null,
          reason: "plugin_error:TypeError",
        },
        T0,
      );
      const kept = await quarantineAt(
        s,
        {
          source: "gh",
          raw: new TextEncoder().encode('{"a":2}'),
          headers: {},
          authHeaders: [],
          url: null,
          reason: "plugin_error:TypeError",
        },
        T0,
      );
      await s.update(
        "batches",
        { state: "delivered", delivered_at: T0 + DAY, result: "reclassified" },
        { id: q.batchId },
      );
      const counts = await s.maintenance.runRetention(policy, T0 + 5 * 365 * DAY);
      expect(counts.batches).toBe(1);
      expect(await ids(s, "batches")).toEqual([dead.id, kept.batchId]);
      expect(await ids(s, "events")).toEqual([...dead.events, kept.eventId]);
    });

    test("a deleted dedup row reopens the id: the same id enqueues again", async () => {
      const s = await fresh();
      const first = await enqueue(s, ev({ source: "fast", key: "a", dedupId: "x", dedupWindowS: 600 }), T0);
      expect(first.status).toBe("queued");
      await s.maintenance.runRetention(policy, T0 + 601);
      expect(await s.count("dedup")).toBe(0);
      expect(
        (await enqueue(s, ev({ source: "fast", key: "a", dedupId: "x", dedupWindowS: 600 }), T0 + 602)).status,
      ).toBe("queued");
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
        torn: all(
          "SELECT b.id FROM batches b WHERE b.count <> (SELECT COUNT(*) FROM events e WHERE e.batch_id = b.id)",
        ),
        batches: all("SELECT id, state FROM batches ORDER BY id") as { id: number; state: string }[],
        dead: all(
          "SELECT b.id, COUNT(e.id) AS events FROM batches b LEFT JOIN events e ON e.batch_id = b.id " +
            "WHERE b.state = 'dead' GROUP BY b.id ORDER BY b.id",
        ),
        events: (all("SELECT COUNT(*) AS n FROM events") as { n: number }[])[0].n,
      };
    } finally {
      s.close();
    }
  }

  describe("crash safety", () => {
    // SQLite only: the child process runs SQLite's retention over the spool file, killed at its
    // retention.before_commit crash point, and the file is read back with quick_check and
    // PRAGMA foreign_key_check. PostgreSQL's retention has no crash point, and a killed client's
    // transaction is the server's to roll back.
    test.skipIf(!caps.sqliteFile)(
      "killed at retention.before_commit: the open transaction rolls back, committed ones stay, dead batches untouched",
      async () => {
        const s = await fresh();
        if (!s.sqlite) throw new Error("a SQLite file");
        const t = s.sqlite;
        // 30 delivered batches of 2 events: 15 delivered at T0, 15 ten days later
        for (let i = 0; i < 30; i++) {
          const at = i < 15 ? T0 : T0 + 10 * DAY;
          let batchId = 0;
          for (let n = 0; n < 2; n++) {
            const r = await enqueue(s, ev({ key: `k${i}` }), at);
            if (r.status !== "queued") throw new Error(r.status);
            batchId = r.placed[0].batchId;
          }
          await s.update(
            "batches",
            { state: "delivered", sealed_at: at, content_hash: "sha256:x", delivered_at: at },
            { id: batchId },
          );
        }
        // dead batches a year older than everything, and a quarantined request
        for (let i = 0; i < 5; i++) {
          const r = await enqueue(s, ev({ key: `dead${i}` }), T0 - 365 * DAY);
          if (r.status !== "queued") throw new Error(r.status);
          await s.update(
            "batches",
            { state: "dead", sealed_at: T0 - 365 * DAY, content_hash: "sha256:x" },
            { id: r.placed[0].batchId },
          );
        }
        await quarantineAt(
          s,
          {
            source: "gh",
            raw: new TextEncoder().encode("{}"),
            headers: {},
            authHeaders: [],
            url: null,
            reason: "plugin_error:TypeError",
          },
          T0 - 365 * DAY,
        );
        await s.close();
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
      },
    );
  });
}
