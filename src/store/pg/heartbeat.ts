// Dispatchers' heartbeats on PostgreSQL, one row each (several share the database), timed by the
// database's clock; and now_eff, the clock guard: max(the database's clock, the latest tick any
// dispatcher recorded), so a host whose clock steps back never moves the spool's time back.
import type { PgSpool } from "./db.ts";
import { advanceMetaTimesPg, metaNumberSql } from "./meta.ts";

export interface DispatcherBeat {
  id: string;
  startedAt: number;
  heartbeatAgeS: number;
  alive: boolean;
  lastTickAt: number;
}

/**
 * now_eff: the database's clock, never behind the latest tick recorded. A meta value that is not
 * a number (written by hand) is read as none, as on SQLite, and the next heartbeat replaces it.
 */
export async function effectiveNowPg(spool: PgSpool): Promise<number> {
  const [r] = await spool.sql`SELECT GREATEST(EXTRACT(EPOCH FROM clock_timestamp())::float8, COALESCE((SELECT ${metaNumberSql(spool.sql, "value")} FROM meta WHERE key = 'last_tick_at'), 0)) AS t`;
  return Number(r.t);
}

/** This dispatcher's heartbeat, and the spool's last tick (never moved back). */
export async function writeHeartbeatPg(spool: PgSpool, id: string, nowEff: number, caughtErrors?: string): Promise<void> {
  await spool.sql.begin(async (tx) => {
    await tx`INSERT INTO dispatchers (id, started_at, heartbeat_at, last_tick_at, caught_errors)
        VALUES (${id}, EXTRACT(EPOCH FROM clock_timestamp())::float8, EXTRACT(EPOCH FROM clock_timestamp())::float8, ${nowEff}, ${caughtErrors ?? null})
        ON CONFLICT (id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at, last_tick_at = excluded.last_tick_at, caught_errors = COALESCE(excluded.caught_errors, dispatchers.caught_errors)`;
    await advanceMetaTimesPg(tx, ["last_tick_at"], nowEff);
  });
}

/** A dispatcher that stops cleanly takes its row away (one killed is shown stale until pruned). */
export async function forgetDispatcherPg(spool: PgSpool, id: string): Promise<void> {
  await spool.sql`DELETE FROM dispatchers WHERE id = ${id}`;
}

/** Every dispatcher that beat, with how long ago by the database's clock; one older than `staleS` is not alive. */
export async function dispatchersPg(spool: PgSpool, staleS: number): Promise<DispatcherBeat[]> {
  const rows = (await spool.sql`SELECT id, started_at, last_tick_at, EXTRACT(EPOCH FROM clock_timestamp())::float8 - heartbeat_at AS age FROM dispatchers ORDER BY id`) as Record<string, unknown>[];
  return rows.map((r) => {
    const age = Math.max(0, Number(r.age));
    return { id: String(r.id), startedAt: Number(r.started_at), heartbeatAgeS: age, alive: age <= staleS, lastTickAt: Number(r.last_tick_at) };
  });
}
