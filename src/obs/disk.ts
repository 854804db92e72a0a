// Free space and spool size on the state filesystem (backpressure, spool limits, status).
import { existsSync, statfsSync, statSync } from "node:fs";
import { dirname } from "node:path";

/** Bytes available to an unprivileged writer on the filesystem holding `path`. */
export function diskFreeBytes(path: string): number | null {
  try {
    const s = statfsSync(existsSync(path) ? path : dirname(path));
    return Number(s.bavail) * Number(s.bsize);
  } catch {
    return null;
  }
}

/** The database with its -wal and -shm files. */
export function spoolBytes(dbPath: string): number {
  let total = 0;
  for (const p of [dbPath, `${dbPath}-wal`, `${dbPath}-shm`]) {
    try {
      total += statSync(p).size;
    } catch {
      // a missing -wal or -shm is normal
    }
  }
  return total;
}
