// Backoff: min(cap, base * 2^(n-1)) plus 0-25 % jitter; Retry-After wins when larger.
import type { Rng } from "../clock.ts";

/** Retry-After is honoured up to an hour. */
export const RETRY_AFTER_CAP_S = 3600;

/** The delay after the n-th failure (n >= 1). */
export function backoffS(n: number, baseS: number, capS: number, rng: Rng): number {
  const step = Math.min(capS, baseS * 2 ** (Math.max(1, n) - 1));
  return step + step * 0.25 * rng.next();
}

/** The delay before the next attempt: the backoff, or Retry-After (capped at 1 h) when larger. */
export function retryDelayS(backoff: number, retryAfterS: number | null): number {
  if (retryAfterS === null || !(retryAfterS > 0)) return backoff;
  return Math.max(backoff, Math.min(retryAfterS, RETRY_AFTER_CAP_S));
}
