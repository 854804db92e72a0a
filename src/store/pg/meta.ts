// meta's times on PostgreSQL (last_enqueue_at, a source's last_event_at, last_tick_at): moved
// forward only, by several writers at once. A value that is not a number (written by hand) is
// read as none, as on SQLite, and the next write replaces it.
// Dispatchers' heartbeats on PostgreSQL, one row each (several share the database), timed by the
// database's clock; and now_eff, the clock guard: max(the database's clock, the latest tick any
// dispatcher recorded), so a host whose clock steps back never moves the spool's time back.
import type { Tx, PgSpool } from "./db.ts";
import { PROBE_PREFIX, probeKey, probesOf, probeValue, type ProbeRecord } from "../probes.ts";
import { CONSUMER_PREFIX, consumerKey, consumersOf, type PullConsumer } from "../pull.ts";

/** What a stored value must look like to be read as a number. */
const NUMERIC = "'^[-+]?[0-9]+([.][0-9]*)?([eE][-+]?[0-9]+)?$'";

/** The value of meta[key] (inside a statement over meta) as a number, or NULL: the SQL text. */
export const metaNumberText = (column: string) => `CASE WHEN ${column} ~ ${NUMERIC} THEN ${column}::float8 END`;

/** metaNumberText as a fragment of a tagged-template statement. */
export const metaNumberSql = (tx: Tx, column: string) => tx.unsafe(metaNumberText(column));

/** Each meta[key] = max(meta[key], at), in the caller's transaction. */
export async function advanceMetaTimesPg(tx: Tx, keys: readonly string[], at: number): Promise<void> {
  await tx`INSERT INTO meta (key, value) SELECT k, ${String(at)} FROM unnest(${keys}::text[]) AS k
      ON CONFLICT (key) DO UPDATE SET value =
        GREATEST(${metaNumberSql(tx, "meta.value")}, excluded.value::float8)::text`;
}

/** The spool's instance id, minted by the first migration. */
export async function instanceIdPg(spool: PgSpool): Promise<string> {
  const [r] = await spool.sql`SELECT value FROM meta WHERE key = 'instance_id'`;
  if (!r) throw new Error("meta.instance_id is missing: the database was not migrated");
  return String(r.value);
}

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
  const [r] = await spool.sql`SELECT ${nowEffSql(spool.sql)} AS t`;
  return Number(r.t);
}

/** now_eff as an expression, for a statement that reads it beside other facts (an outcome transaction's). */
export const nowEffSql = (tx: Tx) =>
  tx.unsafe(`GREATEST(EXTRACT(EPOCH FROM clock_timestamp())::float8,
      COALESCE((SELECT ${metaNumberText("value")} FROM meta WHERE key = 'last_tick_at'), 0))`);

/** This dispatcher's heartbeat, and the spool's last tick (never moved back). */
export async function writeHeartbeatPg(
  spool: PgSpool,
  id: string,
  nowEff: number,
  caughtErrors?: string,
): Promise<void> {
  await spool.sql.begin(async (tx) => {
    await tx`INSERT INTO dispatchers (id, started_at, heartbeat_at, last_tick_at, caught_errors)
        VALUES (${id}, EXTRACT(EPOCH FROM clock_timestamp())::float8, EXTRACT(EPOCH
          FROM clock_timestamp())::float8, ${nowEff}, ${caughtErrors ?? null})
        ON CONFLICT (id) DO UPDATE
          SET heartbeat_at = excluded.heartbeat_at, last_tick_at = excluded.last_tick_at, caught_errors =
          COALESCE(excluded.caught_errors, dispatchers.caught_errors)`;
    await advanceMetaTimesPg(tx, ["last_tick_at"], nowEff);
  });
}

/** A dispatcher that stops cleanly takes its row away (one killed is shown stale until pruned). */
export async function forgetDispatcherPg(spool: PgSpool, id: string): Promise<void> {
  await spool.sql`DELETE FROM dispatchers WHERE id = ${id}`;
}

