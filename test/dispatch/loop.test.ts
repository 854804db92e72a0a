// The dispatcher's loop, on both backends: FIFO per key, parallel across keys, bounds while
// gated, leases and their recovery, the worker deadline, the fenced late mark, the clock guard.
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { waitFor } from "../helpers/proc.ts";
import { backoffS, retryDelayS } from "../../src/store/backoff.ts";
import { seededRng } from "../../src/clock.ts";
import { type Deadline, outcome } from "../../src/delivery.ts";
import { batchIdOf, down, fakeDestination, ok, rigOn } from "../helpers/dispatch.ts";
import { onBothWorlds } from "../helpers/world.ts";
import type { DispatchStore } from "../../src/store/api.ts";

setDefaultTimeout(30_000);

const BASE = `[sources.s]\naction = "hermes:a"\n`;

/** A store whose sealReady notes how many batches each call sealed, in `shares`. */
function recordingShares(shares: number[]): (st: DispatchStore) => DispatchStore {
  return (st) =>
    new Proxy(st, {
      get(target, prop) {
        const v = Reflect.get(target, prop, target);
        if (prop === "sealReady")
          return async (...args: Parameters<DispatchStore["sealReady"]>) => {
            const sealed = await target.sealReady(...args);
            shares.push(sealed.length);
            return sealed;
          };
        return typeof v === "function" ? v.bind(target) : v;
      },
    });
}

describe("backoff", () => {
  test("min(cap, base * 2^(n-1)) plus 0-25 % jitter; Retry-After wins when larger, capped at 1 h", () => {
    const rng = seededRng(1);
    for (let i = 0; i < 500; i++) {
      const n = 1 + (i % 8);
      const step = Math.min(300, 15 * 2 ** (n - 1));
      const d = backoffS(n, 15, 300, rng);
      expect(d).toBeGreaterThanOrEqual(step);
      expect(d).toBeLessThanOrEqual(step * 1.25);
    }
    const spread = new Set(Array.from({ length: 50 }, () => Math.round(backoffS(1, 15, 300, rng) * 100)));
    expect(spread.size).toBeGreaterThan(10); // jitter is really there
    expect(retryDelayS(20, null)).toBe(20);
    expect(retryDelayS(20, 10)).toBe(20);
    expect(retryDelayS(20, 90)).toBe(90);
    expect(retryDelayS(20, 99999)).toBe(3600);
  });
});

