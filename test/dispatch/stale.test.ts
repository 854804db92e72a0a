// Stale events by the provider's clock, through a real dispatcher on both backends: a batch's
// events go in their versions' order; a route that marks stale events delivers one older than its
// key's last delivered version with "stale": true in event_meta, one that skips them leaves it
// out (kept in the spool), and a batch with nothing left is delivered without a request (result
// "stale"); the floor its first lease fixed holds on every attempt; /metrics counts them once.
import { expect, setDefaultTimeout, test } from "bun:test";
import { outcome } from "../../src/delivery.ts";
import { dispatchCounters, renderDispatchCounters } from "../../src/obs/counters.ts";
import { batchIdOf, fakeDestination, ok, rigOn, type WorldRig } from "../helpers/dispatch.ts";
import { copy } from "../helpers/spool.ts";
import { onBothWorlds } from "../helpers/world.ts";

setDefaultTimeout(30_000);

const CONFIG = `[sources.s]\naction = "http:d"\n`;

interface Doc {
  count: number;
  event_type: string;
  content_hash: string;
  events: { v: number }[];
  event_meta: { id: number; version?: number; stale?: true }[];
}

/** Queue events of key k with these versions (null: none), in one batch sealed by its size. */
async function batchOf(r: WorldRig, rule: "mark" | "skip" | null, versions: (number | null)[]): Promise<number> {
  let id = 0;
  for (const [i, version] of versions.entries()) {
    const trace = { stage: "route", route: "r:http:d", destination: "http:d", ...(rule ? { stale: rule } : {}) };
    id = batchIdOf(
      await r.put("k", "http:d", {
        payload: JSON.stringify({ v: version ?? -i }),
        eventType: `t${i}`,
        version,
        copies: [{ ...copy("r:http:d", "http:d", { quiet_s: 3600, max_s: 3600, max_events: versions.length }), trace }],
      }),
    );
  }
  return id;
}

const docs = (r: WorldRig): Doc[] => r.dests["http:d"].calls.map((c) => JSON.parse(c.body) as Doc);

