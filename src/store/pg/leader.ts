// Exactly one dispatcher runs the maintenance chores and the poll clock at a time: the holder of
// a session-level advisory lock on a connection of its own. When its process dies the server
// ends the session and the lock is free; the next dispatcher to ask takes over.
import type { ReservedSQL } from "bun";
import type { PgSpool } from "./db.ts";

/** The advisory lock key of maintenance (an arbitrary constant: "hookspool maint"). */
const MAINTENANCE_LOCK = 0x686f6f6b6d6169;

/** A held lock's connection is checked at most this often (a server restart ends the session, and the lock with it). */
const CHECK_EVERY_S = 1;

export class MaintenanceLock {
  private conn: ReservedSQL | null = null;
  private checkedAt = Number.NEGATIVE_INFINITY;

  constructor(
    private readonly spool: PgSpool,
    private readonly holder: string,
  ) {}

  get held(): boolean {
    return this.conn !== null;
  }

  /**
   * Try to take the lock; true while this process holds it. Records the holder. A held lock's
   * session is checked when `fresh` (maintenance's round) and otherwise at most every second
   * (the tick's poll clock, whose steps are safe under a second leader: each locks its row).
   */
  async tryTake(now: number, fresh = false): Promise<boolean> {
    if (this.conn && !fresh && Math.abs(now - this.checkedAt) < CHECK_EVERY_S) return true;
    if (this.conn) {
      try {
        await this.conn`SELECT 1`;
        this.checkedAt = now;
        return true;
      } catch {
        // The session is gone, and the lock with it: another dispatcher may hold it by now.
        this.drop();
      }
    }
    const conn = await this.spool.sql.reserve();
    const [r] = await conn`SELECT pg_try_advisory_lock(${MAINTENANCE_LOCK}::bigint) AS ok`;
    if (!r.ok) {
      conn.release();
      return false;
    }
    this.conn = conn;
    this.checkedAt = now;
    await conn`INSERT INTO meta (key, value) VALUES ('maintenance_holder', ${JSON.stringify({ holder: this.holder, since: now })})
        ON CONFLICT (key) DO UPDATE SET value = excluded.value`;
    return true;
  }

  private drop(): void {
    try {
      this.conn?.release();
    } catch {
      // already unusable
    }
    this.conn = null;
  }

  /** Give it up (a clean stop). */
  async release(): Promise<void> {
    if (!this.conn) return;
    try {
      await this.conn`SELECT pg_advisory_unlock(${MAINTENANCE_LOCK}::bigint)`;
    } finally {
      this.conn.release();
      this.conn = null;
    }
  }
}

/** Who holds maintenance, as the last holder recorded it (status shows it). */
export async function maintenanceHolder(spool: PgSpool): Promise<{ holder: string; since: number } | null> {
  const [r] = await spool.sql`SELECT value FROM meta WHERE key = 'maintenance_holder'`;
  return r ? (JSON.parse(String(r.value)) as { holder: string; since: number }) : null;
}