/** Every dispatcher that beat, with how long ago by the database's clock; one older than `staleS` is not alive. */
export async function dispatchersPg(spool: PgSpool, staleS: number): Promise<DispatcherBeat[]> {
  const rows = (await spool.sql`SELECT id, started_at, last_tick_at, EXTRACT(EPOCH
      FROM clock_timestamp())::float8 - heartbeat_at AS age FROM dispatchers ORDER BY id`) as Record<string, unknown>[];
  return rows.map((r) => {
    const age = Math.max(0, Number(r.age));
    return {
      id: String(r.id),
      startedAt: Number(r.started_at),
      heartbeatAgeS: age,
      alive: age <= staleS,
      lastTickAt: Number(r.last_tick_at),
    };
  });
}

/** Every numeric fact of meta, by key (status reads several; one query). */
export async function metaNumbersPg(spool: PgSpool): Promise<Map<string, number>> {
  const rows = (await spool.sql`SELECT key, value FROM meta`) as { key: string; value: string }[];
  const out = new Map<string, number>();
  for (const r of rows) {
    const n = Number(r.value);
    if (r.value !== "" && Number.isFinite(n)) out.set(r.key, n);
  }
  return out;
}

/** One numeric fact of meta; a value that is not a number is none. */
export async function metaNumberPg(spool: PgSpool, key: string): Promise<number | null> {
  const [r] = await spool.sql`SELECT value FROM meta WHERE key = ${key}`;
  const n = r ? Number(r.value) : Number.NaN;
  return r && r.value !== "" && Number.isFinite(n) ? n : null;
}

/**
 * When maintenance first saw a source's liveness expectation (recorded as `now` the first time; two leaders agree on
 * the first).
 */
export async function expectationSincePg(spool: PgSpool, source: string, now: number): Promise<number> {
  const key = `source:${source}:expected_since`;
  await spool.sql`INSERT INTO meta (key, value) VALUES (${key}, ${String(now)}) ON CONFLICT (key) DO NOTHING`;
  return (await metaNumberPg(spool, key)) ?? now;
}

/** A tiny write that proves the database takes writes (the intake's /healthz probe). */
export async function probeWritePg(spool: PgSpool, now: number): Promise<void> {
  await spool.sql`INSERT INTO meta (key, value) VALUES ('write_probe_at', ${String(now)}) ON CONFLICT (key) DO UPDATE
    SET value = excluded.value`;
}

/** When the last retention pass ran (any dispatcher's), so a restart or a new leader keeps the hour. */
export async function lastRetentionPg(spool: PgSpool): Promise<number | null> {
  const [r] = await spool.sql`SELECT value FROM meta WHERE key = 'last_retention_at'`;
  return r ? Number(r.value) : null;
}

export async function noteRetentionPassPg(spool: PgSpool, now: number): Promise<void> {
  await spool.sql`INSERT INTO meta (key, value) VALUES ('last_retention_at', ${String(now)}) ON CONFLICT (key)
    DO UPDATE SET value = excluded.value`;
}

/** A consumer leased from a pull destination at `now`. */
export async function noteConsumerPg(
  spool: PgSpool,
  destination: string,
  consumer: string,
  now: number,
): Promise<void> {
  await spool.sql`INSERT INTO meta (key, value) VALUES (${consumerKey(destination, consumer)}, ${String(now)})
    ON CONFLICT (key) DO UPDATE SET value = excluded.value`;
}

/** Every pull destination's consumers, by destination then name. */
export async function pullConsumersPg(spool: PgSpool): Promise<PullConsumer[]> {
  const rows = (await spool.sql`SELECT key, value FROM meta WHERE key LIKE ${CONSUMER_PREFIX} || '%'
`) as { key: string; value: string | null }[];
  return consumersOf(rows);
}

/** Every instance's last health probe, by instance. */
export async function probeRecordsPg(spool: PgSpool): Promise<ProbeRecord[]> {
  const rows = (await spool.sql`SELECT key, value FROM meta WHERE key LIKE ${PROBE_PREFIX} || '%'
`) as { key: string; value: string | null }[];
  return probesOf(rows);
}

/** An instance's health probe answered (or failed). */
export async function noteProbePg(spool: PgSpool, record: ProbeRecord): Promise<void> {
  await spool.sql`INSERT INTO meta (key, value) VALUES (${probeKey(record.instance)}, ${probeValue(record)})
    ON CONFLICT (key) DO UPDATE SET value = excluded.value`;
}
