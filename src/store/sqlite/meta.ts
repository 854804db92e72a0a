// The meta table: small facts, the heartbeat and the clock guard now_eff.
import type { Database } from "bun:sqlite";
import { prepared, type SqliteSpool } from "./db.ts";
import { PROBE_PREFIX, probeKey, probesOf, probeValue, type ProbeRecord } from "../probes.ts";
import { CONSUMER_PREFIX, consumerKey, consumersOf, type PullConsumer } from "../pull.ts";

const GET = "SELECT value FROM meta WHERE key = ?";

const SET = "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value";

/** A meta key's value, or null. */
export function getMeta(spool: SqliteSpool, key: string): string | null {
  return getMetaTx(spool.db, key);
}

export function getMetaTx(db: Database, key: string): string | null {
  return prepared<{ value: string | null }, [string]>(db, GET).get(key)?.value ?? null;
}

/** Set a meta key; call inside the caller's transaction or alone (one statement is atomic). */
export function setMetaTx(db: Database, key: string, value: string | number): void {
  prepared(db, SET).run(key, String(value));
}

export function getMetaNumber(spool: SqliteSpool, key: string): number | null {
  return getMetaNumberTx(spool.db, key);
}

export function getMetaNumberTx(db: Database, key: string): number | null {
  const v = getMetaTx(db, key);
  if (v === null) return null;
  const n = Number(v);
  return Number.isFinite(n) ? n : null;
}

/** The instance id minted by the first migration; part of every outbound webhook-id. */
export function instanceId(spool: SqliteSpool): string {
  const id = getMetaTx(spool.db, "instance_id");
  if (!id) throw new Error("meta.instance_id is missing: the spool was not migrated");
  return id;
}

/**
 * now_eff = max(wall clock, meta.last_tick_at). A backwards step of the wall clock
 * makes the dispatcher's time stand still; no stored fact is ever rewritten to follow it.
 */
export function effectiveNow(spool: SqliteSpool): number {
  const wall = spool.clock.now();
  const lastTick = getMetaNumberTx(spool.db, "last_tick_at") ?? 0;
  return Math.max(wall, lastTick);
}

/**
 * The dispatcher's heartbeat: pid, heartbeat time and last_tick_at in one transaction, and
 * (JSON) the failures it caught since it started, so /metrics can show them from another process.
 */
export function writeHeartbeat(spool: SqliteSpool, nowEff: number, pid: number, caughtErrors?: string): void {
  spool.db
    .transaction(() => {
      setMetaTx(spool.db, "dispatcher_heartbeat_at", spool.clock.now());
      setMetaTx(spool.db, "dispatcher_pid", pid);
      setMetaTx(spool.db, "last_tick_at", nowEff);
      if (caughtErrors !== undefined) setMetaTx(spool.db, "dispatcher_caught_errors", caughtErrors);
    })
    .immediate();
}

/** A tiny write that proves the spool takes writes (the /healthz probe). */
export function probeWrite(spool: SqliteSpool, now: number): void {
  spool.db.transaction(() => setMetaTx(spool.db, "write_probe_at", now)).immediate();
}

/** The hourly retention pass ran at `now` (maintenance decides from this when the next is due). */
export function noteRetentionPass(spool: SqliteSpool, now: number): void {
  setMetaTx(spool.db, "last_retention_at", now);
}

/**
 * When maintenance first saw a liveness expectation for a source that has sent nothing yet:
 * silence is counted from then. Returns that time (now, when it was not known before).
 */
export function expectationSince(spool: SqliteSpool, source: string, now: number): number {
  const key = `source:${source}:expected_since`;
  const known = getMetaNumberTx(spool.db, key);
  if (known !== null) return known;
  setMetaTx(spool.db, key, now);
  return now;
}

/**
 * SQLite's count of commits by other connections to this database (PRAGMA data_version): it
 * moves when another process wrote, and reading it costs no disk I/O.
 */
export function dataVersion(spool: SqliteSpool): number {
  return (spool.db.query("PRAGMA data_version").get() as { data_version: number }).data_version;
}

/** A consumer leased from a pull destination at `now`. */
export function noteConsumer(spool: SqliteSpool, destination: string, consumer: string, now: number): void {
  setMetaTx(spool.db, consumerKey(destination, consumer), now);
}

/** Every pull destination's consumers, by destination then name. */
export function pullConsumers(spool: SqliteSpool): PullConsumer[] {
  const rows = prepared<{ key: string; value: string | null }, [string]>(
    spool.db,
    "SELECT key, value FROM meta WHERE key LIKE ? || '%'",
  ).all(CONSUMER_PREFIX);
  return consumersOf(rows);
}

/** Every instance's last health probe, by instance. */
export function probeRecords(spool: SqliteSpool): ProbeRecord[] {
  const rows = prepared<{ key: string; value: string | null }, [string]>(
    spool.db,
    "SELECT key, value FROM meta WHERE key LIKE ? || '%'",
  ).all(PROBE_PREFIX);
  return probesOf(rows);
}

/** An instance's health probe answered (or failed). */
export function noteProbe(spool: SqliteSpool, record: ProbeRecord): void {
  setMetaTx(spool.db, probeKey(record.instance), probeValue(record));
}
