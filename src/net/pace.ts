// Pacing for a sender's rate limit: requests through one pacer start at most perSec a second,
// evenly spaced, so a bobbin backfilling a thousand items does not earn a 429 storm.
import { type Clock, systemClock } from "../clock.ts";

export interface Pacer {
  wait(): Promise<void>;
}

/**
 * At most perSec requests per second: the n-th wait() resolves no earlier than start + n/perSec.
 * Each call takes the next free slot at once, so concurrent callers line up in call order; an
 * idle pacer does not bank slots, so no burst follows a quiet spell. `sleep` is injectable for tests.
 */
export function createPacer(
  perSec: number,
  opts: { clock?: Clock; sleep?: (ms: number) => Promise<void> } = {},
): Pacer {
  if (!Number.isFinite(perSec) || perSec <= 0)
    throw new TypeError("createPacer: perSec must be a positive finite number");
  const clock = opts.clock ?? systemClock;
  const sleep = opts.sleep ?? ((ms: number) => Bun.sleep(ms));
  const gapS = 1 / perSec;
  let nextAt = Number.NEGATIVE_INFINITY;
  return {
    async wait() {
      const now = clock.now();
      const at = Math.max(now, nextAt);
      nextAt = at + gapS;
      // Rounded up: a timer that fires a fraction of a millisecond early would start before the slot.
      const ms = Math.ceil((at - now) * 1000);
      if (ms > 0) await sleep(ms);
    },
  };
}
