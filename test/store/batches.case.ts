// Readiness, the FIFO candidate query, claim, fenced marks and lease recovery, through the
// roles the services call: the intake's enqueue, the dispatcher's tick (sealReady, candidates,
// claimBatches, recoverLeases, now_eff, its heartbeat) and its workers' recordOutcomes.
import { describe, expect, test } from "bun:test";
import { contentHash } from "../../src/store/content.ts";
import { claimOne, end, endAllAtNow, endOne } from "../helpers/attempts.ts";
import { copy, ev, T0 } from "../helpers/spool.ts";
import type { StoreUnderTest } from "../helpers/store-under-test.ts";
import type { Suite } from "./suite.ts";

/** The batches cases, on whatever store fresh() opens. */
export function batchCases({ fresh, caps }: Suite): void {
  async function open(s: StoreUnderTest, over: Parameters<typeof ev>[0] = {}): Promise<number> {
    const [r] = await s.intake.enqueueAll([ev(over)], s.clock.now());
    if (r.status !== "queued") throw new Error(r.status);
    return r.placed[0].batchId;
  }

  function claim(s: StoreUnderTest, batchId: number, now = s.clock.now()) {
    return claimOne(s, {
      batchId,
      destination: "http:d",
      now,
      leaseUntil: now + 90,
      host: "h",
      pid: 42,
      deliveryId: (a, n) => `hs_x_${batchId}_${a}_${n}`,
    });
  }

  /** The tick's candidates at `now`, every destination's (no slot limit). */
  const candidates = (s: StoreUnderTest, now: number) => s.dispatch.candidates(now, Number.POSITIVE_INFINITY);
  const ids = async (p: Promise<{ id: number }[]>) => (await p).map((x) => x.id);

  describe("readiness", () => {
    test("immediate: quiet_s = max_s = 0 seals at the first tick", async () => {
      const s = await fresh();
      const id = await open(s, { copies: [copy("r", "http:d", { quiet_s: 0, max_s: 0 })] });
      expect(await s.dispatch.sealReady(T0)).toEqual([id]);
      expect(await s.batch(id)).toMatchObject({ state: "sealed", sealed_at: T0 });
    });

    test("a limit seals the oldest ready batches first, at most that many; the next call the rest", async () => {
      const s = await fresh();
      const w = { quiet_s: 0, max_s: 0 };
      const ids: number[] = [];
      for (const key of ["a", "b", "c", "d", "e"]) ids.push(await open(s, { key, copies: [copy("r", "http:d", w)] }));
      expect(await s.dispatch.sealReady(T0, new Map(), 2)).toEqual(ids.slice(0, 2));
      expect((await s.batch(ids[2]))?.state).toBe("open");
      expect(await s.dispatch.sealReady(T0, new Map(), 2)).toEqual(ids.slice(2, 4));
      expect(await s.dispatch.sealReady(T0)).toEqual(ids.slice(4));
      expect(await s.dispatch.sealReady(T0, new Map(), 2)).toEqual([]);
    });

    test("a batch its key_budget holds open is passed over, not counted against the limit", async () => {
      const s = await fresh();
      const w = { quiet_s: 0, max_s: 0 };
      // Key a spends its budget of one run an hour.
      const spent = await open(s, { key: "a", copies: [copy("r", "http:d", w)] });
      expect(await s.dispatch.sealReady(T0)).toEqual([spent]);
      const c = await claim(s, spent);
      if (!c) throw new Error("claim");
      await end(s, { batchId: spent, attemptId: c.attemptId, owner: c.owner, now: T0, ending: { kind: "delivered" } });
      const held = await open(s, { key: "a", copies: [copy("r", "http:d", w)] });
      const other = await open(s, { key: "b", copies: [copy("r", "http:d", w)] });
      const budgets = new Map([["http:d", { limit: 1, windowS: 3600 }]]);
      expect(await s.dispatch.sealReady(T0 + 1, budgets, 1)).toEqual([other]);
      expect((await s.batch(held))?.state).toBe("open");
    });

    test("quiet: not before last_at + quiet_s, then sealed", async () => {
      const s = await fresh();
      const id = await open(s, { copies: [copy("r", "http:d", { quiet_s: 10, max_s: 100 })] });
      s.clock.advance(4);
      await open(s, { copies: [copy("r", "http:d", { quiet_s: 10, max_s: 100 })] });
      expect(await s.dispatch.sealReady(T0 + 13.9)).toEqual([]);
      expect((await s.batch(id))?.state).toBe("open");
      expect(await s.dispatch.sealReady(T0 + 14)).toEqual([id]);
    });

    test("max: a burst that never goes quiet is sealed at first_at + max_s", async () => {
      const s = await fresh();
      const w = { quiet_s: 10, max_s: 30 };
      const id = await open(s, { copies: [copy("r", "http:d", w)] });
      for (let at = 5; at < 30; at += 5) {
        s.clock.set(T0 + at);
        await open(s, { copies: [copy("r", "http:d", w)] });
        expect(await s.dispatch.sealReady(T0 + at)).toEqual([]);
      }
      expect(await s.dispatch.sealReady(T0 + 30)).toEqual([id]);
    });

    test("sealing freezes content: the hash is over events + event_meta and stays put", async () => {
      const s = await fresh();
      const id = await open(s, { copies: [copy("r", "http:d", { quiet_s: 0, max_s: 0 })] });
      await s.dispatch.sealReady(T0);
      const hash = (await s.batch(id))?.content_hash as string;
      expect(hash).toMatch(/^sha256:[0-9a-f]{64}$/);
      expect(hash).toBe(contentHash(await s.dispatch.batchContent(id)));
      // a new event for the group opens a new batch, never joins a sealed one
      const next = await open(s, { copies: [copy("r", "http:d", { quiet_s: 0, max_s: 0 })] });
      expect(next).not.toBe(id);
      // across attempts (claim, retry, claim, deliver) the hash is identical
      const c1 = await claim(s, id);
      if (!c1) throw new Error("claim");
      await end(s, {
        batchId: id,
        attemptId: c1.attemptId,
        owner: c1.owner,
        now: T0,
        ending: { kind: "retry", nextAttemptAt: T0 },
      });
      const c2 = await claim(s, id);
      if (!c2) throw new Error("claim");
      await end(s, {
        batchId: id,
        attemptId: c2.attemptId,
        owner: c2.owner,
        now: T0,
        ending: { kind: "delivered" },
      });
      expect((await s.batch(id))?.content_hash).toBe(hash);
    });
  });

  describe("candidates", () => {
    test("only the head of each group, oldest first_at first, across groups", async () => {
      const s = await fresh();
      const w = { max_events: 1 };
      const a1 = await open(s, { key: "a", copies: [copy("r", "http:d", w)] });
      s.clock.advance(1);
      const b1 = await open(s, { key: "b", copies: [copy("r", "http:d", w)] });
      s.clock.advance(1);
      await open(s, { key: "a", copies: [copy("r", "http:d", w)] });
      s.clock.advance(1);
      const c1 = await open(s, { key: "a", copies: [copy("r2", "http:e", w)] });
      expect(await ids(candidates(s, s.clock.now()))).toEqual([a1, b1, c1]);
    });

    test("a group whose head is leased, backing off or still open yields nothing; due retry does", async () => {
      const s = await fresh();
      const w = { max_events: 1 };
      const a1 = await open(s, { key: "a", copies: [copy("r", "http:d", w)] });
      const a2 = await open(s, { key: "a", copies: [copy("r", "http:d", w)] });
      const c = await claim(s, a1);
      if (!c) throw new Error("claim");
      expect(await ids(candidates(s, T0))).toEqual([]);
      await end(s, {
        batchId: a1,
        attemptId: c.attemptId,
        owner: c.owner,
        now: T0,
        ending: { kind: "retry", nextAttemptAt: T0 + 15 },
      });
      expect(await ids(candidates(s, T0 + 14))).toEqual([]);
      expect(await ids(candidates(s, T0 + 15))).toEqual([a1]);
      // an open head blocks its group too
      const o = await open(s, { key: "o", copies: [copy("r", "http:d", { quiet_s: 50, max_s: 50 })] });
      expect(await ids(candidates(s, T0 + 15))).not.toContain(o);
      expect(a2).toBeGreaterThan(a1);
    });

    test("a dead or dropped head leaves the queue; quarantine and not_before in the future never deliver", async () => {
      const s = await fresh();
      const w = { max_events: 1 };
      const a1 = await open(s, { key: "a", copies: [copy("r", "http:d", w)] });
      const a2 = await open(s, { key: "a", copies: [copy("r", "http:d", w)] });
      const c = await claim(s, a1);
      if (!c) throw new Error("claim");
      await end(s, {
        batchId: a1,
        attemptId: c.attemptId,
        owner: c.owner,
        now: T0,
        ending: { kind: "dead", status: 422 },
      });
      expect(await ids(candidates(s, T0))).toEqual([a2]);
      await s.update("batches", { not_before: T0 + 10 }, { id: a2 });
      expect(await ids(candidates(s, T0))).toEqual([]);
      expect(await ids(candidates(s, T0 + 10))).toEqual([a2]);
      await s.insert("batches", [
        {
          route: "q",
          source: "q",
          destination: "quarantine",
          key: "quarantine",
          state: "sealed",
          first_at: T0 - 100,
          last_at: T0 - 100,
          quiet_s: 0,
          max_s: 0,
          max_events: 1,
          max_bytes: 1,
          sealed_at: T0,
          content_hash: "sha256:x",
        },
      ]);
      expect((await candidates(s, T0 + 10)).map((x) => x.destination)).toEqual(["http:d"]);
    });
  });

  describe("claim and fenced marks", () => {
    test("claim writes the attempt row first and fences the lease with host:pid:attempt_id", async () => {
      const s = await fresh();
      const id = await open(s, { copies: [copy("r", "http:d", { max_events: 1 })] });
      const c = await claim(s, id);
      if (!c) throw new Error("claim");
      expect(c.owner).toBe(`h:42:${c.attemptId}`);
      expect(c.n).toBe(1);
      expect(c.deliveryId).toBe(`hs_x_${id}_${c.attemptId}_1`);
      expect(await s.batch(id)).toMatchObject({ state: "leased", lease_owner: c.owner, lease_until: T0 + 90 });
      const a = await s.row("attempts", {
        cols: ["batch_id", "n", "started_at", "finished_at", "outcome", "delivery_id"],
        where: { id: c.attemptId },
      });
      expect(a).toEqual({
        batch_id: id,
        n: 1,
        started_at: T0,
        finished_at: null,
        outcome: null,
        delivery_id: c.deliveryId,
      });
      // a second claim loses and leaves no attempt row behind
      expect(await claim(s, id)).toBeNull();
      expect(await s.count("attempts")).toBe(1);
    });

    test("outcomes: delivered counts the attempt; retry and dead record class and error", async () => {
      const s = await fresh();
      const w = { max_events: 1 };
      const ids = [
        await open(s, { key: "a", copies: [copy("r", "http:d", w)] }),
        await open(s, { key: "b", copies: [copy("r", "http:d", w)] }),
        await open(s, { key: "c", copies: [copy("r", "http:d", w)] }),
      ];
      const [c1, c2, c3] = [await claim(s, ids[0]), await claim(s, ids[1]), await claim(s, ids[2])];
      if (!c1 || !c2 || !c3) throw new Error("claim");
      expect(
        (
          await end(s, {
            batchId: ids[0],
            attemptId: c1.attemptId,
            owner: c1.owner,
            now: T0 + 1,
            ending: { kind: "delivered" },
          })
        ).applied,
      ).toBe(true);
      expect(await s.batch(ids[0])).toMatchObject({
        state: "delivered",
        delivered_at: T0 + 1,
        attempts: 1,
        lease_owner: null,
        result: "ok",
      });
      // A batch failure is counted; its detail is the attempt's error, on one line.
      await end(s, {
        batchId: ids[1],
        attemptId: c2.attemptId,
        owner: c2.owner,
        now: T0 + 1,
        ending: { kind: "retry", klass: "batch", status: 502, nextAttemptAt: T0 + 16, detail: "exit 3\nsecond line" },
      });
      expect(await s.batch(ids[1])).toMatchObject({
        state: "retry",
        next_attempt_at: T0 + 16,
        attempts: 1,
        last_class: "batch",
        last_error: "exit 3 second line",
      });
      // The receiver's refusal is uncounted; its detail is kept to 500 characters.
      await end(s, {
        batchId: ids[2],
        attemptId: c3.attemptId,
        owner: c3.owner,
        now: T0 + 1,
        ending: { kind: "dead", status: 422, detail: "x".repeat(900) },
      });
      const dead = await s.batch(ids[2]);
      expect(dead).toMatchObject({ state: "dead", last_class: "permanent", attempts: 0 });
      expect(dead?.last_error).toHaveLength(500);
      const outcomes = await s.rows("attempts", { cols: ["outcome", "counted", "klass", "status"], order: "id" });
      expect(outcomes).toEqual([
        { outcome: "ok", counted: 1, klass: null, status: 200 },
        { outcome: "retry", counted: 1, klass: "batch", status: 502 },
        { outcome: "dead", counted: 0, klass: "permanent", status: 422 },
      ]);
    });

    test("a mark after the lease was lost is discarded: attempt 'discarded', no effect, no emits", async () => {
      const s = await fresh();
      const id = await open(s, { copies: [copy("r", "http:d", { max_events: 1 })] });
      const c = await claim(s, id);
      if (!c) throw new Error("claim");
      expect(await s.dispatch.recoverLeases({ now: T0 + 91, startup: false })).toEqual([id]);
      const emit = ev({ source: "emitter", key: "e" });
      const r = await end(s, {
        batchId: id,
        attemptId: c.attemptId,
        owner: c.owner,
        now: T0 + 95,
        ending: { kind: "delivered", emits: [emit] },
      });
      expect(r.applied).toBe(false);
      expect(await s.batch(id)).toMatchObject({ state: "retry", last_error: "lease expired" });
      expect(await s.row("attempts", { cols: ["outcome"], where: { id: c.attemptId } })).toEqual({
        outcome: "discarded",
      });
      expect(await s.count("events", { source: "emitter" })).toBe(0);
      // the next owner's claim and mark do apply
      const c2 = await claim(s, id, T0 + 96);
      if (!c2) throw new Error("claim");
      expect(
        (
          await end(s, {
            batchId: id,
            attemptId: c.attemptId,
            owner: c.owner,
            now: T0 + 97,
            ending: { kind: "retry", nextAttemptAt: T0 + 97 },
          })
        ).applied,
      ).toBe(false);
      expect(
        (
          await end(s, {
            batchId: id,
            attemptId: c2.attemptId,
            owner: c2.owner,
            now: T0 + 97,
            ending: { kind: "delivered", emits: [emit] },
          })
        ).applied,
      ).toBe(true);
      expect(await s.count("events", { source: "emitter" })).toBe(1);
    });

    test("emits go in the delivery's transaction: a bad emit leaves the batch leased and nothing stored", async () => {
      const s = await fresh();
      const id = await open(s, { copies: [copy("r", "http:d", { max_events: 1 })] });
      const c = await claim(s, id);
      if (!c) throw new Error("claim");
      const before = await s.count("events");
      // The outcome fails alone: its Error stands in its place and its savepoint is undone.
      const r = await endOne(s, {
        batchId: id,
        attemptId: c.attemptId,
        owner: c.owner,
        now: T0,
        ending: { kind: "delivered", emits: [ev({ key: "fine" }), ev({ payload: "not json" })] },
      });
      expect(r).toBeInstanceOf(Error);
      expect(await s.batch(id)).toMatchObject({ state: "leased", lease_owner: c.owner });
      expect(await s.count("events")).toBe(before);
      expect(await s.row("attempts", { cols: ["finished_at"], where: { id: c.attemptId } })).toEqual({
        finished_at: null,
      });
    });
  });

  describe("lease recovery", () => {
    // Startup recovery takes every lease because SQLite's dispatcher holds the flock: no other
    // dispatcher can be running. PostgreSQL's dispatchers share the database, so none may take
    // every lease at its start; they recover only expired ones (the next case's rule).
    test.skipIf(!caps.singleDispatcher)(
      "startup recovers every leased row: retry due now, uncounted, 'lease expired'",
      async () => {
        const s = await fresh();
        const w = { max_events: 1 };
        const a = await open(s, { key: "a", copies: [copy("r", "http:d", w)] });
        const b = await open(s, { key: "b", copies: [copy("r", "http:d", w)] });
        const ca = await claim(s, a);
        const cb = await claim(s, b);
        if (!ca || !cb) throw new Error("claim");
        expect((await s.dispatch.recoverLeases({ now: T0 + 1, startup: true })).sort()).toEqual([a, b].sort());
        expect(await s.batch(a)).toMatchObject({
          state: "retry",
          next_attempt_at: T0 + 1,
          attempts: 0,
          lease_owner: null,
          last_error: "lease expired",
        });
        const rows = await s.rows("attempts", { cols: ["outcome", "error", "counted", "finished_at"], order: "id" });
        expect(rows).toEqual([
          { outcome: "retry", error: "lease expired", counted: 0, finished_at: T0 + 1 },
          { outcome: "retry", error: "lease expired", counted: 0, finished_at: T0 + 1 },
        ]);
      },
    );

    test("the tick recovers only expired leases, and never one a live worker holds", async () => {
      const s = await fresh();
      const w = { max_events: 1 };
      const a = await open(s, { key: "a", copies: [copy("r", "http:d", w)] });
      const b = await open(s, { key: "b", copies: [copy("r", "http:d", w)] });
      const ca = await claim(s, a);
      const cb = await claim(s, b, T0 + 50);
      if (!ca || !cb) throw new Error("claim");
      expect(await s.dispatch.recoverLeases({ now: T0 + 90, startup: false })).toEqual([]);
      // Only SQLite's single dispatcher knows its live workers; on PostgreSQL a live worker's
      // lease is safe because lease_until is its deadline plus grace, whoever recovers.
      if (caps.singleDispatcher)
        expect(await s.dispatch.recoverLeases({ now: T0 + 91, startup: false, live: new Set([ca.owner]) })).toEqual([]);
      expect(await s.dispatch.recoverLeases({ now: T0 + 91, startup: false })).toEqual([a]);
      expect((await s.batch(b))?.state).toBe("leased");
    });
  });

  describe("clock guard", () => {
    // The wall clock here is the injected one, stepped back and forth. PostgreSQL's now_eff
    // reads the database's clock, which a test cannot step; see the case after this one.
    test.skipIf(!caps.injectedWallClock)(
      "now_eff = max(wall, last_tick_at): a backwards step makes time stand still",
      async () => {
        const s = await fresh();
        expect(await s.dispatch.effectiveNow()).toBe(T0);
        await s.dispatch.writeHeartbeat(T0 + 100, "h", 1);
        s.clock.set(T0 - 3600);
        expect(await s.dispatch.effectiveNow()).toBe(T0 + 100);
        s.clock.set(T0 + 200);
        expect(await s.dispatch.effectiveNow()).toBe(T0 + 200);
        await s.setMeta("last_tick_at", "garbage");
        expect(await s.dispatch.effectiveNow()).toBe(T0 + 200);
      },
    );

    // The same rule on whichever wall clock the backend reads (the injected one on SQLite, the
    // database's on PostgreSQL): a tick ahead of it holds now_eff there.
    test("now_eff is never behind the latest recorded tick, whatever the wall clock says", async () => {
      const s = await fresh();
      const wall = await s.wallNow();
      expect(await s.dispatch.effectiveNow()).toBeGreaterThanOrEqual(wall);
      await s.dispatch.writeHeartbeat(wall + 3600, "h", 1);
      expect(await s.dispatch.effectiveNow()).toBe(wall + 3600);
    });

    test("outcomes ended at the store's now are stamped with now_eff, never behind the latest tick", async () => {
      const s = await fresh();
      const id = await open(s, { copies: [copy("r", "http:d", { max_events: 1 })] });
      const c = await claim(s, id);
      if (!c) throw new Error("claim");
      const ahead = (await s.wallNow()) + 3600;
      await s.dispatch.writeHeartbeat(ahead, "h", 1);
      const [r] = await endAllAtNow(s, [
        // Its own time is not used: the store reads now_eff as it writes.
        { batchId: id, attemptId: c.attemptId, owner: c.owner, now: T0, ending: { kind: "delivered" } },
      ]);
      expect(r).toEqual({ applied: true, state: "delivered", klass: null });
      expect(await s.batch(id)).toMatchObject({ state: "delivered", delivered_at: ahead });
      expect(await s.row("attempts", { cols: ["finished_at"], where: { id: c.attemptId } })).toEqual({
        finished_at: ahead,
      });
    });

    test("a last_tick_at that is not a number is ignored: now_eff is the wall clock", async () => {
      const s = await fresh();
      const wall = await s.wallNow();
      await s.dispatch.writeHeartbeat(wall + 3600, "h", 1);
      await s.setMeta("last_tick_at", "garbage");
      const now = await s.dispatch.effectiveNow();
      expect(now).toBeGreaterThanOrEqual(wall);
      expect(now).toBeLessThan(wall + 3600);
      // The next heartbeat writes a number again.
      await s.dispatch.writeHeartbeat(wall + 7200, "h", 1);
      expect(await s.dispatch.effectiveNow()).toBe(wall + 7200);
    });
  });
}
