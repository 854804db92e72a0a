// Operator transitions: replay, reclassify, retry, split, exclude, drop.
import { describe, expect, test } from "bun:test";
import { isHookspoolError } from "../../src/errors.ts";
import { claimBatch, sealReady } from "../../src/store/queue.ts";
import { markDead, markRetry } from "../../src/store/marks.ts";
import { batchContent, contentHash } from "../../src/store/content.ts";
import { enqueue, quarantine } from "../../src/store/enqueue.ts";
import { dropBatches } from "../../src/store/drop.ts";
import { deadBatchIds, replayBatch, retryNow } from "../../src/store/replay.ts";
import { excludeEvents, splitBatch } from "../../src/store/split.ts";
import { batchRow, copy, ev, payloadOf, T0 } from "../helpers/spool.ts";
import type { TestSpool } from "../helpers/spool.ts";
import type { OpenSpool } from "./suite.ts";

/** The operator cases, on whatever store fresh() opens. */
export function operatorVerbCases(fresh: OpenSpool): void {
  type TS = TestSpool;

  /** A sealed batch of `n` events (key k), returning its id and event ids. */
  function sealedBatch(t: TS, n: number, over: Parameters<typeof ev>[0] = {}): { id: number; events: number[] } {
    const events: number[] = [];
    let id = 0;
    for (let i = 0; i < n; i++) {
      const r = enqueue(t.spool, ev({ copies: [copy("r", "http:d", { quiet_s: 0, max_s: 0 })], ...over }));
      if (r.status !== "queued") throw new Error(r.status);
      id = r.placed[0].batchId;
      events.push(r.placed[0].eventId);
      t.clock.advance(1);
    }
    sealReady(t.spool, t.clock.now());
    return { id, events };
  }

  function kill(t: TS, id: number, klass = "permanent"): void {
    const now = t.clock.now();
    const c = claimBatch(t.spool, { batchId: id, destination: "http:d", now, leaseUntil: now + 90, host: "h", pid: 1 });
    if (!c) throw new Error("claim");
    markDead(t.spool, { batchId: id, attemptId: c.attemptId, owner: c.owner, now, attempt: { klass, status: 422, error: "rejected", durationMs: 1, counted: true } });
  }

  function code(fn: () => unknown): string | undefined {
    try {
      fn();
    } catch (e) {
      return isHookspoolError(e) ? e.code : "other";
    }
    return undefined;
  }

  describe("replay", () => {
    test("dead -> retry, due now, attempts reset, content unchanged", () => {
      const t = fresh();
      const { id } = sealedBatch(t, 2);
      const hash = batchRow(t.spool, id).content_hash;
      kill(t, id);
      expect(batchRow(t.spool, id).attempts).toBe(1);
      t.clock.advance(100);
      expect(replayBatch(t.spool, id, t.clock.now())).toEqual({ batchId: id, kind: "replayed" });
      expect(batchRow(t.spool, id)).toMatchObject({ state: "retry", attempts: 0, next_attempt_at: t.clock.now(), not_before: t.clock.now(), content_hash: hash, count: 2 });
    });

    test("replay of a batch that is not dead is 'nothing to do'; a missing batch is 'not found'", () => {
      const t = fresh();
      const { id } = sealedBatch(t, 1);
      expect(code(() => replayBatch(t.spool, id, T0))).toBe("E_NOTHING");
      expect(code(() => replayBatch(t.spool, 999, T0))).toBe("E_NOT_FOUND");
    });

    test("a quarantine batch is classified again: its requests become events, it is marked reclassified", () => {
      const t = fresh();
      const raw = new TextEncoder().encode('{"repo":"o/r"}');
      const q = quarantine(t.spool, { source: "gh", raw, headers: { "x-e": "push" }, authHeaders: [], url: null, reason: "plugin_error:TypeError" });
      expect(code(() => replayBatch(t.spool, q.batchId, T0))).toBe("E_CONFIG");
      // a plugin that still throws changes nothing
      expect(code(() => replayBatch(t.spool, q.batchId, T0, () => { throw new TypeError("still broken"); }))).toBe("other");
      expect(batchRow(t.spool, q.batchId).state).toBe("dead");
      const r = replayBatch(t.spool, q.batchId, T0 + 5, (req) => {
        const body = JSON.parse(new TextDecoder().decode(req.raw));
        return [ev({ source: req.source, key: body.repo, eventType: req.headers["x-e"], payload: JSON.stringify(body), copies: [copy("gh", "hermes:gh"), copy("audit", "http:audit", {}, true)] })];
      });
      expect(r.kind).toBe("reclassified");
      expect(batchRow(t.spool, q.batchId)).toMatchObject({ state: "delivered", result: "reclassified", delivered_at: T0 + 5 });
      const made = t.spool.db.query("SELECT route, event_type, payload FROM events WHERE source = 'gh' AND payload IS NOT NULL ORDER BY id").all();
      expect(made).toEqual([
        { route: "gh", event_type: "push", payload: '{"repo":"o/r"}' },
        { route: "audit", event_type: "push", payload: '{"repo":"o/r"}' },
      ]);
      expect(t.spool.db.query("SELECT state FROM issues WHERE fingerprint = 'config:plugin:gh'").get()).toEqual({ state: "resolved" });
    });

    test("replay --dead selects dead batches by destination, source and time, quarantine only by name", () => {
      const t = fresh();
      const a = sealedBatch(t, 1, { key: "a", source: "s1" }).id;
      const b = sealedBatch(t, 1, { key: "b", source: "s2" }).id;
      kill(t, a);
      kill(t, b);
      const q = quarantine(t.spool, { source: "s1", raw: new Uint8Array([1]), headers: {}, authHeaders: [], url: null, reason: "plugin_error:E" });
      expect(deadBatchIds(t.spool, {})).toEqual([a, b]);
      expect(deadBatchIds(t.spool, { source: "s2" })).toEqual([b]);
      expect(deadBatchIds(t.spool, { since: T0 + 1 })).toEqual([b]);
      expect(deadBatchIds(t.spool, { destination: "quarantine" })).toEqual([q.batchId]);
    });
  });

  describe("retry", () => {
    test("retry -> due now; any other state is nothing to do", () => {
      const t = fresh();
      const { id } = sealedBatch(t, 1);
      expect(code(() => retryNow(t.spool, id, T0))).toBe("E_NOTHING");
      const now = t.clock.now();
      const c = claimBatch(t.spool, { batchId: id, destination: "http:d", now, leaseUntil: now + 90, host: "h", pid: 1 });
      if (!c) throw new Error("claim");
      markRetry(t.spool, { batchId: id, attemptId: c.attemptId, owner: c.owner, now, nextAttemptAt: now + 300, attempt: { klass: "transport", status: null, error: "refused", durationMs: 1, counted: false } });
      retryNow(t.spool, id, now + 1);
      expect(batchRow(t.spool, id).next_attempt_at).toBe(now + 1);
    });
  });

  describe("split", () => {
    test("--max-events cuts into consecutive sealed pieces in the same group; the original is dropped 'split'", () => {
      const t = fresh();
      const { id, events } = sealedBatch(t, 5);
      kill(t, id);
      const now = t.clock.now();
      const pieces = splitBatch(t.spool, id, { maxEvents: 2 }, now);
      expect(pieces.length).toBe(3);
      const members = pieces.map((p) => (t.spool.db.query("SELECT id FROM events WHERE batch_id = ? ORDER BY id").all(p) as { id: number }[]).map((e) => e.id));
      expect(members).toEqual([events.slice(0, 2), events.slice(2, 4), events.slice(4)]);
      for (const p of pieces) {
        const b = batchRow(t.spool, p);
        expect(b).toMatchObject({ state: "sealed", route: "r", key: "k", destination: "http:d", not_before: now, sealed_at: now, attempts: 0 });
        expect(b.content_hash).toBe(contentHash(batchContent(t.spool, p)));
      }
      expect(batchRow(t.spool, pieces[0])).toMatchObject({ count: 2, first_at: T0, last_at: T0 + 1 });
      const orig = batchRow(t.spool, id);
      expect(orig).toMatchObject({ state: "dropped", result: "split" });
      expect(orig.last_error).toContain(`#${pieces[0]}`);
    });

    test("--at and --max-bytes", () => {
      const t = fresh();
      const a = sealedBatch(t, 4, { key: "a" });
      const byAt = splitBatch(t.spool, a.id, { at: a.events[1] }, t.clock.now());
      expect(byAt.map((p) => batchRow(t.spool, p).count)).toEqual([1, 3]);
      const b = sealedBatch(t, 4, { key: "b", payload: payloadOf(40) });
      const byBytes = splitBatch(t.spool, b.id, { maxBytes: 100 }, t.clock.now());
      expect(byBytes.map((p) => batchRow(t.spool, p).bytes)).toEqual([80, 80]);
    });

    test("refusals: open/leased/delivered batches, a piece count of one, a bad --at, two options", () => {
      const t = fresh();
      const { id, events } = sealedBatch(t, 2);
      expect(code(() => splitBatch(t.spool, id, { maxEvents: 5 }, T0))).toBe("E_NOTHING");
      expect(code(() => splitBatch(t.spool, id, { at: 9999 }, T0))).toBe("E_NOT_FOUND");
      expect(code(() => splitBatch(t.spool, id, { at: events[0] }, T0))).toBe("E_NOTHING");
      expect(code(() => splitBatch(t.spool, id, { maxEvents: 1, maxBytes: 5 }, T0))).toBe("E_USAGE");
      expect(code(() => splitBatch(t.spool, id, { maxEvents: 0 }, T0))).toBe("E_USAGE");
      const r = enqueue(t.spool, ev({ key: "open", copies: [copy("r", "http:d", { quiet_s: 99, max_s: 99 })] }));
      if (r.status !== "queued") throw new Error(r.status);
      expect(code(() => splitBatch(t.spool, r.placed[0].batchId, { maxEvents: 1 }, T0))).toBe("E_NOTHING");
      expect(batchRow(t.spool, id).state).toBe("sealed");
    });
  });

  describe("exclude", () => {
    test("an excluded event stays stored and listed, leaves the document, and the hash is recomputed", () => {
      const t = fresh();
      const { id, events } = sealedBatch(t, 3);
      const before = batchRow(t.spool, id).content_hash;
      excludeEvents(t.spool, id, [events[1]], T0 + 50);
      const after = batchRow(t.spool, id).content_hash;
      expect(after).not.toBe(before);
      expect(batchContent(t.spool, id).map((e) => e.id)).toEqual([events[0], events[2]]);
      expect(after).toBe(contentHash(batchContent(t.spool, id)));
      expect(t.spool.db.query("SELECT excluded_at FROM events WHERE id = ?").get(events[1])).toEqual({ excluded_at: T0 + 50 });
    });

    test("excluding every event, an event of another batch, or from a delivered batch is refused", () => {
      const t = fresh();
      const a = sealedBatch(t, 2, { key: "a" });
      const b = sealedBatch(t, 1, { key: "b" });
      expect(code(() => excludeEvents(t.spool, a.id, a.events, T0))).toBe("E_NOTHING");
      expect(code(() => excludeEvents(t.spool, a.id, [b.events[0]], T0))).toBe("E_NOT_FOUND");
      expect(t.spool.db.query("SELECT COUNT(*) AS n FROM events WHERE excluded_at IS NOT NULL").get()).toEqual({ n: 0 });
    });
  });

  describe("drop", () => {
    test("open, sealed, retry and dead batches drop; leased does not, and one refusal drops none", () => {
      const t = fresh();
      const a = sealedBatch(t, 1, { key: "a" }).id;
      const b = sealedBatch(t, 1, { key: "b" }).id;
      const now = t.clock.now();
      const c = claimBatch(t.spool, { batchId: b, destination: "http:d", now, leaseUntil: now + 90, host: "h", pid: 1 });
      if (!c) throw new Error("claim");
      expect(code(() => dropBatches(t.spool, [a, b], now))).toBe("E_NOTHING");
      expect(batchRow(t.spool, a).state).toBe("sealed");
      dropBatches(t.spool, [a], now);
      expect(batchRow(t.spool, a)).toMatchObject({ state: "dropped", result: "dropped", delivered_at: now });
    });

    test("dropping the last quarantine batch of a source resolves its config:plugin issue", () => {
      const t = fresh();
      const q1 = quarantine(t.spool, { source: "z", raw: new Uint8Array([1]), headers: {}, authHeaders: [], url: null, reason: "plugin_error:E" });
      const q2 = quarantine(t.spool, { source: "z", raw: new Uint8Array([2]), headers: {}, authHeaders: [], url: null, reason: "plugin_error:E" });
      dropBatches(t.spool, [q1.batchId], T0);
      expect(t.spool.db.query("SELECT state FROM issues").get()).toEqual({ state: "open" });
      dropBatches(t.spool, [q2.batchId], T0);
      expect(t.spool.db.query("SELECT state FROM issues").get()).toEqual({ state: "resolved" });
    });
  });
}
