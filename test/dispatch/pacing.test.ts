// Delivery paced to what a destination accepts: its rate's rolling window (held in the spool, so
// across a restart), a 429 that gates the destination rather than the batch (with Retry-After
// until then; without, a window and then one probe), never a strike toward the breaker, a 404
// that pauses the destination, and fair shares of the dispatcher's slots across destinations.
// On both backends.
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { outcome, type Outcome } from "../../src/delivery.ts";
import { Dispatcher } from "../../src/dispatch/loop.ts";
import { loadConfig } from "../../src/config/load.ts";
import { createLogger } from "../../src/log.ts";
import { seededRng } from "../../src/clock.ts";
import { rateMarginS } from "../../src/pacing.ts";
import { batchIdOf, type FakeDestination, fakeDestination, ok, rigOn, type WorldRig } from "../helpers/dispatch.ts";
import { waitFor } from "../helpers/proc.ts";
import { onBothWorlds } from "../helpers/world.ts";

setDefaultTimeout(30_000);

const BASE = `[sources.s]\naction = "hermes:a"\n`;
const throttled = (retryAfterS: number | null = null): Outcome =>
  outcome({ kind: "retry", klass: "throttle", reason: "http 429", status: 429, retryAfterS });
const delivered = async (r: WorldRig, ids: number[]) => {
  let n = 0;
  for (const id of ids) if ((await r.batch(id)).state === "delivered") n++;
  return n;
};

/**
 * After a tick: wait until `n` deliveries have reached the destinations. On SQLite they have when
 * tick() returns; on PostgreSQL each worker's claim writes a round trip first, so they come after.
 */
const reached = (what: string, n: number, calls: () => number) => waitFor(what, () => calls() >= n, 5_000);

/** A batch for each key to hermes:a, put one after another. */
async function putEach(r: WorldRig, keys: string[], over?: Parameters<WorldRig["put"]>[2]): Promise<number[]> {
  const ids: number[] = [];
  for (const k of keys) ids.push(batchIdOf(await r.put(k, "hermes:a", over)));
  return ids;
}

