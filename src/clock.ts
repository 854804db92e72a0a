// The injectable clock and randomness: nothing else reads the wall clock or Math.random.

/** Unix seconds as a float, the unit of every stored timestamp. */
export interface Clock {
  now(): number;
}

export const systemClock: Clock = {
  now: () => Date.now() / 1000,
};

/** A clock tests move by hand. */
export class FakeClock implements Clock {
  constructor(private t = 1_700_000_000) {}
  now(): number {
    return this.t;
  }
  set(t: number): void {
    this.t = t;
  }
  advance(seconds: number): void {
    this.t += seconds;
  }
}

/**
 * The clock a process uses. HOOKSPOOL_TEST_CLOCK_OFFSET_S shifts the wall clock for
 * subprocess tests of clock faults; it is never set in production.
 */
export function processClock(env: Record<string, string | undefined> = process.env): Clock {
  const offset = Number(env.HOOKSPOOL_TEST_CLOCK_OFFSET_S ?? "0");
  if (!Number.isFinite(offset) || offset === 0) return systemClock;
  return { now: () => Date.now() / 1000 + offset };
}

/** A source of uniform numbers in [0, 1). */
export interface Rng {
  next(): number;
}

export const systemRng: Rng = { next: () => Math.random() };

/** A deterministic generator (mulberry32) for tests and the model test. */
export function seededRng(seed: number): Rng {
  let a = seed >>> 0;
  return {
    next() {
      a = (a + 0x6d2b79f5) >>> 0;
      let t = a;
      t = Math.imul(t ^ (t >>> 15), t | 1);
      t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    },
  };
}
