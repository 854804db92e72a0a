// Exactly one dispatcher runs the maintenance chores and the poll clock at a time: the holder of
// a session-level advisory lock on a connection of its own. When its process dies the server
// ends the session and the lock is free; the next dispatcher to ask takes over.
import type { ReservedSQL, SQL } from "bun";
import type { PgSpool } from "./db.ts";

/**
 * The advisory lock key of maintenance: an arbitrary constant, "hookmai" in ASCII with its last
 * bit pattern rounded to the nearest double (the key every build has taken), written exactly.
 */
const MAINTENANCE_LOCK = 0x686f6f6b6d6168;

/** A held lock's connection is checked at most this often (a server restart ends the session, and the lock with it). */
const CHECK_EVERY_S = 1;

export class MaintenanceLock {
  /** Its own client of one connection, pinned while held: the lock is that session's. */
  private client: SQL | null = null;
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
    this.client ??= this.spool.single();
    const conn = await this.client.reserve();
    let ok = false;
    try {
      const [r] = await conn`SELECT pg_try_advisory_lock(${MAINTENANCE_LOCK}::bigint) AS ok`;
      ok = r.ok === true;
    } finally {
      if (!ok) conn.release();
    }
    if (!ok) return false;
    this.conn = conn;
    this.checkedAt = now;
    await conn`INSERT INTO meta (key, value)
      VALUES ('maintenance_holder', ${JSON.stringify({ holder: this.holder, since: now })})
        ON CONFLICT (key) DO UPDATE SET value = excluded.value`;
    return true;
  }

  /** Close the session (never hand it back: it may still hold the lock), so the next try starts afresh. */
  private drop(): void {
    const client = this.client;
    this.client = null;
    this.conn = null;
    void client?.close({ timeout: 0 }).catch(() => {});
  }

  /** Give it up (a clean stop). */
  async release(): Promise<void> {
    const { conn, client } = this;
    this.conn = null;
    this.client = null;
    try {
      if (conn) {
        await conn`DELETE FROM meta WHERE key = 'maintenance_holder' AND value::jsonb ->> 'holder' = ${this.holder}`;
        await conn`SELECT pg_advisory_unlock(${MAINTENANCE_LOCK}::bigint)`;
        conn.release();
      }
    } finally {
      await client?.close({ timeout: 0 });
    }
  }
}

/**
 * Who holds maintenance (status shows it): the holder its taker recorded, while a session holds
 * the lock; null when none does (the last holder died and no dispatcher has taken it yet).
 */
export async function maintenanceHolder(spool: PgSpool): Promise<{ holder: string; since: number } | null> {
  const [r] = await spool.sql`SELECT value FROM meta WHERE key = 'maintenance_holder' AND EXISTS (SELECT 1 FROM pg_locks
      WHERE locktype = 'advisory' AND granted AND objsubid = 1
        AND ((classid::bigint << 32) | objid::bigint) = ${MAINTENANCE_LOCK}::bigint)`;
  return r ? (JSON.parse(String(r.value)) as { holder: string; since: number }) : null;
}
