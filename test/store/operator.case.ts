// Operator transitions: replay, reclassify, retry, split, exclude, drop, through the operator's
// role; the batches they act on come the services' way (the intake's enqueue and quarantine,
// the dispatcher's seal, claim and recorded outcome).
import { documentShare } from "../../src/store/content.ts";
import { describe, expect, test } from "bun:test";
import { isHookspoolError } from "../../src/errors.ts";
import { contentHash } from "../../src/store/content.ts";
import type { QuarantineInput } from "../../src/store/enqueue.ts";
import { claimOne, end } from "../helpers/attempts.ts";
import { copy, ev, payloadOf, T0 } from "../helpers/spool.ts";
import { NOT_NULL, type StoreUnderTest } from "../helpers/store-under-test.ts";
import type { Suite } from "./suite.ts";

/** The operator cases, on whatever store fresh() opens. */
export function operatorVerbCases({ fresh }: Suite): void {
  type S = StoreUnderTest;

  /** A request the intake could not classify, quarantined at the clock's now. */
  const quarantine = (s: S, q: QuarantineInput) => s.intake.quarantine(q, s.clock.now());

  /** The dispatcher's claim of batch `id` at the clock's now. */
  async function claim(s: S, id: number) {
    const now = s.clock.now();
    return claimOne(s, { batchId: id, destination: "http:d", now, leaseUntil: now + 90, host: "h", pid: 1 });
  }

  /** A sealed batch of `n` events (key k), returning its id and event ids. */
  async function sealedBatch(
    s: S,
    n: number,
    over: Parameters<typeof ev>[0] = {},
  ): Promise<{ id: number; events: number[] }> {
    const events: number[] = [];
    let id = 0;
    for (let i = 0; i < n; i++) {
      const [r] = await s.intake.enqueueAll(
        [ev({ copies: [copy("r", "http:d", { quiet_s: 0, max_s: 0 })], ...over })],
        s.clock.now(),
      );
      if (r.status !== "queued") throw new Error(r.status);
      id = r.placed[0].batchId;
      events.push(r.placed[0].eventId);
      s.clock.advance(1);
    }
    await s.dispatch.sealReady(s.clock.now());
    return { id, events };
  }

  /** Batch `id` dead after one counted attempt (its last allowed: exhausted). */
  async function kill(s: S, id: number): Promise<void> {
    const c = await claim(s, id);
    if (!c) throw new Error("claim");
    const r = await end(s, {
      batchId: id,
      attemptId: c.attemptId,
      owner: c.owner,
      now: s.clock.now(),
      ending: { kind: "dead", counted: true, status: 422, detail: "rejected" },
    });
    if (!r.applied || r.state !== "dead") throw new Error(`batch ${id} not dead`);
  }

  async function code(fn: () => Promise<unknown>): Promise<string | undefined> {
    try {
      await fn();
    } catch (e) {
      return isHookspoolError(e) ? e.code : "other";
    }
    return undefined;
  }

  describe("replay", () => {
    test("dead -> retry, due now, attempts reset, content unchanged", async () => {
      const s = await fresh();
      const { id } = await sealedBatch(s, 2);
      const hash = (await s.batch(id))?.content_hash;
      await kill(s, id);
      expect((await s.batch(id))?.attempts).toBe(1);
      s.clock.advance(100);
      expect(await s.operator.replayBatch(id, s.clock.now())).toEqual({ batchId: id, kind: "replayed" });
      expect(await s.batch(id)).toMatchObject({
        state: "retry",
        attempts: 0,
        next_attempt_at: s.clock.now(),
        not_before: s.clock.now(),
        content_hash: hash,
        count: 2,
      });
    });

    test("replay of a batch that is not dead is 'nothing to do'; a missing batch is 'not found'", async () => {
      const s = await fresh();
      const { id } = await sealedBatch(s, 1);
      expect(await code(() => s.operator.replayBatch(id, T0))).toBe("E_NOTHING");
      expect(await code(() => s.operator.replayBatch(999, T0))).toBe("E_NOT_FOUND");
    });

    test("a quarantine batch is classified again: its requests become events, it is marked reclassified", async () => {
      const s = await fresh();
      const raw = new TextEncoder().encode('{"repo":"o/r"}');
      const q = await quarantine(s, {
        source: "gh",
        raw,
        headers: { "x-e": "push" },
        authHeaders: [],
        url: null,
        reason: "plugin_error:TypeError",
      });
      expect(await code(() => s.operator.replayBatch(q.batchId, T0))).toBe("E_CONFIG");
      // a plugin that still throws changes nothing
      expect(
        await code(() =>
          s.operator.replayBatch(q.batchId, T0, () => {
            throw new TypeError("still broken");
          }),
        ),
      ).toBe("other");
      expect((await s.batch(q.batchId))?.state).toBe("dead");
      const r = await s.operator.replayBatch(q.batchId, T0 + 5, (req) => {
        const body = JSON.parse(new TextDecoder().decode(req.raw));
        return [
          ev({
            source: req.source,
            key: body.repo,
            eventType: req.headers["x-e"],
            payload: JSON.stringify(body),
            copies: [copy("gh", "hermes:gh"), copy("audit", "http:audit", {}, true)],
          }),
        ];
      });
      expect(r.kind).toBe("reclassified");
      expect(await s.batch(q.batchId)).toMatchObject({
        state: "delivered",
        result: "reclassified",
        delivered_at: T0 + 5,
      });
      const made = await s.rows("events", {
        cols: ["route", "event_type", "payload"],
        where: { source: "gh", payload: NOT_NULL },
        order: "id",
      });
      expect(made).toEqual([
        { route: "gh", event_type: "push", payload: '{"repo":"o/r"}' },
        { route: "audit", event_type: "push", payload: '{"repo":"o/r"}' },
      ]);
      expect(await s.row("issues", { cols: ["state"], where: { fingerprint: "config:plugin:gh" } })).toEqual({
        state: "resolved",
      });
    });

    test("replay --dead selects dead batches by destination, source and time, quarantine only by name", async () => {
      const s = await fresh();
      const dead = (f: Parameters<typeof s.operator.deadBatchIds>[0]) => s.operator.deadBatchIds(f);
      const a = (await sealedBatch(s, 1, { key: "a", source: "s1" })).id;
      const b = (await sealedBatch(s, 1, { key: "b", source: "s2" })).id;
      await kill(s, a);
      await kill(s, b);
      const q = await quarantine(s, {
        source: "s1",
        raw: new Uint8Array([1]),
        headers: {},
        authHeaders: [],
        url: null,
        reason: "plugin_error:E",
      });
      expect(await dead({})).toEqual([a, b]);
      expect(await dead({ source: "s2" })).toEqual([b]);
      expect(await dead({ since: T0 + 1 })).toEqual([b]);
      expect(await dead({ destination: "quarantine" })).toEqual([q.batchId]);
    });
  });

  describe("retry", () => {
    test("retry -> due now; any other state is nothing to do", async () => {
      const s = await fresh();
      const { id } = await sealedBatch(s, 1);
      expect(await code(() => s.operator.retryNow(id, T0))).toBe("E_NOTHING");
      const now = s.clock.now();
      const c = await claim(s, id);
      if (!c) throw new Error("claim");
      await end(s, {
        batchId: id,
        attemptId: c.attemptId,
        owner: c.owner,
        now,
        ending: { kind: "retry", nextAttemptAt: now + 300, status: null, detail: "refused" },
      });
      await s.operator.retryNow(id, now + 1);
      expect((await s.batch(id))?.next_attempt_at).toBe(now + 1);
    });
  });

  describe("split", () => {
    test(
      "--max-events cuts into consecutive sealed pieces in the same group; " + "the original is dropped 'split'",
      async () => {
        const s = await fresh();
        const { id, events } = await sealedBatch(s, 5);
        await kill(s, id);
        const now = s.clock.now();
        const pieces = await s.operator.splitBatch(id, { maxEvents: 2 }, now);
        expect(pieces.length).toBe(3);
        const members = [];
        for (const p of pieces) members.push(await s.eventsOf(p));
        expect(members).toEqual([events.slice(0, 2), events.slice(2, 4), events.slice(4)]);
        for (const p of pieces) {
          const b = await s.batch(p);
          expect(b).toMatchObject({
            state: "sealed",
            route: "r",
            key: "k",
            destination: "http:d",
            not_before: now,
            sealed_at: now,
            attempts: 0,
          });
          expect(b?.content_hash).toBe(contentHash(await s.dispatch.batchContent(p)));
        }
        expect(await s.batch(pieces[0])).toMatchObject({ count: 2, first_at: T0, last_at: T0 + 1 });
        const orig = await s.batch(id);
        expect(orig).toMatchObject({ state: "dropped", result: "split" });
        expect(orig?.last_error).toContain(`#${pieces[0]}`);
      },
    );

    test("--at and --max-bytes", async () => {
      const s = await fresh();
      const a = await sealedBatch(s, 4, { key: "a" });
      const byAt = await s.operator.splitBatch(a.id, { at: a.events[1] }, s.clock.now());
      const counts = [];
      for (const p of byAt) counts.push((await s.batch(p))?.count);
      expect(counts).toEqual([1, 3]);
      const b = await sealedBatch(s, 4, { key: "b", payload: payloadOf(40) });
      // Each piece is measured as the join rule measures: the events' shares of the document.
      const share = documentShare((await s.dispatch.batchContent(b.id))[0]);
      const byBytes = await s.operator.splitBatch(b.id, { maxBytes: 2 * share + 1 }, s.clock.now());
      const bytes = [];
      for (const p of byBytes) bytes.push((await s.batch(p))?.bytes);
      expect(bytes).toEqual([2 * share, 2 * share]);
      // What already fits says so, by the same measure.
      const fits = await sealedBatch(s, 2, { key: "c", payload: payloadOf(40) });
      const whole = (await s.dispatch.batchContent(fits.id)).reduce((n, e) => n + documentShare(e), 0);
      expect(await code(() => s.operator.splitBatch(fits.id, { maxBytes: whole }, s.clock.now()))).toBe("E_NOTHING");
      expect((await s.operator.splitBatch(fits.id, { maxBytes: whole - 1 }, s.clock.now())).length).toBe(2);
    });

    test("refusals: open/leased/delivered batches, a piece count of one, a bad --at, two options", async () => {
      const s = await fresh();
      const { id, events } = await sealedBatch(s, 2);
      expect(await code(() => s.operator.splitBatch(id, { maxEvents: 5 }, T0))).toBe("E_NOTHING");
      expect(await code(() => s.operator.splitBatch(id, { at: 9999 }, T0))).toBe("E_NOT_FOUND");
      expect(await code(() => s.operator.splitBatch(id, { at: events[0] }, T0))).toBe("E_NOTHING");
      expect(await code(() => s.operator.splitBatch(id, { maxEvents: 1, maxBytes: 5 }, T0))).toBe("E_USAGE");
      expect(await code(() => s.operator.splitBatch(id, { maxEvents: 0 }, T0))).toBe("E_USAGE");
      const [r] = await s.intake.enqueueAll(
        [ev({ key: "open", copies: [copy("r", "http:d", { quiet_s: 99, max_s: 99 })] })],
        s.clock.now(),
      );
      if (r.status !== "queued") throw new Error(r.status);
      const openId = r.placed[0].batchId;
      expect(await code(() => s.operator.splitBatch(openId, { maxEvents: 1 }, T0))).toBe("E_NOTHING");
      expect((await s.batch(id))?.state).toBe("sealed");
    });
  });

  describe("exclude", () => {
    test("an excluded event stays stored and listed, leaves the document, and the hash is recomputed", async () => {
      const s = await fresh();
      const { id, events } = await sealedBatch(s, 3);
      const before = (await s.batch(id))?.content_hash;
      await s.operator.excludeEvents(id, [events[1]], T0 + 50);
      const after = (await s.batch(id))?.content_hash;
      expect(after).not.toBe(before);
      expect((await s.dispatch.batchContent(id)).map((e) => e.id)).toEqual([events[0], events[2]]);
      expect(after).toBe(contentHash(await s.dispatch.batchContent(id)));
      expect(await s.row("events", { cols: ["excluded_at"], where: { id: events[1] } })).toEqual({
        excluded_at: T0 + 50,
      });
    });

    test("what a worker delivers: the batch's row and the same content, without the excluded event", async () => {
      const s = await fresh();
      const { id, events } = await sealedBatch(s, 3);
      await s.operator.excludeEvents(id, [events[1]], T0 + 50);
      const d = await s.dispatch.deliveryOf(id);
      expect(d?.batch).toEqual((await s.dispatch.getBatch(id)) as NonNullable<typeof d>["batch"]);
      expect(d?.content).toEqual(await s.dispatch.batchContent(id));
      expect(d?.content.map((e) => e.id)).toEqual([events[0], events[2]]);
      expect(await s.dispatch.deliveryOf(id + 1000)).toBeNull();
    });

    test("excluding every event, an event of another batch, or from a delivered batch is refused", async () => {
      const s = await fresh();
      const a = await sealedBatch(s, 2, { key: "a" });
      const b = await sealedBatch(s, 1, { key: "b" });
      expect(await code(() => s.operator.excludeEvents(a.id, a.events, T0))).toBe("E_NOTHING");
      expect(await code(() => s.operator.excludeEvents(a.id, [b.events[0]], T0))).toBe("E_NOT_FOUND");
      expect(await s.count("events", { excluded_at: NOT_NULL })).toBe(0);
    });
  });

  describe("drop", () => {
    test("open, sealed, retry and dead batches drop; leased does not, and one refusal drops none", async () => {
      const s = await fresh();
      const a = (await sealedBatch(s, 1, { key: "a" })).id;
      const b = (await sealedBatch(s, 1, { key: "b" })).id;
      const now = s.clock.now();
      const c = await claim(s, b);
      if (!c) throw new Error("claim");
      expect(await code(() => s.operator.dropBatches([a, b], now))).toBe("E_NOTHING");
      expect((await s.batch(a))?.state).toBe("sealed");
      await s.operator.dropBatches([a], now);
      expect(await s.batch(a)).toMatchObject({ state: "dropped", result: "dropped", delivered_at: now });
    });

    test("dropping the last quarantine batch of a source resolves its config:plugin issue", async () => {
      const s = await fresh();
      const q1 = await quarantine(s, {
        source: "z",
        raw: new Uint8Array([1]),
        headers: {},
        authHeaders: [],
        url: null,
        reason: "plugin_error:E",
      });
      const q2 = await quarantine(s, {
        source: "z",
        raw: new Uint8Array([2]),
        headers: {},
        authHeaders: [],
        url: null,
        reason: "plugin_error:E",
      });
      await s.operator.dropBatches([q1.batchId], T0);
      expect(await s.row("issues", { cols: ["state"] })).toEqual({ state: "open" });
      await s.operator.dropBatches([q2.batchId], T0);
      expect(await s.row("issues", { cols: ["state"] })).toEqual({ state: "resolved" });
    });
  });
}
