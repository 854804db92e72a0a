// src/net/pace.ts with a FakeClock and an injected sleep: the n-th wait() starts no earlier than
// start + n/perSec, concurrent callers line up, and an idle pacer banks no burst.
import { describe, expect, test } from "bun:test";
import { FakeClock } from "../../src/clock.ts";
import { createPacer } from "../../src/net/pace.ts";

const T0 = 1_700_000_000;

describe("createPacer", () => {
  test("sequential waits are spaced 1/perSec apart", async () => {
    const clock = new FakeClock(T0);
    const pacer = createPacer(4, { clock, sleep: async (ms) => clock.advance(ms / 1000) });
    const at: number[] = [];
    for (let i = 0; i < 5; i++) {
      await pacer.wait();
      at.push(clock.now() - T0);
    }
    expect(at).toEqual([0, 0.25, 0.5, 0.75, 1]);
  });

  test("concurrent callers each take the next slot", async () => {
    const clock = new FakeClock(T0);
    const slept: number[] = [];
    const pacer = createPacer(2, { clock, sleep: async (ms) => void slept.push(ms) });
    await Promise.all(Array.from({ length: 5 }, () => pacer.wait()));
    expect(slept).toEqual([500, 1000, 1500, 2000]);
  });

  test("time spent elsewhere counts, and a quiet spell banks no burst", async () => {
    const clock = new FakeClock(T0);
    const slept: number[] = [];
    const pacer = createPacer(1, { clock, sleep: async (ms) => void (slept.push(ms), clock.advance(ms / 1000)) });
    await pacer.wait();
    clock.advance(0.4);
    await pacer.wait();
    expect(slept).toEqual([600]);
    clock.advance(60);
    await pacer.wait();
    await pacer.wait();
    expect(slept).toEqual([600, 1000]);
  });

  test("the default sleep really waits", async () => {
    const pacer = createPacer(50);
    const started = performance.now();
    for (let i = 0; i < 3; i++) await pacer.wait();
    expect(performance.now() - started).toBeGreaterThanOrEqual(39);
  });

  test("a rate that is not a positive finite number is a TypeError", () => {
    for (const bad of [0, -1, Number.NaN, Number.POSITIVE_INFINITY]) expect(() => createPacer(bad)).toThrow(TypeError);
  });
});
