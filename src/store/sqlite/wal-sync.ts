// The intake's commits made durable off the event loop. With synchronous = FULL, SQLite syncs
// the WAL file inside COMMIT: the thread that answers HTTP sleeps for the fsync (milliseconds
// on a busy disk), and nothing else runs meanwhile. In WAL mode that sync is the only thing FULL
// adds to NORMAL (NORMAL still syncs around every checkpoint). So the group commit runs under
// NORMAL and then asks this file's WalSync for an fdatasync of the WAL file on a thread of the
// runtime's pool; the requests of the group are answered when that returns. What was acked is
// as durable as under FULL; the loop reads, verifies and commits the next group while the disk
// works; and the groups committed while one sync ran share the next one.
//
// A sync counts for a commit only if it began after that commit: a group that commits while a
// sync is running waits for the one after it. When the WAL file cannot be held (none yet), the
// commit keeps FULL; when the file held is no longer the one at its path, or a sync failed once
// (after a failed fsync the kernel may report the next one clean though pages were lost), every
// commit of the connection keeps FULL from then on.
import { closeSync, fdatasync, fstatSync, openSync, statSync } from "node:fs";

/** fdatasync(2) of `fd` on the runtime's thread pool, not the event loop. */
export function fdatasyncOffLoop(fd: number): Promise<void> {
  return new Promise((resolve, reject) => fdatasync(fd, (e) => (e ? reject(e) : resolve())));
}

interface Waiting {
  promise: Promise<void>;
  resolve(): void;
  reject(e: unknown): void;
}

function waiting(): Waiting {
  let resolve!: () => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<void>((ok, fail) => {
    resolve = ok;
    reject = fail;
  });
  return { promise, resolve, reject };
}

export class WalSync {
  private fd: number | null = null;
  private ino = -1;
  private dev = -1;
  private running = false;
  /** The commits made while a sync was running: the next sync is theirs. */
  private next: Waiting | null = null;
  /** A sync failed: every commit keeps FULL from then on. */
  private failed = false;
  /** Syncs run, and commits they covered (tests and the bench read them). */
  readonly stats = { syncs: 0, commits: 0 };

  constructor(
    /** The WAL file: the database's path and `-wal`. */
    private readonly walPath: string,
    private readonly sync: (fd: number) => Promise<void> = fdatasyncOffLoop,
  ) {}

  /**
   * Whether the next commit may leave its sync to `durable` (the WAL file is held here and is
   * still the file at its path); false keeps SQLite's own sync in the COMMIT.
   */
  ready(): boolean {
    if (this.failed) return false;
    try {
      const st = statSync(this.walPath);
      if (this.fd !== null) {
        if (st.ino === this.ino && st.dev === this.dev) return true;
        // Another file at the path: SQLite still writes the one it opened, which a sync of the
        // new one would not make durable. From now on the COMMIT syncs.
        this.giveUp();
        return false;
      }
      const fd = openSync(this.walPath, "r");
      const held = fstatSync(fd);
      if (held.ino !== st.ino || held.dev !== st.dev) {
        closeSync(fd);
        return false;
      }
      this.fd = fd;
      this.ino = held.ino;
      this.dev = held.dev;
      return true;
    } catch {
      // No WAL file yet: the next commit may find it. One held and now gone: never again.
      if (this.fd !== null) this.giveUp();
      return false;
    }
  }

  /** Resolves when a sync that began after this call has finished; rejects when it failed. */
  durable(): Promise<void> {
    this.stats.commits++;
    if (!this.running) return this.start();
    this.next ??= waiting();
    return this.next.promise;
  }

  private start(): Promise<void> {
    const fd = this.fd;
    if (fd === null) return Promise.reject(new Error("the WAL file is not held"));
    this.running = true;
    this.stats.syncs++;
    const done = this.sync(fd);
    const settle = (error?: unknown) => {
      this.running = false;
      const after = this.next;
      this.next = null;
      if (!after) return;
      // After a failed sync nothing committed since can be called durable: those requests are refused.
      if (this.failed) after.reject(error);
      else this.start().then(after.resolve, after.reject);
    };
    done.then(
      () => settle(),
      (e) => {
        this.failed = true;
        settle(e);
      },
    );
    return done;
  }

  private giveUp(): void {
    this.failed = true;
    this.release();
  }

  private release(): void {
    if (this.fd === null) return;
    try {
      closeSync(this.fd);
    } catch {
      // already closed
    }
    this.fd = null;
  }

  close(): void {
    this.release();
  }
}