onBothWorlds((open, backend) => {
  // The order in which one tick's deliveries reach the destination: on SQLite the claim order; on
  // PostgreSQL the order their workers' claim writes return, so there only which ones is compared.
  const started = (ids: number[]) => (backend === "postgres" ? [...ids].sort((x, y) => x - y) : ids);
  describe("a rate", () => {
    const rate = { limit: 3, windowS: 60 };
    const span = rate.windowS + rateMarginS(rate);

    test(
      "at most `limit` deliveries start in any window;" +
        " the rest wait, sealed, in order, and go as the window moves",
      async () => {
        const a = fakeDestination("hermes:a", { maxInflight: 4, rate });
        const r = await rigOn(open, BASE, [a]);
        const ids = await putEach(r, ["A", "B", "C", "D", "E", "F", "G"]);
        await r.step();
        await r.step();
        expect(started(a.calls.map((c) => c.batchId))).toEqual(ids.slice(0, 3));
        expect((await Promise.all(ids.slice(3).map((id) => r.batch(id)))).map((b) => b.state)).toEqual([
          "sealed",
          "sealed",
          "sealed",
          "sealed",
        ]);
        // No attempt row, no retry: waiting for the rate is not a failure.
        expect(await r.attempts(ids[3])).toEqual([]);
        r.clock.advance(span - 1);
        await r.step();
        expect(a.calls).toHaveLength(3);
        r.clock.advance(1.01);
        await r.step();
        expect(started(a.calls.map((c) => c.batchId))).toEqual(ids.slice(0, 6));
        r.clock.advance(span);
        await r.step();
        expect(await delivered(r, ids)).toBe(7);
        // Each attempt holds one hit of the window.
        expect(await r.world.rows.all("SELECT DISTINCT hits FROM attempts")).toEqual([{ hits: 1 }]);
      },
    );

    test("the window lives in the spool: a dispatcher started again within it starts nothing more", async () => {
      const a = fakeDestination("hermes:a", { maxInflight: 4, rate });
      const r = await rigOn(open, BASE, [a]);
      const ids = await putEach(r, ["A", "B", "C", "D"]);
      await r.step();
      expect(a.calls).toHaveLength(3);
      await r.d.stop();
      const loadOptions = { home: r.home, env: {}, cwd: r.home };
      const again = new Dispatcher({
        store: await r.world.dispatch(),
        loaded: loadConfig(loadOptions),
        loadOptions,
        clock: r.clock,
        rng: seededRng(3),
        log: createLogger("dispatch", { clock: r.clock }),
        destinations: () => a,
        host: "testhost",
        pid: 4243,
      });
      await again.tick();
      await again.drain();
      expect(a.calls).toHaveLength(3);
      r.clock.advance(span + 0.01);
      await again.tick();
      await again.drain();
      expect(await delivered(r, ids)).toBe(4);
    });

    test("a 429 answer holds no hit: the receiver did not count it", async () => {
      const a = fakeDestination("hermes:a", { maxInflight: 4, rate });
      a.answer = () => throttled(5);
      const r = await rigOn(open, BASE, [a]);
      const id = batchIdOf(await r.put("A", "hermes:a"));
      await r.step();
      expect((await r.attempts(id))[0]).toMatchObject({ hits: 0, klass: "throttle" });
    });

    test("unwrap: an attempt reserves a hit per event and keeps those it sent", async () => {
      const a = fakeDestination("hermes:a", { maxInflight: 4, rate: { limit: 5, windowS: 60 }, unwrap: true });
      a.answer = (_call, ctx) =>
        outcome({ kind: "ok", reason: "ok", status: 202, eventsDelivered: ctx.events.length, sent: ctx.events.length });
      const r = await rigOn(open, BASE, [a]);
      const big = batchIdOf(await r.put("A", "hermes:a", { window: { quiet_s: 1, max_s: 1 } }));
      await r.put("A", "hermes:a", { window: { quiet_s: 1, max_s: 1 } });
      await r.put("A", "hermes:a", { window: { quiet_s: 1, max_s: 1 } });
      const small = batchIdOf(await r.put("B", "hermes:a", { window: { quiet_s: 1, max_s: 1 } }));
      const next = batchIdOf(await r.put("C", "hermes:a", { window: { quiet_s: 1, max_s: 1 } }));
      const tooBig = (await putEach(r, ["D", "D", "D"], { window: { quiet_s: 1, max_s: 1 } }))[0];
      r.clock.advance(2);
      await r.step();
      // 3 + 1 + 1 = 5 hits: the window is full, and the 3-event batch waits for three.
      expect(started(a.calls.map((c) => c.batchId))).toEqual([big, small, next]);
      expect((await r.attempts(big))[0]).toMatchObject({ hits: 3, events_delivered: 3 });
      expect((await r.batch(tooBig)).state).toBe("sealed");
    });
  });

  describe("a 429 gates the destination, not only the batch", () => {
    test(
      "with Retry-After: no delivery to it starts before then;" + " the batch keeps its place and goes first",
      async () => {
        const a = fakeDestination("hermes:a", { maxInflight: 1 });
        const answers = [throttled(120)];
        a.answer = () => answers.shift() ?? ok();
        const r = await rigOn(open, BASE, [a]);
        const first = batchIdOf(await r.put("A", "hermes:a"));
        const other = batchIdOf(await r.put("B", "hermes:a"));
        await r.step();
        expect((await r.dest("hermes:a")).retry_after_until).toBe(r.t0 + 120);
        expect(await r.batch(first)).toMatchObject({ state: "retry", next_attempt_at: r.t0 + 120 });
        r.clock.advance(119);
        await r.step();
        expect(a.calls).toHaveLength(1);
        r.clock.advance(1);
        await r.step();
        await r.step();
        expect(a.calls.map((c) => c.batchId)).toEqual([first, first, other]);
      },
    );

    test("without one: a full window (61 s without a rate), then one probe, then the rest", async () => {
      const a = fakeDestination("hermes:a", { maxInflight: 4 });
      const answers = [throttled(), ok()];
      a.answer = () => answers.shift() ?? ok();
      const r = await rigOn(open, BASE, [a]);
      const first = batchIdOf(await r.put("A", "hermes:a"));
      await r.step();
      const rest = await putEach(r, ["B", "C", "D"]);
      await r.step();
      r.clock.advance(60);
      await r.step();
      expect(a.calls).toHaveLength(1);
      r.clock.advance(1);
      // The gate has passed: one delivery only, the probe.
      await r.d.tick();
      await reached("the probe", 2, () => a.calls.length);
      expect(a.calls.map((c) => c.batchId)).toEqual([first, first]);
      await r.d.drain();
      expect(await r.dest("hermes:a")).toMatchObject({ throttled_at: null });
      await r.step();
      expect(await delivered(r, [first, ...rest])).toBe(4);
    });

    test("a paced destination waits its rate's window", async () => {
      const a = fakeDestination("hermes:a", { maxInflight: 4, rate: { limit: 30, windowS: 10 } });
      a.answer = () => throttled();
      const r = await rigOn(open, BASE, [a]);
      const id = batchIdOf(await r.put("A", "hermes:a"));
      await r.step();
      expect((await r.batch(id)).next_attempt_at).toBeCloseTo(r.t0 + 10.2);
      expect(await r.dest("hermes:a")).toMatchObject({ throttled_at: r.t0 });
      expect((await r.dest("hermes:a")).throttle_s).toBeCloseTo(10.2);
    });

    test("throttles never trip the breaker nor make a batch poison", async () => {
      const a = fakeDestination("hermes:a", { maxInflight: 4 });
      a.answer = () => throttled();
      const r = await rigOn(open, BASE, [a]);
      const id = batchIdOf(await r.put("A", "hermes:a"));
      for (let i = 0; i < 8; i++) {
        await r.step();
        r.clock.set((await r.batch(id)).next_attempt_at as number);
      }
      expect(a.calls).toHaveLength(8);
      expect(await r.dest("hermes:a")).toMatchObject({ state: "closed", consecutive_failures: 0 });
      expect(await r.batch(id)).toMatchObject({ state: "retry", attempts: 0, last_class: "throttle" });
    });
  });

  describe("a 404 from the gateway", () => {
    test("pauses the destination with an issue that says what to fix; resume delivers at once", async () => {
      const a = fakeDestination("hermes:a", { maxInflight: 4 });
      const answers: Outcome[] = [
        outcome({
          kind: "retry",
          klass: "config",
          reason: "unknown route or profile",
          status: 404,
          detail: 'HTTP 404 (not found): the gateway does not serve route "a"',
          pause: 'the gateway answered 404 for route "a"',
        }),
      ];
      a.answer = () => answers.shift() ?? ok();
      const r = await rigOn(open, BASE, [a]);
      const ids = await putEach(r, ["A", "B"]);
      await r.d.tick();
      await r.d.drain();
      expect(await r.dest("hermes:a")).toMatchObject({
        state: "paused",
        paused_by: 'hookspool (the gateway answered 404 for route "a")',
      });
      const issue = (await r.world.rows.get(
        "SELECT state, last_error FROM issues WHERE fingerprint = 'delivery:hermes:a:paused'",
      )) as { state: string; last_error: string };
      expect(issue.state).toBe("open");
      expect(issue.last_error).toContain('does not serve route "a"');
      expect(issue.last_error).toContain("hookspool resume hermes:a");
      // Nothing else is tried while it is paused, however long.
      const tried = a.calls.length;
      r.clock.advance(3600);
      await r.step();
      expect(a.calls).toHaveLength(tried);
      expect(await r.world.operator.resumeDestination("hermes:a", r.clock.now())).toBe(true);
      expect(await r.world.rows.get("SELECT state FROM issues WHERE fingerprint = 'delivery:hermes:a:paused'")).toEqual(
        {
          state: "resolved",
        },
      );
      await r.step();
      await r.step();
      expect(await delivered(r, ids)).toBe(2);
    });
  });

  describe("a bulk replay", () => {
    test(
      "goes through the destination's rate and fair share:" + " no burst, and live traffic elsewhere keeps its slot",
      async () => {
        const rate = { limit: 2, windowS: 60 };
        const a = fakeDestination("hermes:a", { maxInflight: 4, rate });
        const b = fakeDestination("hermes:b", { maxInflight: 4 });
        a.answer = () => outcome({ kind: "dead", klass: "permanent", reason: "http 422", status: 422 });
        const r = await rigOn(open, `${BASE}[dispatch]\nparallel = 2\n`, [a, b]);
        const dead = await putEach(r, ["A", "B", "C", "D", "E", "F"]);
        for (let i = 0; i < 3; i++) {
          await r.step();
          r.clock.advance(61.5);
        }
        expect((await Promise.all(dead.map((id) => r.batch(id)))).every((b) => b.state === "dead")).toBe(true);
        a.answer = () => ok();
        a.calls.length = 0;
        for (const id of dead) await r.world.operator.replayBatch(id, r.clock.now());
        const live = batchIdOf(await r.put("L", "hermes:b"));
        await r.step();
        // Two slots: one replayed batch (the window allows two, fair share gives a one), one live batch.
        expect(a.calls).toHaveLength(1);
        expect(b.calls.map((c) => c.batchId)).toEqual([live]);
        await r.step();
        await r.step();
        expect(a.calls).toHaveLength(2);
        r.clock.advance(61.5);
        await r.step();
        await r.step();
        expect(a.calls).toHaveLength(4);
      },
    );
  });

  describe("fair shares of the dispatcher", () => {
    /** A destination whose deliveries end only when the test says. */
    function held(name: string, maxInflight: number): FakeDestination & { release(n?: number): void } {
      const d = fakeDestination(name, { maxInflight }) as FakeDestination & { release(n?: number): void };
      const waiting: (() => void)[] = [];
      d.answer = () => new Promise<Outcome>((resolve) => waiting.push(() => resolve(ok())));
      d.release = (n = 1) => {
        for (let i = 0; i < n; i++) waiting.shift()?.();
      };
      return d;
    }

    test("a destination with ready work gets the next free slot, whatever another's backlog", async () => {
      const a = held("hermes:a", 4);
      const b = held("hermes:b", 4);
      const r = await rigOn(open, `${BASE}[dispatch]\nparallel = 4\npoll_s = 3600\n`, [a, b]);
      for (let i = 0; i < 40; i++) await r.put(`a${i}`, "hermes:a");
      await r.d.tick();
      await reached("a's four deliveries", 4, () => a.calls.length);
      expect(a.calls).toHaveLength(4);
      const late = batchIdOf(await r.put("b0", "hermes:b"));
      await r.d.tick();
      expect(b.calls).toHaveLength(0); // every slot is taken
      a.release(1);
      await waitFor("a slot of hermes:a freed", () => (r.d.inflightByDestination().get("hermes:a") ?? 0) < 4, 5_000);
      await r.d.tick();
      await reached("b's delivery", 1, () => b.calls.length);
      expect(b.calls.map((c) => c.batchId)).toEqual([late]);
      expect(a.calls).toHaveLength(4);
      a.release(10);
      b.release(10);
      await r.d.drain();
    });

    test("in one tick, slots go round the destinations with work, fewest in flight first", async () => {
      const a = held("hermes:a", 4);
      const b = held("hermes:b", 4);
      const c = held("hermes:c", 1);
      const r = await rigOn(open, `${BASE}[dispatch]\nparallel = 5\npoll_s = 3600\n`, [a, b, c]);
      for (let i = 0; i < 10; i++) {
        await r.put(`a${i}`, "hermes:a");
        await r.put(`b${i}`, "hermes:b");
        await r.put(`c${i}`, "hermes:c");
      }
      await r.d.tick();
      await reached("the tick's five deliveries", 5, () => a.calls.length + b.calls.length + c.calls.length);
      // c is bounded by its own max_inflight; a and b share the rest.
      expect([a.calls.length, b.calls.length, c.calls.length]).toEqual([2, 2, 1]);
      a.release(10);
      b.release(10);
      c.release(10);
      await r.d.drain();
    });
  });
});
