// Readiness, the FIFO candidate query, claim, fenced marks and lease recovery.
import { describe, expect, test } from "bun:test";
import { claimBatch, candidates, recoverLeases, sealReady } from "../../src/store/queue.ts";
import { markDead, markDelivered, markRetry, type AttemptRecord } from "../../src/store/marks.ts";
import { batchContent, contentHash } from "../../src/store/content.ts";
import { enqueue } from "../../src/store/enqueue.ts";
import { effectiveNow, setMetaTx, writeHeartbeat } from "../../src/store/meta.ts";
import { batchRow, copy, ev, T0 } from "../helpers/spool.ts";
import type { TestSpool } from "../helpers/spool.ts";
import type { OpenSpool } from "./suite.ts";

/** The batches cases, on whatever store fresh() opens. */
export function batchCases(fresh: OpenSpool): void {
  const ok: AttemptRecord = { klass: null, status: 200, error: null, durationMs: 12, counted: true };
  const transport: AttemptRecord = { klass: "transport", status: 502, error: "bad gateway", durationMs: 5, counted: false };

  function open(t: TestSpool, over: Parameters<typeof ev>[0] = {}): number {
    const r = enqueue(t.spool, ev(over));
    if (r.status !== "queued") throw new Error(r.status);
    return r.placed[0].batchId;
  }

  function claim(t: TestSpool, batchId: number, now = t.clock.now()) {
    return claimBatch(t.spool, { batchId, destination: "http:d", now, leaseUntil: now + 90, host: "h", pid: 42, deliveryId: (a, n) => `hs_x_${batchId}_${a}_${n}` });
  }

  describe("readiness", () => {
    test("immediate: quiet_s = max_s = 0 seals at the first tick", () => {
      const t = fresh();
      const id = open(t, { copies: [copy("r", "http:d", { quiet_s: 0, max_s: 0 })] });
      expect(sealReady(t.spool, T0)).toEqual([id]);
      expect(batchRow(t.spool, id)).toMatchObject({ state: "sealed", sealed_at: T0 });
    });

    test("quiet: not before last_at + quiet_s, then sealed", () => {
      const t = fresh();
      const id = open(t, { copies: [copy("r", "http:d", { quiet_s: 10, max_s: 100 })] });
      t.clock.advance(4);
      open(t, { copies: [copy("r", "http:d", { quiet_s: 10, max_s: 100 })] });
      expect(sealReady(t.spool, T0 + 13.9)).toEqual([]);
      expect(batchRow(t.spool, id).state).toBe("open");
      expect(sealReady(t.spool, T0 + 14)).toEqual([id]);
    });

    test("max: a burst that never goes quiet is sealed at first_at + max_s", () => {
      const t = fresh();
      const w = { quiet_s: 10, max_s: 30 };
      const id = open(t, { copies: [copy("r", "http:d", w)] });
      for (let s = 5; s < 30; s += 5) {
        t.clock.set(T0 + s);
        open(t, { copies: [copy("r", "http:d", w)] });
        expect(sealReady(t.spool, T0 + s)).toEqual([]);
      }
      expect(sealReady(t.spool, T0 + 30)).toEqual([id]);
    });

    test("sealing freezes content: the hash is over events + event_meta and stays put", () => {
      const t = fresh();
      const id = open(t, { copies: [copy("r", "http:d", { quiet_s: 0, max_s: 0 })] });
      sealReady(t.spool, T0);
      const hash = batchRow(t.spool, id).content_hash as string;
      expect(hash).toMatch(/^sha256:[0-9a-f]{64}$/);
      expect(hash).toBe(contentHash(batchContent(t.spool, id)));
      // a new event for the group opens a new batch, never joins a sealed one
      const next = open(t, { copies: [copy("r", "http:d", { quiet_s: 0, max_s: 0 })] });
      expect(next).not.toBe(id);
      // across attempts (claim, retry, claim, deliver) the hash is identical
      const c1 = claim(t, id);
      if (!c1) throw new Error("claim");
      markRetry(t.spool, { batchId: id, attemptId: c1.attemptId, owner: c1.owner, now: T0, nextAttemptAt: T0, attempt: transport });
      const c2 = claim(t, id);
      if (!c2) throw new Error("claim");
      markDelivered(t.spool, { batchId: id, attemptId: c2.attemptId, owner: c2.owner, now: T0, attempt: ok });
      expect(batchRow(t.spool, id).content_hash).toBe(hash);
    });
  });

  describe("candidates", () => {
    test("only the head of each group, oldest first_at first, across groups", () => {
      const t = fresh();
      const w = { max_events: 1 };
      const a1 = open(t, { key: "a", copies: [copy("r", "http:d", w)] });
      t.clock.advance(1);
      const b1 = open(t, { key: "b", copies: [copy("r", "http:d", w)] });
      t.clock.advance(1);
      open(t, { key: "a", copies: [copy("r", "http:d", w)] });
      t.clock.advance(1);
      const c1 = open(t, { key: "a", copies: [copy("r2", "http:e", w)] });
      expect(candidates(t.spool, t.clock.now()).map((c) => c.id)).toEqual([a1, b1, c1]);
    });

    test("a group whose head is leased, backing off or still open yields nothing; due retry does", () => {
      const t = fresh();
      const w = { max_events: 1 };
      const a1 = open(t, { key: "a", copies: [copy("r", "http:d", w)] });
      const a2 = open(t, { key: "a", copies: [copy("r", "http:d", w)] });
      const c = claim(t, a1);
      if (!c) throw new Error("claim");
      expect(candidates(t.spool, T0).map((x) => x.id)).toEqual([]);
      markRetry(t.spool, { batchId: a1, attemptId: c.attemptId, owner: c.owner, now: T0, nextAttemptAt: T0 + 15, attempt: transport });
      expect(candidates(t.spool, T0 + 14).map((x) => x.id)).toEqual([]);
      expect(candidates(t.spool, T0 + 15).map((x) => x.id)).toEqual([a1]);
      // an open head blocks its group too
      const o = open(t, { key: "o", copies: [copy("r", "http:d", { quiet_s: 50, max_s: 50 })] });
      expect(candidates(t.spool, T0 + 15).map((x) => x.id)).not.toContain(o);
      expect(a2).toBeGreaterThan(a1);
    });

    test("a dead or dropped head leaves the queue; quarantine and not_before in the future never deliver", () => {
      const t = fresh();
      const w = { max_events: 1 };
      const a1 = open(t, { key: "a", copies: [copy("r", "http:d", w)] });
      const a2 = open(t, { key: "a", copies: [copy("r", "http:d", w)] });
      const c = claim(t, a1);
      if (!c) throw new Error("claim");
      markDead(t.spool, { batchId: a1, attemptId: c.attemptId, owner: c.owner, now: T0, attempt: { ...ok, klass: "permanent", status: 422, counted: false } });
      expect(candidates(t.spool, T0).map((x) => x.id)).toEqual([a2]);
      t.spool.db.run(`UPDATE batches SET not_before = ${T0 + 10} WHERE id = ${a2}`);
      expect(candidates(t.spool, T0).map((x) => x.id)).toEqual([]);
      expect(candidates(t.spool, T0 + 10).map((x) => x.id)).toEqual([a2]);
      t.spool.db.run(`INSERT INTO batches (route, source, destination, key, state, first_at, last_at, quiet_s, max_s, max_events, max_bytes, sealed_at, content_hash)
        VALUES ('q', 'q', 'quarantine', 'quarantine', 'sealed', ${T0 - 100}, ${T0 - 100}, 0, 0, 1, 1, ${T0}, 'sha256:x')`);
      expect(candidates(t.spool, T0 + 10).map((x) => x.destination)).toEqual(["http:d"]);
    });
  });

  describe("claim and fenced marks", () => {
    test("claim writes the attempt row first and fences the lease with host:pid:attempt_id", () => {
      const t = fresh();
      const id = open(t, { copies: [copy("r", "http:d", { max_events: 1 })] });
      const c = claim(t, id);
      if (!c) throw new Error("claim");
      expect(c.owner).toBe(`h:42:${c.attemptId}`);
      expect(c.n).toBe(1);
      expect(c.deliveryId).toBe(`hs_x_${id}_${c.attemptId}_1`);
      expect(batchRow(t.spool, id)).toMatchObject({ state: "leased", lease_owner: c.owner, lease_until: T0 + 90 });
      const a = t.spool.db.query("SELECT batch_id, n, started_at, finished_at, outcome, delivery_id FROM attempts WHERE id = ?").get(c.attemptId);
      expect(a).toEqual({ batch_id: id, n: 1, started_at: T0, finished_at: null, outcome: null, delivery_id: c.deliveryId });
      // a second claim loses and leaves no attempt row behind
      expect(claim(t, id)).toBeNull();
      expect(t.spool.db.query("SELECT COUNT(*) AS n FROM attempts").get()).toEqual({ n: 1 });
    });

    test("outcomes: delivered counts the attempt; retry and dead record class and error", () => {
      const t = fresh();
      const w = { max_events: 1 };
      const ids = [open(t, { key: "a", copies: [copy("r", "http:d", w)] }), open(t, { key: "b", copies: [copy("r", "http:d", w)] }), open(t, { key: "c", copies: [copy("r", "http:d", w)] })];
      const [c1, c2, c3] = ids.map((id) => claim(t, id));
      if (!c1 || !c2 || !c3) throw new Error("claim");
      expect(markDelivered(t.spool, { batchId: ids[0], attemptId: c1.attemptId, owner: c1.owner, now: T0 + 1, attempt: ok }).applied).toBe(true);
      expect(batchRow(t.spool, ids[0])).toMatchObject({ state: "delivered", delivered_at: T0 + 1, attempts: 1, lease_owner: null, result: "ok" });
      markRetry(t.spool, { batchId: ids[1], attemptId: c2.attemptId, owner: c2.owner, now: T0 + 1, nextAttemptAt: T0 + 16, attempt: { ...transport, klass: "batch", counted: true, error: "exit 3\nsecond line" } });
      expect(batchRow(t.spool, ids[1])).toMatchObject({ state: "retry", next_attempt_at: T0 + 16, attempts: 1, last_class: "batch", last_error: "exit 3 second line" });
      markDead(t.spool, { batchId: ids[2], attemptId: c3.attemptId, owner: c3.owner, now: T0 + 1, attempt: { ...ok, klass: "permanent", status: 422, error: "x".repeat(900), counted: false } });
      const dead = batchRow(t.spool, ids[2]);
      expect(dead).toMatchObject({ state: "dead", last_class: "permanent", attempts: 0 });
      expect((dead.last_error as string).length).toBe(500);
      const outcomes = t.spool.db.query("SELECT outcome, counted, klass, status FROM attempts ORDER BY id").all();
      expect(outcomes).toEqual([
        { outcome: "ok", counted: 1, klass: null, status: 200 },
        { outcome: "retry", counted: 1, klass: "batch", status: 502 },
        { outcome: "dead", counted: 0, klass: "permanent", status: 422 },
      ]);
    });

    test("a mark after the lease was lost is discarded: attempt 'discarded', no effect, no emits", () => {
      const t = fresh();
      const id = open(t, { copies: [copy("r", "http:d", { max_events: 1 })] });
      const c = claim(t, id);
      if (!c) throw new Error("claim");
      expect(recoverLeases(t.spool, { now: T0 + 91, all: false })).toEqual([id]);
      const emit = ev({ source: "emitter", key: "e" });
      const r = markDelivered(t.spool, { batchId: id, attemptId: c.attemptId, owner: c.owner, now: T0 + 95, attempt: ok, emits: [emit] });
      expect(r.applied).toBe(false);
      expect(batchRow(t.spool, id)).toMatchObject({ state: "retry", last_error: "lease expired" });
      expect(t.spool.db.query("SELECT outcome FROM attempts WHERE id = ?").get(c.attemptId)).toEqual({ outcome: "discarded" });
      expect(t.spool.db.query("SELECT COUNT(*) AS n FROM events WHERE source = 'emitter'").get()).toEqual({ n: 0 });
      // the next owner's claim and mark do apply
      const c2 = claim(t, id, T0 + 96);
      if (!c2) throw new Error("claim");
      expect(markRetry(t.spool, { batchId: id, attemptId: c.attemptId, owner: c.owner, now: T0 + 97, nextAttemptAt: T0, attempt: transport }).applied).toBe(false);
      expect(markDelivered(t.spool, { batchId: id, attemptId: c2.attemptId, owner: c2.owner, now: T0 + 97, attempt: ok, emits: [emit] }).applied).toBe(true);
      expect(t.spool.db.query("SELECT COUNT(*) AS n FROM events WHERE source = 'emitter'").get()).toEqual({ n: 1 });
    });

    test("emits go in the delivery's transaction: a bad emit leaves the batch leased and nothing stored", () => {
      const t = fresh();
      const id = open(t, { copies: [copy("r", "http:d", { max_events: 1 })] });
      const c = claim(t, id);
      if (!c) throw new Error("claim");
      const before = t.spool.db.query("SELECT COUNT(*) AS n FROM events").get();
      expect(() => markDelivered(t.spool, { batchId: id, attemptId: c.attemptId, owner: c.owner, now: T0, attempt: ok, emits: [ev({ key: "fine" }), ev({ payload: "not json" })] })).toThrow();
      expect(batchRow(t.spool, id)).toMatchObject({ state: "leased", lease_owner: c.owner });
      expect(t.spool.db.query("SELECT COUNT(*) AS n FROM events").get()).toEqual(before);
      expect(t.spool.db.query("SELECT finished_at FROM attempts WHERE id = ?").get(c.attemptId)).toEqual({ finished_at: null });
    });
  });

  describe("lease recovery", () => {
    test("startup recovers every leased row: retry due now, uncounted, 'lease expired'", () => {
      const t = fresh();
      const w = { max_events: 1 };
      const a = open(t, { key: "a", copies: [copy("r", "http:d", w)] });
      const b = open(t, { key: "b", copies: [copy("r", "http:d", w)] });
      const ca = claim(t, a);
      const cb = claim(t, b);
      if (!ca || !cb) throw new Error("claim");
      expect(recoverLeases(t.spool, { now: T0 + 1, all: true }).sort()).toEqual([a, b].sort());
      expect(batchRow(t.spool, a)).toMatchObject({ state: "retry", next_attempt_at: T0 + 1, attempts: 0, lease_owner: null, last_error: "lease expired" });
      const rows = t.spool.db.query("SELECT outcome, error, counted, finished_at FROM attempts ORDER BY id").all();
      expect(rows).toEqual([
        { outcome: "retry", error: "lease expired", counted: 0, finished_at: T0 + 1 },
        { outcome: "retry", error: "lease expired", counted: 0, finished_at: T0 + 1 },
      ]);
    });

    test("the tick recovers only expired leases, and never one a live worker holds", () => {
      const t = fresh();
      const w = { max_events: 1 };
      const a = open(t, { key: "a", copies: [copy("r", "http:d", w)] });
      const b = open(t, { key: "b", copies: [copy("r", "http:d", w)] });
      const ca = claim(t, a);
      const cb = claim(t, b, T0 + 50);
      if (!ca || !cb) throw new Error("claim");
      expect(recoverLeases(t.spool, { now: T0 + 90, all: false })).toEqual([]);
      expect(recoverLeases(t.spool, { now: T0 + 91, all: false, live: new Set([ca.owner]) })).toEqual([]);
      expect(recoverLeases(t.spool, { now: T0 + 91, all: false })).toEqual([a]);
      expect(batchRow(t.spool, b).state).toBe("leased");
    });
  });

  describe("clock guard", () => {
    test("now_eff = max(wall, last_tick_at): a backwards step makes time stand still", () => {
      const t = fresh();
      expect(effectiveNow(t.spool)).toBe(T0);
      writeHeartbeat(t.spool, T0 + 100, 1);
      t.clock.set(T0 - 3600);
      expect(effectiveNow(t.spool)).toBe(T0 + 100);
      t.clock.set(T0 + 200);
      expect(effectiveNow(t.spool)).toBe(T0 + 200);
      setMetaTx(t.spool.db, "last_tick_at", "garbage");
      expect(effectiveNow(t.spool)).toBe(T0 + 200);
    });
  });
}
