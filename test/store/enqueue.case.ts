// The join rule, dedup, tee copies and quarantine, on whatever store fresh() opens, through the
// intake's role (each event one request of its group commit) and the operator's drop.
import { describe, expect, test } from "bun:test";
import { isHookspoolError } from "../../src/errors.ts";
import { contentHash, documentShare, eventMeta } from "../../src/store/content.ts";
import { type EnqueueResult, eventSize, type NewEvent } from "../../src/store/enqueue.ts";
import { copy, ev, payloadOf, T0 } from "../helpers/spool.ts";
import type { StoreUnderTest } from "../helpers/store-under-test.ts";
import type { Suite } from "./suite.ts";

/** The enqueue cases, on whatever store fresh() opens. */
export function enqueueCases({ fresh }: Suite): void {
  function queued(r: EnqueueResult) {
    if (r.status !== "queued") throw new Error(`expected queued, got ${r.status}`);
    return r.placed;
  }

  /** One request of one event, through the intake's group commit, at `now` (default: the clock's). */
  async function enqueue(s: StoreUnderTest, e: NewEvent, now = s.clock.now()): Promise<EnqueueResult> {
    return (await s.intake.enqueueAll([e], now))[0];
  }

  async function metaNumber(s: StoreUnderTest, key: string): Promise<number | null> {
    const v = await s.meta(key);
    if (v === null) return null;
    const n = Number(v);
    return Number.isFinite(n) ? n : null;
  }

  describe("join rule", () => {
    test("the first event opens a batch with the route's window copied in", async () => {
      const s = await fresh();
      const [p] = queued(
        await enqueue(
          s,
          ev({ copies: [copy("r", "http:d", { quiet_s: 7, max_s: 70, max_events: 9, max_bytes: 999 })] }),
        ),
      );
      const b = await s.batch(p.batchId);
      expect(b).toMatchObject({
        state: "open",
        route: "r",
        key: "k",
        destination: "http:d",
        source: "s",
        count: 1,
        first_at: T0,
        last_at: T0,
      });
      expect(b).toMatchObject({
        quiet_s: 7,
        max_s: 70,
        max_events: 9,
        max_bytes: 999,
        sealed_at: null,
        content_hash: null,
      });
    });

    test("events of one (route, key) join the open batch; other keys and routes get their own", async () => {
      const s = await fresh();
      const a = queued(await enqueue(s, ev()))[0];
      s.clock.advance(3);
      const b = queued(await enqueue(s, ev()))[0];
      const otherKey = queued(await enqueue(s, ev({ key: "k2" })))[0];
      const otherRoute = queued(await enqueue(s, ev({ copies: [copy("r2", "http:d")] })))[0];
      expect(b.batchId).toBe(a.batchId);
      expect(new Set([a.batchId, otherKey.batchId, otherRoute.batchId]).size).toBe(3);
      expect(await s.batch(a.batchId)).toMatchObject({ count: 2, first_at: T0, last_at: T0 + 3 });
    });

    test("max_events seals in the enqueue transaction; the next event opens a new batch", async () => {
      const s = await fresh();
      const w = { max_events: 3 };
      const ids = [];
      for (let i = 0; i < 3; i++) ids.push(queued(await enqueue(s, ev({ copies: [copy("r", "http:d", w)] })))[0]);
      expect(ids.map((p) => p.sealed)).toEqual([false, false, true]);
      const sealed = await s.batch(ids[0].batchId);
      expect(sealed).toMatchObject({ state: "sealed", count: 3, sealed_at: T0 });
      expect(sealed?.content_hash).toBe(contentHash(await s.dispatch.batchContent(ids[0].batchId)));
      const next = queued(await enqueue(s, ev({ copies: [copy("r", "http:d", w)] })))[0];
      expect(next.batchId).not.toBe(ids[0].batchId);
      expect((await s.batch(next.batchId))?.state).toBe("open");
    });

    // What one of ev()'s events adds to a document beside its payload: its event_meta entry, the
    // id counted at its widest, and the commas. Payloads of these tests are ASCII.
    const META = eventSize(ev({ payload: "" }), T0);

    test("max_bytes seals when the batch reaches it, counting what the document carries", async () => {
      const s = await fresh();
      const w = { max_bytes: 2 * (50 + META) };
      const a = queued(await enqueue(s, ev({ payload: payloadOf(50), copies: [copy("r", "http:d", w)] })))[0];
      const b = queued(await enqueue(s, ev({ payload: payloadOf(50), copies: [copy("r", "http:d", w)] })))[0];
      expect(b.batchId).toBe(a.batchId);
      expect(await s.batch(a.batchId)).toMatchObject({ state: "sealed", bytes: w.max_bytes, count: 2 });
    });

    test("pre-join seal: an event that would overflow max_bytes seals the open batch and opens a new one", async () => {
      const s = await fresh();
      const w = { max_bytes: 100 + META };
      const a = queued(await enqueue(s, ev({ payload: payloadOf(80), copies: [copy("r", "http:d", w)] })))[0];
      s.clock.advance(1);
      const b = queued(await enqueue(s, ev({ payload: payloadOf(30), copies: [copy("r", "http:d", w)] })))[0];
      expect(b.batchId).not.toBe(a.batchId);
      const first = await s.batch(a.batchId);
      expect(first).toMatchObject({ state: "sealed", count: 1, bytes: 80 + META, sealed_at: T0 + 1 });
      // The sealed batch's hash covers only its own event.
      expect((await s.dispatch.batchContent(a.batchId)).map((e) => e.id)).toEqual([a.eventId]);
      expect(await s.batch(b.batchId)).toMatchObject({ state: "open", count: 1, bytes: 30 + META });
    });

    test("one event larger than max_bytes gets a batch of its own, sealed at once", async () => {
      const s = await fresh();
      const w = { max_bytes: 100 + META };
      const a = queued(await enqueue(s, ev({ payload: payloadOf(40), copies: [copy("r", "http:d", w)] })))[0];
      const big = queued(await enqueue(s, ev({ payload: payloadOf(150), copies: [copy("r", "http:d", w)] })))[0];
      expect(big.batchId).not.toBe(a.batchId);
      expect(big.sealed).toBe(true);
      expect((await s.batch(a.batchId))?.state).toBe("sealed");
      expect(await s.batch(big.batchId)).toMatchObject({ state: "sealed", count: 1, bytes: 150 + META });
    });

    test("a raw body that is its payload byte for byte is stored once, and reads back whole everywhere", async () => {
      const s = await fresh();
      const payload = JSON.stringify({ note: "caf\u00e9 \u2603", n: 1 });
      const same = new TextEncoder().encode(payload);
      const padded = new TextEncoder().encode(` ${payload}`);
      const once = queued(await enqueue(s, ev({ key: "once", dedupId: "d1", payload, raw: same })))[0];
      const twice = queued(await enqueue(s, ev({ key: "twice", dedupId: "d2", payload, raw: padded })))[0];
      const none = queued(await enqueue(s, ev({ key: "none", dedupId: "d3", payload, raw: null })))[0];
      const cols = ["raw", "raw_is_payload"];
      const stored = async (id: number) => {
        const r = (await s.row("events", { cols, where: { id } })) as {
          raw: Uint8Array | null;
          raw_is_payload: number;
        };
        return { raw: r.raw === null ? null : new TextDecoder().decode(r.raw), once: Number(r.raw_is_payload) };
      };
      expect(await stored(once.eventId)).toEqual({ raw: null, once: 1 });
      expect(await stored(twice.eventId)).toEqual({ raw: ` ${payload}`, once: 0 });
      expect(await stored(none.eventId)).toEqual({ raw: null, once: 0 });
      // Every reader of the raw body gets the bytes that came: show --payload, export, route test.
      const text = (b: Uint8Array | null | undefined) => (b ? new TextDecoder().decode(b) : null);
      const shown = async (batchId: number) => text((await s.operator.batchPayloads(batchId))[0].raw);
      expect([await shown(once.batchId), await shown(twice.batchId), await shown(none.batchId)]).toEqual([
        payload,
        ` ${payload}`,
        null,
      ]);
      const exported: Record<string, string | null> = {};
      for await (const r of s.operator.exportBatches({}))
        exported[String(r.batch.key)] = r.events[0].raw_base64
          ? Buffer.from(r.events[0].raw_base64, "base64").toString()
          : null;
      expect(exported).toEqual({ once: payload, twice: ` ${payload}`, none: null });
      const requests = await s.operator.storedRequests({ since: 0, limit: 10 });
      expect(requests.map((r) => text(r.raw))).toEqual([payload, ` ${payload}`, null]);
    });

    test(
      "size is the event's share of the document: its payload and event_meta (kept headers, dedup id, type), " +
        "never the raw body's length",
      async () => {
        const s = await fresh();
        const raw = new TextEncoder().encode(`  ${JSON.stringify({ a: 1 })}  `);
        const a = queued(await enqueue(s, ev({ payload: '{"a":1}', raw })))[0];
        const b = queued(await enqueue(s, ev({ key: "k2", payload: '{"a":1}', raw: null })))[0];
        const kept = ev({
          key: "k3",
          payload: '{"a":1}',
          dedupId: "delivery-\u00e9-1",
          eventType: "push",
          headers: { "X-GitHub-Event": "push", "X-Note": "caf\u00e9" },
        });
        const c = queued(await enqueue(s, kept))[0];
        expect(await s.row("events", { cols: ["size"], where: { id: a.eventId } })).toEqual({ size: 7 + META });
        expect(await s.row("events", { cols: ["size"], where: { id: b.eventId } })).toEqual({ size: 7 + META });
        // Exactly what a document of it carries, but for the id, counted at its widest.
        const [stored] = await s.dispatch.batchContent(c.batchId);
        const exact = documentShare(stored);
        const widest = String(Number.MAX_SAFE_INTEGER).length - String(stored.id).length;
        expect(await s.row("events", { cols: ["size"], where: { id: c.eventId } })).toEqual({ size: exact + widest });
        expect(exact).toBe(Buffer.byteLength(`,${stored.payload},${JSON.stringify(eventMeta(stored))}`));
      },
    );

    test(
      "no document is larger than max_bytes plus its one event: " +
        "batches of kept headers and long ids stay within max_bytes",
      async () => {
        const s = await fresh();
        const w = { max_bytes: 2000 };
        const ids: number[] = [];
        for (let i = 0; i < 40; i++) {
          const e = ev({
            payload: payloadOf(20 + i),
            dedupId: `d-${"x".repeat(i * 5)}`,
            headers: { "X-Kept": "v".repeat(i * 9) },
            copies: [copy("r", "http:d", w)],
          });
          ids.push(queued(await enqueue(s, e))[0].batchId);
        }
        for (const id of new Set(ids)) {
          const content = await s.dispatch.batchContent(id);
          const delivered = content.reduce((n, e) => n + documentShare(e), 0);
          if (content.length > 1) expect(delivered).toBeLessThanOrEqual(w.max_bytes);
          expect((await s.batch(id))?.bytes).toBeGreaterThanOrEqual(delivered);
        }
      },
    );

    test("a wall clock stepping back never rewrites last_at or received_at", async () => {
      const s = await fresh();
      const a = queued(await enqueue(s, ev()))[0];
      s.clock.advance(10);
      await enqueue(s, ev());
      s.clock.advance(-7);
      const c = queued(await enqueue(s, ev()))[0];
      expect(await s.batch(a.batchId)).toMatchObject({ first_at: T0, last_at: T0 + 10, count: 3 });
      expect(await s.row("events", { cols: ["received_at"], where: { id: c.eventId } })).toEqual({
        received_at: T0 + 3,
      });
    });

    test("the payload is stored byte for byte and the meta clocks move", async () => {
      const s = await fresh();
      const payload = '{"id": 12345678901234567890, "b" : [1,2]}';
      const p = queued(await enqueue(s, ev({ payload, source: "github" })))[0];
      expect(await s.row("events", { cols: ["payload"], where: { id: p.eventId } })).toEqual({ payload });
      expect(await metaNumber(s, "last_enqueue_at")).toBe(T0);
      expect(await metaNumber(s, "source:github:last_event_at")).toBe(T0);
    });

    test("bad input is refused before anything is written", async () => {
      const s = await fresh();
      const bad = [
        ev({ key: "" }),
        ev({ key: "x".repeat(513) }),
        ev({ payload: "{not json" }),
        ev({ copies: [] }),
        ev({ copies: [copy("r", "quarantine")] }),
        ev({ copies: [copy("r", "http:d"), copy("t", "http:d", {}, true)] }),
        ev({ copies: [copy("t", "http:d", {}, true)] }),
        ev({
          copies: [copy("r", "http:d"), ...Array.from({ length: 9 }, (_, i) => copy(`t${i}`, `http:t${i}`, {}, true))],
        }),
      ];
      for (const e of bad) {
        let err: unknown;
        try {
          await enqueue(s, e);
        } catch (x) {
          err = x;
        }
        expect(isHookspoolError(err, "E_INPUT")).toBe(true);
      }
      expect(await s.count("events")).toBe(0);
      expect(await s.count("batches")).toBe(0);
      expect(await metaNumber(s, "last_enqueue_at")).toBeNull();
    });

    test("a 512-byte key is accepted (the bound is inclusive)", async () => {
      const s = await fresh();
      expect((await enqueue(s, ev({ key: "é".repeat(256) }))).status).toBe("queued");
    });
  });

  describe("dedup", () => {
    const dedupCols = ["event_id", "dup_count", "seen_at"];

    test("a repeat inside the window is a duplicate: dup_count grows, nothing else is stored", async () => {
      const s = await fresh();
      const first = queued(await enqueue(s, ev({ dedupId: "d1" })))[0];
      s.clock.advance(100);
      const r = await enqueue(s, ev({ dedupId: "d1" }));
      expect(r).toEqual({ status: "duplicate", eventId: first.eventId });
      expect(await s.count("events")).toBe(1);
      expect(await s.row("dedup", { cols: dedupCols })).toEqual({ event_id: first.eventId, dup_count: 1, seen_at: T0 });
      // Nothing else changes: not the last enqueue, not the source's liveness.
      expect(await s.meta("last_enqueue_at")).toBe(String(T0));
      expect(await s.meta("source:s:last_event_at")).toBe(String(T0));
    });

    test("the window is per source and per id", async () => {
      const s = await fresh();
      await enqueue(s, ev({ dedupId: "d1" }));
      expect((await enqueue(s, ev({ dedupId: "d1", source: "other" }))).status).toBe("queued");
      expect((await enqueue(s, ev({ dedupId: "d2" }))).status).toBe("queued");
      expect((await enqueue(s, ev({ dedupId: null }))).status).toBe("queued");
      expect((await enqueue(s, ev({ dedupId: null }))).status).toBe("queued");
      expect(await s.count("dedup")).toBe(3);
    });

    test("outside the window the id is new again and the row is re-pointed", async () => {
      const s = await fresh();
      await enqueue(s, ev({ dedupId: "d1", dedupWindowS: 600 }));
      s.clock.advance(599);
      expect((await enqueue(s, ev({ dedupId: "d1", dedupWindowS: 600 }))).status).toBe("duplicate");
      s.clock.advance(1);
      const again = queued(await enqueue(s, ev({ dedupId: "d1", dedupWindowS: 600 })))[0];
      expect(await s.row("dedup", { cols: dedupCols })).toEqual({
        event_id: again.eventId,
        dup_count: 0,
        seen_at: T0 + 600,
      });
    });

    test("a hit on a dead batch replays it", async () => {
      const s = await fresh();
      const first = queued(await enqueue(s, ev({ dedupId: "d1" })))[0];
      await s.update(
        "batches",
        { state: "dead", content_hash: "sha256:x", sealed_at: T0, attempts: 5, last_class: "permanent" },
        { id: first.batchId },
      );
      s.clock.advance(50);
      const r = await enqueue(s, ev({ dedupId: "d1" }));
      expect(r).toEqual({ status: "replayed", eventId: first.eventId, batchId: first.batchId });
      expect(await s.batch(first.batchId)).toMatchObject({
        state: "retry",
        attempts: 0,
        next_attempt_at: T0 + 50,
        not_before: T0 + 50,
      });
      expect(await s.count("events")).toBe(1);
    });

    test("a hit on a dropped batch enqueues anew and re-points the row", async () => {
      const s = await fresh();
      const first = queued(await enqueue(s, ev({ dedupId: "d1" })))[0];
      await s.operator.dropBatches([first.batchId], T0);
      s.clock.advance(5);
      const r = await enqueue(s, ev({ dedupId: "d1" }));
      // Queued anew, and said so: the intake answers it 200 queued, not 202.
      expect(r).toMatchObject({ status: "queued", requeued: true });
      const again = queued(r)[0];
      expect(again.eventId).not.toBe(first.eventId);
      expect(again.batchId).not.toBe(first.batchId);
      expect(await s.row("dedup", { cols: ["event_id", "dup_count"] })).toEqual({
        event_id: again.eventId,
        dup_count: 1,
      });
    });
  });

  describe("tee copies", () => {
    const copies = () => [
      copy("r", "http:main"),
      copy("tee-a", "hermes:a", { quiet_s: 0, max_s: 0 }, true),
      copy("tee-b", "script:b", { max_events: 1 }, true),
    ];

    test("every copy is its own event row in its own route's batch, primary first, with its own window", async () => {
      const s = await fresh();
      const placed = queued(await enqueue(s, ev({ copies: copies(), dedupId: "x" })));
      expect(placed.map((p) => [p.route, p.destination, p.tee])).toEqual([
        ["r", "http:main", false],
        ["tee-a", "hermes:a", true],
        ["tee-b", "script:b", true],
      ]);
      expect(placed[0].eventId).toBeLessThan(placed[1].eventId);
      expect(placed[1].eventId).toBeLessThan(placed[2].eventId);
      expect(await s.batch(placed[1].batchId)).toMatchObject({ quiet_s: 0, max_s: 0, route: "tee-a" });
      expect(await s.batch(placed[2].batchId)).toMatchObject({ state: "sealed", max_events: 1 });
      // dedup runs once and points at the primary copy; a duplicate makes no copies
      expect(await s.row("dedup", { cols: ["event_id"] })).toEqual({ event_id: placed[0].eventId });
      expect((await enqueue(s, ev({ copies: copies(), dedupId: "x" }))).status).toBe("duplicate");
      expect(await s.count("events")).toBe(3);
    });

    test("a tee copy joins the open batch of its own (route, key)", async () => {
      const s = await fresh();
      const a = queued(await enqueue(s, ev({ copies: copies() })));
      const b = queued(await enqueue(s, ev({ copies: copies() })));
      expect(b[0].batchId).toBe(a[0].batchId);
      expect(b[1].batchId).toBe(a[1].batchId);
      expect(b[2].batchId).not.toBe(a[2].batchId); // max_events 1 sealed the first
    });
  });

  describe("quarantine", () => {
    test(
      "a dead quarantine batch holds the raw body and no auth header, " + "and opens config:plugin:<source>",
      async () => {
        const s = await fresh();
        const raw = new TextEncoder().encode('{"broken": true}');
        const headers = {
          "X-Hub-Signature-256": "sha256=SECRET",
          "x-github-event": "push",
          Authorization: "Bearer SECRET",
          "Content-Type": "application/json",
        };
        const q = await s.intake.quarantine(
          {
            source: "github",
            raw,
            headers,
            authHeaders: ["x-hub-signature-256"],
            url: null,
            reason: "plugin_error:TypeError",
          },
          s.clock.now(),
        );
        expect(await s.batch(q.batchId)).toMatchObject({
          state: "dead",
          destination: "quarantine",
          key: "quarantine",
          route: "github",
          last_class: "quarantine",
          last_error: "plugin_error:TypeError",
          count: 1,
        });
        const e = (await s.row("events", { cols: ["payload", "raw", "headers"], where: { id: q.eventId } })) as {
          payload: null;
          raw: Uint8Array;
          headers: string;
        };
        expect(e.payload).toBeNull();
        expect(new TextDecoder().decode(e.raw)).toBe('{"broken": true}');
        expect(JSON.parse(e.headers)).toEqual({ "x-github-event": "push", "Content-Type": "application/json" });
        expect(e.headers).not.toContain("SECRET");
        const issue = await s.row("issues", {
          cols: ["kind", "state", "count"],
          where: { fingerprint: "config:plugin:github" },
        });
        expect(issue).toEqual({ kind: "config", state: "open", count: 1 });
        await s.intake.quarantine(
          {
            source: "github",
            raw,
            headers: {},
            authHeaders: [],
            url: null,
            reason: "plugin_error:evil class name; DROP",
          },
          s.clock.now(),
        );
        expect(await s.row("issues", { cols: ["count"], where: { fingerprint: "config:plugin:github" } })).toEqual({
          count: 2,
        });
        expect(await s.row("batches", { cols: ["last_error"], order: "id DESC" })).toEqual({
          last_error: "plugin_error:Error",
        });
      },
    );
  });
}
