// The meta table: small facts, the heartbeat and the clock guard now_eff (spec 2, 3).
import type { Database } from "bun:sqlite";
import type { Spool } from "./db.ts";
import { prepared } from "./db.ts";

const GET = "SELECT value FROM meta WHERE key = ?";
const SET = "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value";

export function getMeta(db: Database, key: string): string | null {
  return prepared<{ value: string | null }, [string]>(db, GET).get(key)?.value ?? null;
}

/** Set a meta key; call inside the caller's transaction or alone (one statement is atomic). */
export function setMeta(db: Database, key: string, value: string | number): void {
  prepared(db, SET).run(key, String(value));
}

export function getMetaNumber(db: Database, key: string): number | null {
  const v = getMeta(db, key);
  if (v === null) return null;
  const n = Number(v);
  return Number.isFinite(n) ? n : null;
}

/** The instance id minted by the first migration; part of every outbound webhook-id. */
export function instanceId(db: Database): string {
  const id = getMeta(db, "instance_id");
  if (!id) throw new Error("meta.instance_id is missing: the spool was not migrated");
  return id;
}

/**
 * now_eff = max(wall clock, meta.last_tick_at) (spec 2). A backwards step of the wall clock
 * makes the dispatcher's time stand still; no stored fact is ever rewritten to follow it.
 */
export function effectiveNow(spool: Spool): number {
  const wall = spool.clock.now();
  const lastTick = getMetaNumber(spool.db, "last_tick_at") ?? 0;
  return Math.max(wall, lastTick);
}

/**
 * The dispatcher's heartbeat: pid, heartbeat time and last_tick_at in one transaction, and
 * (JSON) the failures it caught since it started, so /metrics can show them from another process.
 */
export function writeHeartbeat(spool: Spool, nowEff: number, pid: number, caughtErrors?: string): void {
  spool.db
    .transaction(() => {
      setMeta(spool.db, "dispatcher_heartbeat_at", spool.clock.now());
      setMeta(spool.db, "dispatcher_pid", pid);
      setMeta(spool.db, "last_tick_at", nowEff);
      if (caughtErrors !== undefined) setMeta(spool.db, "dispatcher_caught_errors", caughtErrors);
    })
    .immediate();
}

/** A tiny write that proves the spool takes writes (the /healthz probe, spec 11.1). */
export function probeWrite(spool: Spool, now: number): void {
  spool.db.transaction(() => setMeta(spool.db, "write_probe_at", now)).immediate();
}
