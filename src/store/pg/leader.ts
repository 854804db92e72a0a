// Exactly one dispatcher runs the maintenance chores and the poll clock at a time: the holder of
// a session-level advisory lock on a connection of its own. When its process dies the server
// ends the session and the lock is free; the next dispatcher to ask takes over.
import type { ReservedSQL } from "bun";
import type { PgSpool } from "./db.ts";

/** The advisory lock key of maintenance (an arbitrary constant: "hookspool maint"). */
const MAINTENANCE_LOCK = 0x686f6f6b6d6169;

export class MaintenanceLock {
  private conn: ReservedSQL | null = null;

  constructor(
    private readonly spool: PgSpool,
    private readonly holder: string,
  ) {}

  get held(): boolean {
    return this.conn !== null;
  }

  /** Try to take the lock (once per tick); true while this process holds it. Records the holder. */
  async tryTake(now: number): Promise<boolean> {
    if (this.conn) return true;
    const conn = await this.spool.sql.reserve();
    const [r] = await conn`SELECT pg_try_advisory_lock(${MAINTENANCE_LOCK}::bigint) AS ok`;
    if (!r.ok) {
      conn.release();
      return false;
    }
    this.conn = conn;
    await conn`INSERT INTO meta (key, value) VALUES ('maintenance_holder', ${JSON.stringify({ holder: this.holder, since: now })})
        ON CONFLICT (key) DO UPDATE SET value = excluded.value`;
    return true;
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
