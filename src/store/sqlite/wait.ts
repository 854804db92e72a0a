// Waiting for SQLite's write lock without holding the event loop. bun:sqlite is synchronous, and
// a connection's busy_timeout makes SQLite sleep inside the statement that met the lock: the
// thread that answers HTTP sleeps with it, so one process holding the lock froze /healthz, 404s
// and every other request for as long as the wait. The services' connection runs with
// busy_timeout 0 instead: a write that meets the lock fails at once with SQLITE_BUSY before it
// has done anything (BEGIN IMMEDIATE is its first statement), and the line below tries it again
// after a pause (an awaited timer, so the loop answers meanwhile) until its own wait is spent;
// then it fails with that SQLITE_BUSY, as the connection's wait did. Writes that meet a busy lock
// queue in arrival order, so the one that waited longest commits first and a later one never
// overtakes it; reads never queue (in WAL mode a read does not wait for writers).
//
// A connection that keeps its own busy_timeout (the CLI's helpers, migrate, the source kit) has a
// line with no wait: the statement already waited, and its SQLITE_BUSY is final.

/** SQLITE_BUSY and its extended codes: the lock was held by another connection. */
export function isBusy(e: unknown): boolean {
  const code = (e as { code?: unknown } | null)?.code;
  return typeof code === "string" && (code === "SQLITE_BUSY" || code.startsWith("SQLITE_BUSY_"));
}

/** The first pause after a busy try, and the longest: short, so a lock held for milliseconds costs little. */
const FIRST_PAUSE_MS = 1;
const LONGEST_PAUSE_MS = 20;

export class LockLine {
  private waitMs = 0;
  private tail: Promise<unknown> = Promise.resolve();
  private queued = 0;
  /** Busy tries so far (tests and the bench read it). */
  busyTries = 0;

  /** Wait up to `seconds` for the lock, off the loop (the connection's own busy_timeout must be 0). */
  waitUpTo(seconds: number): void {
    this.waitMs = Math.max(0, seconds * 1000);
  }

  /** Whether this line waits (busy_timeout 0 on the connection) rather than the connection itself. */
  get waits(): boolean {
    return this.waitMs > 0;
  }

  /** Writes waiting for the lock now. */
  get waiting(): number {
    return this.queued;
  }

  /**
   * Run the write `fn` (one or more whole transactions, each starting with BEGIN IMMEDIATE) now
   * when nothing is queued and the lock is free; else in line, tried again until `since` (a
   * performance.now() instant: when the caller's request arrived) plus the wait.
   */
  write<T>(fn: () => T, since: number = performance.now()): Promise<T> {
    if (this.queued === 0) {
      try {
        return Promise.resolve(fn());
      } catch (e) {
        if (!isBusy(e) || !this.waits) return Promise.reject(e);
        this.busyTries++;
      }
    }
    this.queued++;
    const turn = this.tail.then(() => this.retry(fn, since));
    this.tail = turn.catch(() => {});
    return turn.finally(() => {
      this.queued--;
    });
  }

  /** Run the read `fn`; a busy read (a WAL reset, a recovery) is tried again, never in line behind writes. */
  read<T>(fn: () => T): Promise<T> {
    try {
      return Promise.resolve(fn());
    } catch (e) {
      if (!isBusy(e) || !this.waits) return Promise.reject(e);
      this.busyTries++;
      return this.retry(fn, performance.now());
    }
  }

  /**
   * A write that must not wait (the health probe): run now, or "busy" when writes are queued or
   * another connection holds the lock. Any other error is thrown.
   */
  tryNow<T>(fn: () => T): T | "busy" {
    if (this.queued > 0) return "busy";
    try {
      return fn();
    } catch (e) {
      if (isBusy(e) && this.waits) return "busy";
      throw e;
    }
  }

  private async retry<T>(fn: () => T, since: number): Promise<T> {
    let pause = FIRST_PAUSE_MS;
    for (;;) {
      try {
        return fn();
      } catch (e) {
        if (!isBusy(e)) throw e;
        this.busyTries++;
        const left = since + this.waitMs - performance.now();
        if (left <= 0) throw e;
        await Bun.sleep(Math.min(pause, left));
        pause = Math.min(pause * 2, LONGEST_PAUSE_MS);
      }
    }
  }
}
