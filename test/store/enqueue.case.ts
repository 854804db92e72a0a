// The join rule, dedup, tee copies and quarantine against a real WAL file.
import { describe, expect, test } from "bun:test";
import { isHookspoolError } from "../../src/errors.ts";
import { batchContent, contentHash } from "../../src/store/content.ts";
import { enqueue, quarantine } from "../../src/store/enqueue.ts";
import { getMeta, getMetaNumber } from "../../src/store/meta.ts";
import { dropBatches } from "../../src/store/drop.ts";
import { batchRow, copy, ev, payloadOf, T0 } from "../helpers/spool.ts";
import type { TestSpool } from "../helpers/spool.ts";
import type { OpenSpool } from "./suite.ts";

/** The enqueue cases, on whatever store fresh() opens. */
export function enqueueCases(fresh: OpenSpool): void {
  function queued(r: ReturnType<typeof enqueue>) {
    if (r.status !== "queued") throw new Error(`expected queued, got ${r.status}`);
    return r.placed;
  }

  function count(t: TestSpool, table: string): number {
    return (t.spool.db.query(`SELECT COUNT(*) AS n FROM ${table}`).get() as { n: number }).n;
  }

  describe("join rule", () => {
    test("the first event opens a batch with the route's window copied in", () => {
      const t = fresh();
      const [p] = queued(enqueue(t.spool, ev({ copies: [copy("r", "http:d", { quiet_s: 7, max_s: 70, max_events: 9, max_bytes: 999 })] })));
      const b = batchRow(t.spool, p.batchId);
      expect(b).toMatchObject({ state: "open", route: "r", key: "k", destination: "http:d", source: "s", count: 1, first_at: T0, last_at: T0 });
      expect(b).toMatchObject({ quiet_s: 7, max_s: 70, max_events: 9, max_bytes: 999, sealed_at: null, content_hash: null });
    });

    test("events of one (route, key) join the open batch; other keys and routes get their own", () => {
      const t = fresh();
      const a = queued(enqueue(t.spool, ev()))[0];
      t.clock.advance(3);
      const b = queued(enqueue(t.spool, ev()))[0];
      const otherKey = queued(enqueue(t.spool, ev({ key: "k2" })))[0];
      const otherRoute = queued(enqueue(t.spool, ev({ copies: [copy("r2", "http:d")] })))[0];
      expect(b.batchId).toBe(a.batchId);
      expect(new Set([a.batchId, otherKey.batchId, otherRoute.batchId]).size).toBe(3);
      expect(batchRow(t.spool, a.batchId)).toMatchObject({ count: 2, first_at: T0, last_at: T0 + 3 });
    });

    test("max_events seals in the enqueue transaction; the next event opens a new batch", () => {
      const t = fresh();
      const w = { max_events: 3 };
      const ids = [1, 2, 3].map(() => queued(enqueue(t.spool, ev({ copies: [copy("r", "http:d", w)] })))[0]);
      expect(ids.map((p) => p.sealed)).toEqual([false, false, true]);
      const sealed = batchRow(t.spool, ids[0].batchId);
      expect(sealed).toMatchObject({ state: "sealed", count: 3, sealed_at: T0 });
      expect(sealed.content_hash).toBe(contentHash(batchContent(t.spool, ids[0].batchId)));
      const next = queued(enqueue(t.spool, ev({ copies: [copy("r", "http:d", w)] })))[0];
      expect(next.batchId).not.toBe(ids[0].batchId);
      expect(batchRow(t.spool, next.batchId).state).toBe("open");
    });

    test("max_bytes seals when the batch reaches it", () => {
      const t = fresh();
      const w = { max_bytes: 100 };
      const a = queued(enqueue(t.spool, ev({ payload: payloadOf(50), copies: [copy("r", "http:d", w)] })))[0];
      const b = queued(enqueue(t.spool, ev({ payload: payloadOf(50), copies: [copy("r", "http:d", w)] })))[0];
      expect(b.batchId).toBe(a.batchId);
      expect(batchRow(t.spool, a.batchId)).toMatchObject({ state: "sealed", bytes: 100, count: 2 });
    });

    test("pre-join seal: an event that would overflow max_bytes seals the open batch and opens a new one", () => {
      const t = fresh();
      const w = { max_bytes: 100 };
      const a = queued(enqueue(t.spool, ev({ payload: payloadOf(80), copies: [copy("r", "http:d", w)] })))[0];
      t.clock.advance(1);
      const b = queued(enqueue(t.spool, ev({ payload: payloadOf(30), copies: [copy("r", "http:d", w)] })))[0];
      expect(b.batchId).not.toBe(a.batchId);
      const first = batchRow(t.spool, a.batchId);
      expect(first).toMatchObject({ state: "sealed", count: 1, bytes: 80, sealed_at: T0 + 1 });
      // The sealed batch's hash covers only its own event.
      expect(batchContent(t.spool, a.batchId).map((e) => e.id)).toEqual([a.eventId]);
      expect(batchRow(t.spool, b.batchId)).toMatchObject({ state: "open", count: 1, bytes: 30 });
    });

    test("one event larger than max_bytes gets a batch of its own, sealed at once", () => {
      const t = fresh();
      const w = { max_bytes: 100 };
      const a = queued(enqueue(t.spool, ev({ payload: payloadOf(40), copies: [copy("r", "http:d", w)] })))[0];
      const big = queued(enqueue(t.spool, ev({ payload: payloadOf(150), copies: [copy("r", "http:d", w)] })))[0];
      expect(big.batchId).not.toBe(a.batchId);
      expect(big.sealed).toBe(true);
      expect(batchRow(t.spool, a.batchId).state).toBe("sealed");
      expect(batchRow(t.spool, big.batchId)).toMatchObject({ state: "sealed", count: 1, bytes: 150 });
    });

    test("size is len(raw) when the raw body is stored, else len(payload)", () => {
      const t = fresh();
      const raw = new TextEncoder().encode(`  ${JSON.stringify({ a: 1 })}  `);
      const a = queued(enqueue(t.spool, ev({ payload: '{"a":1}', raw })))[0];
      const b = queued(enqueue(t.spool, ev({ key: "k2", payload: '{"a":1}', raw: null })))[0];
      expect(t.spool.db.query("SELECT size FROM events WHERE id = ?").get(a.eventId)).toEqual({ size: raw.length });
      expect(t.spool.db.query("SELECT size FROM events WHERE id = ?").get(b.eventId)).toEqual({ size: 7 });
    });

    test("a wall clock stepping back never rewrites last_at or received_at", () => {
      const t = fresh();
      const a = queued(enqueue(t.spool, ev()))[0];
      t.clock.advance(10);
      enqueue(t.spool, ev());
      t.clock.advance(-7);
      const c = queued(enqueue(t.spool, ev()))[0];
      expect(batchRow(t.spool, a.batchId)).toMatchObject({ first_at: T0, last_at: T0 + 10, count: 3 });
      expect(t.spool.db.query("SELECT received_at FROM events WHERE id = ?").get(c.eventId)).toEqual({ received_at: T0 + 3 });
    });

    test("the payload is stored byte for byte and the meta clocks move", () => {
      const t = fresh();
      const payload = '{"id": 12345678901234567890, "b" : [1,2]}';
      const p = queued(enqueue(t.spool, ev({ payload, source: "github" })))[0];
      expect(t.spool.db.query("SELECT payload FROM events WHERE id = ?").get(p.eventId)).toEqual({ payload });
      expect(getMetaNumber(t.spool, "last_enqueue_at")).toBe(T0);
      expect(getMetaNumber(t.spool, "source:github:last_event_at")).toBe(T0);
    });

    test("bad input is refused before anything is written", () => {
      const t = fresh();
      const bad = [
        ev({ key: "" }),
        ev({ key: "x".repeat(513) }),
        ev({ payload: "{not json" }),
        ev({ copies: [] }),
        ev({ copies: [copy("r", "quarantine")] }),
        ev({ copies: [copy("r", "http:d"), copy("t", "http:d", {}, true)] }),
        ev({ copies: [copy("t", "http:d", {}, true)] }),
        ev({ copies: [copy("r", "http:d"), ...Array.from({ length: 9 }, (_, i) => copy(`t${i}`, `http:t${i}`, {}, true))] }),
      ];
      for (const e of bad) {
        let err: unknown;
        try {
          enqueue(t.spool, e);
        } catch (x) {
          err = x;
        }
        expect(isHookspoolError(err, "E_INPUT")).toBe(true);
      }
      expect(count(t, "events")).toBe(0);
      expect(count(t, "batches")).toBe(0);
      expect(getMetaNumber(t.spool, "last_enqueue_at")).toBeNull();
    });

    test("a 512-byte key is accepted (the bound is inclusive)", () => {
      const t = fresh();
      expect(enqueue(t.spool, ev({ key: "é".repeat(256) })).status).toBe("queued");
    });
  });

  describe("dedup", () => {
    test("a repeat inside the window is a duplicate: dup_count grows, nothing else is stored", () => {
      const t = fresh();
      const first = queued(enqueue(t.spool, ev({ dedupId: "d1" })))[0];
      t.clock.advance(100);
      const r = enqueue(t.spool, ev({ dedupId: "d1" }));
      expect(r).toEqual({ status: "duplicate", eventId: first.eventId });
      expect(count(t, "events")).toBe(1);
      expect(t.spool.db.query("SELECT event_id, dup_count, seen_at FROM dedup").get()).toEqual({ event_id: first.eventId, dup_count: 1, seen_at: T0 });
      // Nothing else changes: not the last enqueue, not the source's liveness.
      expect(getMeta(t.spool, "last_enqueue_at")).toBe(String(T0));
      expect(getMeta(t.spool, "source:s:last_event_at")).toBe(String(T0));
    });

    test("the window is per source and per id", () => {
      const t = fresh();
      enqueue(t.spool, ev({ dedupId: "d1" }));
      expect(enqueue(t.spool, ev({ dedupId: "d1", source: "other" })).status).toBe("queued");
      expect(enqueue(t.spool, ev({ dedupId: "d2" })).status).toBe("queued");
      expect(enqueue(t.spool, ev({ dedupId: null })).status).toBe("queued");
      expect(enqueue(t.spool, ev({ dedupId: null })).status).toBe("queued");
      expect(count(t, "dedup")).toBe(3);
    });

    test("outside the window the id is new again and the row is re-pointed", () => {
      const t = fresh();
      enqueue(t.spool, ev({ dedupId: "d1", dedupWindowS: 600 }));
      t.clock.advance(599);
      expect(enqueue(t.spool, ev({ dedupId: "d1", dedupWindowS: 600 })).status).toBe("duplicate");
      t.clock.advance(1);
      const again = queued(enqueue(t.spool, ev({ dedupId: "d1", dedupWindowS: 600 })))[0];
      expect(t.spool.db.query("SELECT event_id, dup_count, seen_at FROM dedup").get()).toEqual({ event_id: again.eventId, dup_count: 0, seen_at: T0 + 600 });
    });

    test("a hit on a dead batch replays it", () => {
      const t = fresh();
      const first = queued(enqueue(t.spool, ev({ dedupId: "d1" })))[0];
      t.spool.db.run(`UPDATE batches SET state = 'dead', content_hash = 'sha256:x', sealed_at = ${T0}, attempts = 5, last_class = 'permanent' WHERE id = ${first.batchId}`);
      t.clock.advance(50);
      const r = enqueue(t.spool, ev({ dedupId: "d1" }));
      expect(r).toEqual({ status: "replayed", eventId: first.eventId, batchId: first.batchId });
      expect(batchRow(t.spool, first.batchId)).toMatchObject({ state: "retry", attempts: 0, next_attempt_at: T0 + 50, not_before: T0 + 50 });
      expect(count(t, "events")).toBe(1);
    });

    test("a hit on a dropped batch enqueues anew and re-points the row", () => {
      const t = fresh();
      const first = queued(enqueue(t.spool, ev({ dedupId: "d1" })))[0];
      dropBatches(t.spool, [first.batchId], T0);
      t.clock.advance(5);
      const r = enqueue(t.spool, ev({ dedupId: "d1" }));
      // Queued anew, and said so: the intake answers it 200 queued, not 202.
      expect(r).toMatchObject({ status: "queued", requeued: true });
      const again = queued(r)[0];
      expect(again.eventId).not.toBe(first.eventId);
      expect(again.batchId).not.toBe(first.batchId);
      expect(t.spool.db.query("SELECT event_id, dup_count FROM dedup").get()).toEqual({ event_id: again.eventId, dup_count: 1 });
    });
  });

  describe("tee copies", () => {
    const copies = () => [copy("r", "http:main"), copy("tee-a", "hermes:a", { quiet_s: 0, max_s: 0 }, true), copy("tee-b", "script:b", { max_events: 1 }, true)];

    test("every copy is its own event row in its own route's batch, primary first, with its own window", () => {
      const t = fresh();
      const placed = queued(enqueue(t.spool, ev({ copies: copies(), dedupId: "x" })));
      expect(placed.map((p) => [p.route, p.destination, p.tee])).toEqual([
        ["r", "http:main", false],
        ["tee-a", "hermes:a", true],
        ["tee-b", "script:b", true],
      ]);
      expect(placed[0].eventId).toBeLessThan(placed[1].eventId);
      expect(placed[1].eventId).toBeLessThan(placed[2].eventId);
      expect(batchRow(t.spool, placed[1].batchId)).toMatchObject({ quiet_s: 0, max_s: 0, route: "tee-a" });
      expect(batchRow(t.spool, placed[2].batchId)).toMatchObject({ state: "sealed", max_events: 1 });
      // dedup runs once and points at the primary copy; a duplicate makes no copies
      expect(t.spool.db.query("SELECT event_id FROM dedup").get()).toEqual({ event_id: placed[0].eventId });
      expect(enqueue(t.spool, ev({ copies: copies(), dedupId: "x" })).status).toBe("duplicate");
      expect(count(t, "events")).toBe(3);
    });

    test("a tee copy joins the open batch of its own (route, key)", () => {
      const t = fresh();
      const a = queued(enqueue(t.spool, ev({ copies: copies() })));
      const b = queued(enqueue(t.spool, ev({ copies: copies() })));
      expect(b[0].batchId).toBe(a[0].batchId);
      expect(b[1].batchId).toBe(a[1].batchId);
      expect(b[2].batchId).not.toBe(a[2].batchId); // max_events 1 sealed the first
    });
  });

  describe("quarantine", () => {
    test("a dead quarantine batch holds the raw body and no auth header, and opens config:plugin:<source>", () => {
      const t = fresh();
      const raw = new TextEncoder().encode('{"broken": true}');
      const headers = { "X-Hub-Signature-256": "sha256=SECRET", "x-github-event": "push", Authorization: "Bearer SECRET", "Content-Type": "application/json" };
      const q = quarantine(t.spool, { source: "github", raw, headers, authHeaders: ["x-hub-signature-256"], url: null, reason: "plugin_error:TypeError" });
      expect(batchRow(t.spool, q.batchId)).toMatchObject({
        state: "dead",
        destination: "quarantine",
        key: "quarantine",
        route: "github",
        last_class: "quarantine",
        last_error: "plugin_error:TypeError",
        count: 1,
      });
      const e = t.spool.db.query("SELECT payload, raw, headers FROM events WHERE id = ?").get(q.eventId) as { payload: null; raw: Uint8Array; headers: string };
      expect(e.payload).toBeNull();
      expect(new TextDecoder().decode(e.raw)).toBe('{"broken": true}');
      expect(JSON.parse(e.headers)).toEqual({ "x-github-event": "push", "Content-Type": "application/json" });
      expect(e.headers).not.toContain("SECRET");
      const issue = t.spool.db.query("SELECT kind, state, count FROM issues WHERE fingerprint = 'config:plugin:github'").get();
      expect(issue).toEqual({ kind: "config", state: "open", count: 1 });
      quarantine(t.spool, { source: "github", raw, headers: {}, authHeaders: [], url: null, reason: "plugin_error:evil class name; DROP" });
      expect(t.spool.db.query("SELECT count FROM issues WHERE fingerprint = 'config:plugin:github'").get()).toEqual({ count: 2 });
      expect(t.spool.db.query("SELECT last_error FROM batches ORDER BY id DESC LIMIT 1").get()).toEqual({ last_error: "plugin_error:Error" });
    });
  });
}