onBothWorlds((open, backend) => {
  describe("FIFO and parallelism", () => {
    test("one key delivers strictly in order, one batch at a time; other keys go in parallel", async () => {
      const a = fakeDestination("hermes:a", { maxInflight: 4 });
      const r = await rigOn(open, BASE, [a]);
      const w = { max_events: 1 };
      const a1 = batchIdOf(await r.put("A", "hermes:a", { window: w }));
      const a2 = batchIdOf(await r.put("A", "hermes:a", { window: w }));
      const b1 = batchIdOf(await r.put("B", "hermes:a", { window: w }));
      const c1 = batchIdOf(await r.put("C", "hermes:a", { window: w }));
      await r.step();
      expect(a.calls.map((c) => c.batchId).sort()).toEqual([a1, b1, c1].sort());
      await r.step();
      expect(a.calls.map((c) => c.batchId)).toContain(a2);
      expect(a.calls.findIndex((c) => c.batchId === a1)).toBeLessThan(a.calls.findIndex((c) => c.batchId === a2));
      for (const id of [a1, a2, b1, c1]) expect((await r.batch(id)).state).toBe("delivered");
    });

    test("a slot that frees claims the next head at once, without waiting for the next tick", async () => {
      const a = fakeDestination("hermes:a", { maxInflight: 1 });
      // An hour between ticks: only the first comes from the schedule.
      const r = await rigOn(open, `${BASE}[dispatch]\npoll_s = 3600\n`, [a]);
      const ids: number[] = [];
      for (let i = 0; i < 6; i++) ids.push(batchIdOf(await r.put("A", "hermes:a", { window: { max_events: 1 } })));
      await r.d.start();
      try {
        await waitFor(
          "the whole key drained",
          async () => {
            for (const id of ids) if ((await r.batch(id)).state !== "delivered") return false;
            return true;
          },
          5_000,
        );
      } finally {
        await r.d.stop();
      }
      // Still one at a time, in order.
      expect(a.calls.map((c) => c.batchId)).toEqual(ids);
    });

    test("a batch is claimed when its quiet window ends, not at the next tick", async () => {
      const a = fakeDestination("hermes:a", { maxInflight: 1 });
      const r = await rigOn(open, `${BASE}[dispatch]\npoll_s = 3600\n`, [a]);
      const id = batchIdOf(await r.put("A", "hermes:a", { window: { quiet_s: 0.2, max_s: 30 } }));
      await r.d.start();
      try {
        // The dispatcher's clock is the rig's: the window ends once it has moved past it.
        r.clock.advance(0.3);
        await waitFor(
          "the batch delivered after its quiet window",
          async () => (await r.batch(id)).state === "delivered",
          3_000,
        );
      } finally {
        await r.d.stop();
      }
    });

    test(
      "nextReadyAt: the earliest future end of a window or retry," + " never one already past or an immediate window",
      async () => {
        const r = await rigOn(open, BASE, [fakeDestination("hermes:a")]);
        expect(await r.store.nextReadyAt(r.t0)).toBeNull();
        await r.put("A", "hermes:a");
        expect(await r.store.nextReadyAt(r.t0)).toBeNull();
        await r.put("B", "hermes:a", { window: { quiet_s: 5, max_s: 60 } });
        await r.put("C", "hermes:a", { window: { quiet_s: 30, max_s: 2 } });
        expect(await r.store.nextReadyAt(r.t0)).toBe(r.t0 + 2);
        expect(await r.store.nextReadyAt(r.t0 + 3)).toBe(r.t0 + 5);
        expect(await r.store.nextReadyAt(r.t0 + 5)).toBeNull();
      },
    );

    test(
      "anyReadyNow: true once an open batch's window is over or" + " it has none, false while every window runs",
      async () => {
        const r = await rigOn(open, BASE, [fakeDestination("hermes:a")]);
        expect(await r.store.anyReadyNow(r.t0)).toBe(false);
        await r.put("B", "hermes:a", { window: { quiet_s: 5, max_s: 60 } });
        expect(await r.store.anyReadyNow(r.t0)).toBe(false);
        expect(await r.store.anyReadyNow(r.t0 + 5)).toBe(true);
        await r.put("A", "hermes:a");
        expect(await r.store.anyReadyNow(r.t0)).toBe(true);
      },
    );

    test("max_inflight and dispatch.parallel cap what one tick claims", async () => {
      const a = fakeDestination("hermes:a", { maxInflight: 2 });
      const r = await rigOn(open, `${BASE}[dispatch]\nparallel = 3\n`, [a]);
      for (const k of ["A", "B", "C", "D"]) await r.put(k, "hermes:a");
      // One tick, and the deliveries it started (a later tick would claim more: none runs here).
      await r.d.tick();
      await r.d.drain();
      expect(a.calls.length).toBe(2);
      const b = fakeDestination("hermes:b", { maxInflight: 9 });
      const r2 = await rigOn(open, `${BASE}[dispatch]\nparallel = 3\n`, [b]);
      for (const k of ["A", "B", "C", "D", "E"]) await r2.put(k, "hermes:b");
      await r2.d.tick();
      await r2.d.drain();
      expect(b.calls.length).toBe(3);
    });

    test(
      "while the gate is closed nothing is attempted and batches" + " stay bounded; on resume they drain in order",
      async () => {
        const a = fakeDestination("hermes:a", { maxInflight: 1 });
        const r = await rigOn(open, BASE, [a]);
        await r.world.operator.pauseDestination("hermes:a", "test", r.t0);
        for (let i = 0; i < 23; i++)
          await r.put("A", "hermes:a", { window: { quiet_s: 600, max_s: 600, max_events: 5 } });
        for (let i = 0; i < 5; i++) await r.step();
        expect(a.calls.length).toBe(0);
        expect(await r.world.rows.get("SELECT COUNT(*) AS n FROM attempts")).toEqual({ n: 0 });
        const counts = (await r.world.rows.all("SELECT count FROM batches ORDER BY id")).map((b) => b.count);
        expect(counts).toEqual([5, 5, 5, 5, 3]);
        expect(await r.world.operator.resumeDestination("hermes:a", r.clock.now())).toBe(true);
        for (let i = 0; i < 6; i++) await r.step();
        expect(a.calls.map((c) => c.batchId)).toEqual([1, 2, 3, 4]); // the fifth is still open (quiet window)
      },
    );
  });

  describe("leases", () => {
    // At its start SQLite's dispatcher takes every lease (the flock says no other runs); on
    // PostgreSQL other dispatchers may be live, so only expired leases are recovered (api.ts).
    test.skipIf(backend === "postgres")(
      "startup recovers every leased row of a dead process: retry, due now, 'lease expired'",
      async () => {
        const a = fakeDestination("hermes:a");
        const r = await rigOn(open, BASE, [a]);
        const id = batchIdOf(await r.put("A", "hermes:a"));
        await r.d.tick(); // seals
        await r.d.drain();
        expect((await r.batch(id)).state).toBe("delivered");
        const id2 = batchIdOf(await r.put("B", "hermes:a"));
        await r.world.rows.run(
          "UPDATE batches SET state = 'sealed', sealed_at = ?, content_hash = 'sha256:x' WHERE id = ?",
          r.t0,
          id2,
        );
        // A dispatcher of another process (gone since) claims it.
        const dead = await r.world.dispatch();
        const [c] = await dead.claimBatches([
          {
            batchId: id2,
            destination: "hermes:a",
            now: r.t0,
            leaseUntil: r.t0 + 9999,
            host: "deadhost",
            pid: 1,
            route: "r:hermes:a",
            key: "B",
          },
        ]);
        expect(c).not.toBeNull();
        r.d.start();
        await r.d.stop();
        expect(await r.batch(id2)).toMatchObject({ state: "retry", last_error: "lease expired", attempts: 0 });
        expect((await r.attempts(id2))[0]).toMatchObject({ outcome: "retry", error: "lease expired", counted: 0 });
      },
    );

    test("the worker aborts at lease_until - 5 s: a transport failure, not a lost lease", async () => {
      const slow = fakeDestination("hermes:slow", { timeoutS: 0.2 });
      slow.answer = (_call, ctx) =>
        new Promise((resolve) => {
          ctx.deadline.signal.addEventListener("abort", () =>
            resolve(outcome({ kind: "retry", klass: "transport", reason: "timeout" })),
          );
        });
      const r = await rigOn(open, `${BASE}[dispatch]\nlease_grace_s = 5\n`, [slow]);
      const id = batchIdOf(await r.put("A", "hermes:slow"));
      const t = performance.now();
      await r.step();
      expect(performance.now() - t).toBeLessThan(2000);
      expect(await r.batch(id)).toMatchObject({ state: "retry", last_class: "transport" });
      expect((await r.attempts(id))[0]).toMatchObject({ outcome: "retry", klass: "transport" });
    });

    test("the attempt's one deadline is timeout_s when that comes before the worker deadline", async () => {
      const slow = fakeDestination("hermes:slow", { timeoutS: 0.3 });
      const seen: Deadline[] = [];
      slow.answer = (_call, ctx) =>
        new Promise((resolve) => {
          seen.push(ctx.deadline);
          ctx.deadline.signal.addEventListener("abort", () => resolve(ctx.deadline.outcome()));
        });
      const r = await rigOn(open, `${BASE}[dispatch]\nlease_grace_s = 30\n`, [slow]);
      const id = batchIdOf(await r.put("A", "hermes:slow"));
      const t = performance.now();
      await r.step();
      expect(performance.now() - t).toBeLessThan(2000);
      expect(seen).toHaveLength(1);
      expect(seen[0].cause).toBe("timeout");
      expect(seen[0].budgetS).toBeCloseTo(0.3, 5);
      expect((await r.attempts(id))[0]).toMatchObject({
        outcome: "retry",
        klass: "transport",
        error: expect.stringContaining("timeout"),
      });
    });

    // The loop's rule, the same on both backends; on SQLite now_eff follows the test's clock (on
    // PostgreSQL it is the server's, which the test cannot step).
    test.skipIf(backend === "postgres")(
      "the search for expired leases runs once per poll_s at most, however often the dispatcher ticks",
      async () => {
        let searches = 0;
        const counting = (s: DispatchStore): DispatchStore =>
          new Proxy(s, {
            get(target, prop) {
              const v = Reflect.get(target, prop, target);
              if (prop === "recoverLeases")
                return (...args: Parameters<DispatchStore["recoverLeases"]>) => {
                  searches++;
                  return target.recoverLeases(...args);
                };
              return typeof v === "function" ? v.bind(target) : v;
            },
          });
        const r = await rigOn(open, `${BASE}[dispatch]\npoll_s = 1\n`, [fakeDestination("hermes:a")], {
          wrapStore: counting,
        });
        for (let i = 0; i < 5; i++) await r.d.tick();
        expect(searches).toBe(1);
        r.clock.advance(0.5);
        await r.d.tick();
        expect(searches).toBe(1);
        r.clock.advance(0.5);
        await r.d.tick();
        expect(searches).toBe(2);
        // A clock stepped back searches again at once.
        r.clock.advance(-30);
        await r.d.tick();
        expect(searches).toBe(3);
      },
    );

    test("a backlog of ready batches is sealed a share per tick, the tick running again until all are", async () => {
      const shares: number[] = [];
      const recording = recordingShares(shares);
      const a = fakeDestination("hermes:a", { maxInflight: 8 });
      // An hour between scheduled ticks: every share after the first comes from the tick itself.
      const r = await rigOn(
        open,
        `${BASE}[dispatch]
poll_s = 3600
parallel = 8
`,
        [a],
        {
          wrapStore: recording,
          sealPerTick: 2,
        },
      );
      const ids: number[] = [];
      for (let i = 0; i < 7; i++) ids.push(batchIdOf(await r.put(`k${i}`, "hermes:a")));
      await r.d.tick();
      // Shares of at most two, until one came back short: nothing left to seal.
      expect(shares.slice(0, 4)).toEqual([2, 2, 2, 1]);
      expect(shares.every((n) => n <= 2)).toBe(true);
      for (const id of ids) expect((await r.batch(id)).state).not.toBe("open");
      await r.d.drain();
      for (const id of ids) expect((await r.batch(id)).state).toBe("delivered");
      await r.close();
    });

    test("a backlog's first share is what the free slots take twice over; the shares after it are full", async () => {
      const shares: number[] = [];
      const sealedAtFirstCall: number[] = [];
      const recording = recordingShares(shares);
      const a = fakeDestination("hermes:a", { maxInflight: 8 });
      const held: ((v: ReturnType<typeof ok>) => void)[] = [];
      // The first deliveries wait, each noting how many batches were sealed when it went out.
      a.answer = () => {
        sealedAtFirstCall.push(shares.reduce((n, x) => n + x, 0));
        return new Promise((resolve) => held.push(resolve));
      };
      const r = await rigOn(
        open,
        `${BASE}[dispatch]
poll_s = 3600
parallel = 3
`,
        [a],
        { wrapStore: recording, sealPerTick: 50 },
      );
      const ids: number[] = [];
      for (let i = 0; i < 70; i++) ids.push(batchIdOf(await r.put(`k${i}`, "hermes:a")));
      const ticked = r.d.tick();
      await waitFor("the first delivery", () => a.calls.length > 0);
      a.answer = () => Promise.resolve(ok());
      for (const release of held) release(ok());
      await ticked;
      // Three free slots: a first share of 8 (twice 3, at least 8); then full shares of 50 until one comes back short.
      // The first delivery went out after that first share alone.
      expect(sealedAtFirstCall[0]).toBe(8);
      expect(shares.slice(0, 3)).toEqual([8, 50, 12]);
      // Three slots a tick (this rig ticks by hand): the rest are delivered over the next ticks.
      for (let i = 0; i < 40; i++) {
        await r.d.drain();
        await r.d.tick();
      }
      await r.d.drain();
      for (const id of ids) expect((await r.batch(id)).state).toBe("delivered");
      // Caught up: the next backlog starts with a small share again.
      shares.length = 0;
      for (let i = 0; i < 20; i++) await r.put(`m${i}`, "hermes:a");
      await r.d.tick();
      expect(shares[0]).toBe(8);
      await r.d.drain();
      await r.close();
    });

    test(
      "a result that arrives after the lease was lost is discarded; " + "the tick never recovers a live worker's lease",
      async () => {
        const a = fakeDestination("hermes:a");
        let release: (v: ReturnType<typeof ok>) => void = () => {};
        a.answer = () => new Promise((resolve) => (release = resolve));
        const r = await rigOn(open, BASE, [a]);
        const id = batchIdOf(await r.put("A", "hermes:a"));
        await r.d.tick();
        // The worker runs on after the tick: its delivery is under way once the receiver has it.
        await waitFor("the delivery under way", () => a.calls.length === 1);
        expect((await r.batch(id)).state).toBe("leased");
        // The clock jumps far past the lease: this dispatcher's tick still leaves its own worker alone.
        r.clock.advance(10_000);
        await r.d.tick();
        expect((await r.batch(id)).state).toBe("leased");
        // Another process's recovery (a restart) takes the lease away; the late result is fenced.
        await (await r.world.dispatch()).recoverLeases({ now: r.clock.now(), startup: true });
        release(ok());
        await r.d.drain();
        expect(await r.batch(id)).toMatchObject({ state: "retry", last_error: "lease expired" });
        expect((await r.attempts(id)).map((x) => x.outcome)).toEqual(["discarded"]);
      },
    );
  });

  describe("the clock guard", () => {
    test("a backwards step makes time stand still: nothing becomes due early and no fact is rewritten", async () => {
      const a = fakeDestination("hermes:a");
      a.answer = () => down();
      const r = await rigOn(open, BASE, [a]);
      const id = batchIdOf(await r.put("A", "hermes:a"));
      await r.step();
      const due = (await r.batch(id)).next_attempt_at as number;
      const before = JSON.stringify(await r.batch(id));
      r.clock.set(r.t0 - 3600);
      await r.step();
      await r.step();
      expect(a.calls.length).toBe(1);
      expect(JSON.stringify(await r.batch(id))).toBe(before);
      expect(await r.world.maintenance.metaNumber("last_tick_at")).toBe(r.t0);
      r.clock.set(due);
      a.answer = () => ok();
      await r.step();
      expect((await r.batch(id)).state).toBe("delivered");
    });

    test("a forward step closes every window at once", async () => {
      const a = fakeDestination("hermes:a");
      const r = await rigOn(open, BASE, [a]);
      const id = batchIdOf(await r.put("A", "hermes:a", { window: { quiet_s: 3600, max_s: 86400 } }));
      await r.step();
      expect((await r.batch(id)).state).toBe("open");
      r.clock.advance(86400);
      await r.step();
      expect(await r.batch(id)).toMatchObject({ state: "delivered", first_at: r.t0 });
    });
  });
});
