// What makes the dispatcher tick between its poll_s ticks, besides a delivery ending: a timer
// on the next instant a batch becomes ready by itself, and writes by other processes (the intake
// run on its own, a replay from the CLI). SQLite's data_version moves on each of their commits
// and is read from shared memory, so it is looked at every few milliseconds and the spool is
// asked only when it moved.
import type { Spool } from "../store/db.ts";
import { dataVersion } from "../store/meta.ts";

/** How often data_version is read; the dispatcher's reaction time to another process's write. */
export const WATCH_MS = 25;

/** Calls onWrite after another connection committed; returns the function that stops it. */
export function watchWrites(spool: Spool, onWrite: () => void, onError: (e: unknown) => void, everyMs = WATCH_MS): () => void {
  // Read now, before the dispatcher's first tick, so a commit after that tick is never missed.
  let last = read();
  function read(): number | null {
    try {
      return dataVersion(spool);
    } catch (e) {
      onError(e);
      return null;
    }
  }
  const timer = setInterval(() => {
    const v = read();
    if (v === null) return;
    if (last !== null && v !== last) onWrite();
    last = v;
  }, everyMs);
  timer.unref?.();
  return () => clearInterval(timer);
}

/**
 * One timer on the earliest instant a batch becomes ready (a window ends, a retry falls due),
 * within the next tick's horizon; arming a later instant leaves an earlier one be.
 */
export class ReadyTimer {
  private timer: ReturnType<typeof setTimeout> | null = null;
  private at = Number.POSITIVE_INFINITY;

  constructor(private readonly fire: () => void) {}

  arm(at: number, now: number, horizonS: number): void {
    if (at - now >= horizonS) return;
    if (this.timer && at >= this.at) return;
    this.clear();
    this.at = at;
    this.timer = setTimeout(
      () => {
        this.timer = null;
        this.at = Number.POSITIVE_INFINITY;
        this.fire();
      },
      Math.max(0, Math.ceil((at - now) * 1000)) + 2,
    );
  }

  clear(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.at = Number.POSITIVE_INFINITY;
  }
}
