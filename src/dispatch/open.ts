// What a dispatcher does before its first tick: take dispatch.lock (held: exit 3), refuse a
// corrupt database (exit 2; nothing is moved aside or started afresh), apply migrations. The
// dispatcher is the one service that migrates; the intake refuses an older schema.
import type { Clock } from "../clock.ts";
import { openVerified, type Spool } from "../store/db.ts";
import { acquireLock, type FileLock } from "../store/lock.ts";
import { migrate } from "../store/migrate.ts";

export interface DispatchSpool {
  spool: Spool;
  lock: FileLock;
  /** Close the connection, then let the lock go. */
  close(): void;
}

export function openForDispatch(paths: { spoolFile: string; lock: string }, o: { clock: Clock; busyTimeoutS?: number }): DispatchSpool {
  const lock = acquireLock(paths.lock, "another dispatcher (or hookspool migrate)");
  try {
    const spool = openVerified(paths.spoolFile, { create: true, busyTimeoutS: o.busyTimeoutS ?? 30, clock: o.clock });
    try {
      migrate(spool);
    } catch (e) {
      spool.close();
      throw e;
    }
    return {
      spool,
      lock,
      close: () => {
        spool.close();
        lock.release();
      },
    };
  } catch (e) {
    lock.release();
    throw e;
  }
}