onBothWorlds((open) => {
  test("mark: in version order, older than the key's last delivered version marked; the floor is fixed", async () => {
    const r = await rigOn(open, CONFIG, [fakeDestination("http:d")]);
    const first = await batchOf(r, "mark", [200]);
    await r.step();
    expect(await r.batch(first)).toMatchObject({ state: "delivered", stale_floor: null, floor_at: r.clock.now() });
    expect(await r.world.rows.get("SELECT * FROM delivered_versions")).toEqual({
      route: "r:http:d",
      key: "k",
      version: 200,
      batch_id: first,
      at: r.clock.now(),
    });
    const second = await batchOf(r, "mark", [300, 100, null, 150]);
    // Its first attempt fails; meanwhile the key's record moves (only a delivery moves it in
    // earnest): the retry still judges the batch against the floor its first lease fixed.
    r.dests["http:d"].answer = () =>
      outcome({ kind: "retry", klass: "transport", reason: "http 503", status: 503, retryAfterS: 5 });
    r.clock.advance(1);
    const leasedAt = r.clock.now();
    await r.step();
    await r.world.rows.run("UPDATE delivered_versions SET version = 1000");
    r.dests["http:d"].answer = () => ok();
    r.clock.advance(120);
    await r.step();
    expect(await r.batch(second)).toMatchObject({ state: "delivered", stale_floor: 200, floor_at: leasedAt });
    const [, a1, a2] = docs(r);
    for (const d of [a1, a2]) {
      // 300 and 100 by version; the event without one keeps its place (third); 150 goes before 300.
      expect(d.events.map((e) => e.v)).toEqual([100, 150, -2, 300]);
      expect(d.event_meta.map((m) => [m.version ?? null, m.stale ?? false])).toEqual([
        [100, true],
        [150, true],
        [null, false],
        [300, false],
      ]);
      expect(d.count).toBe(4);
      // The last event in the document's order is the newest.
      expect(d.event_type).toBe("t0");
    }
    expect(a1.content_hash).toBe(a2.content_hash);
    // The key's record keeps the highest version delivered, never lower.
    expect(await r.world.rows.get("SELECT version, batch_id FROM delivered_versions")).toEqual({
      version: 1000,
      batch_id: first,
    });
    await r.close();
  });

  test("skip: left out of the document, kept in the spool; a batch with nothing left is delivered unsent", async () => {
    const before = { ...dispatchCounters };
    const r = await rigOn(open, CONFIG, [fakeDestination("http:d")]);
    await batchOf(r, "skip", [200]);
    await r.step();
    const mixed = await batchOf(r, "skip", [100, 250, 199]);
    r.clock.advance(1);
    await r.step();
    const [, d] = docs(r);
    expect(d.events.map((e) => e.v)).toEqual([250]);
    expect(d.event_meta.map((m) => m.version)).toEqual([250]);
    expect(d.count).toBe(1);
    // The events left out stay stored, in their batch.
    expect((await r.world.rows.all("SELECT version FROM events WHERE batch_id = ? ORDER BY id", mixed)).length).toBe(3);
    const stale = await batchOf(r, "skip", [240, 10]);
    r.clock.advance(1);
    await r.step();
    // Nothing to send: no request, the batch delivered as stale, its attempt uncounted.
    expect(r.dests["http:d"].calls.length).toBe(2);
    expect(await r.batch(stale)).toMatchObject({ state: "delivered", result: "stale", attempts: 0, stale_floor: 250 });
    expect(await r.attempts(stale)).toMatchObject([{ outcome: "ok", counted: 0, hits: null }]);
    expect(await r.world.rows.get("SELECT version FROM delivered_versions")).toEqual({ version: 250 });
    // The key's queue went on: the next batch is delivered as usual.
    await batchOf(r, "skip", [300]);
    r.clock.advance(1);
    await r.step();
    expect(docs(r).map((x) => x.events.map((e) => e.v))).toEqual([[200], [250], [300]]);
    expect(dispatchCounters.staleSkipped - before.staleSkipped).toBe(4);
    expect(dispatchCounters.staleMarked - before.staleMarked).toBe(0);
    expect(renderDispatchCounters()).toContain('hookspool_stale_events_total{rule="skip"}');
    await r.close();
  });

  test("ties by arrival; an event at the key's last delivered version is not stale", async () => {
    const r = await rigOn(open, CONFIG, [fakeDestination("http:d")]);
    await batchOf(r, "mark", [20, 10, 20, 10, 20]);
    await r.step();
    const [d] = docs(r);
    const ids = d.event_meta.map((m) => m.id);
    const arrival = [...ids].sort((a, b) => a - b);
    // Each version's events in the order they came: the 2nd and 4th (10), then the 1st, 3rd, 5th.
    expect(d.event_meta.map((m) => m.version)).toEqual([10, 10, 20, 20, 20]);
    expect(ids).toEqual([arrival[1], arrival[3], arrival[0], arrival[2], arrival[4]]);
    expect(d.event_type).toBe("t4");
    expect(d.event_meta.some((m) => m.stale)).toBe(false);
    await batchOf(r, "mark", [20, 19.5]);
    r.clock.advance(1);
    await r.step();
    const [, next] = docs(r);
    expect(next.event_meta.map((m) => [m.version, m.stale ?? false])).toEqual([
      [19.5, true],
      [20, false],
    ]);
    await r.close();
  });

  test("off: no event is marked or left out, but the batch is still in version order", async () => {
    const r = await rigOn(open, CONFIG, [fakeDestination("http:d")]);
    await batchOf(r, null, [200]);
    await r.step();
    await batchOf(r, null, [150, 100]);
    r.clock.advance(1);
    await r.step();
    const [, d] = docs(r);
    expect(d.events.map((e) => e.v)).toEqual([100, 150]);
    expect(d.event_meta.some((m) => m.stale)).toBe(false);
    await r.close();
  });
});
