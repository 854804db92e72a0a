// A migrated spool in a temp home with a fake clock, and builders for events.
import { join } from "node:path";
import { FakeClock } from "../../src/clock.ts";
import { openSpool, type SqliteSpool } from "../../src/store/sqlite/db.ts";
import type { BatchWindow, EventCopy, NewEvent } from "../../src/store/enqueue.ts";
import { migrate } from "../../src/store/sqlite/migrate.ts";
import { tempDir } from "./tmp.ts";

export const T0 = 1_700_000_000;

export interface TestSpool {
  spool: SqliteSpool;
  clock: FakeClock;
  dir: string;
  path: string;
}

/** A real WAL database file, migrated, with a clock at T0. */
export function freshSpool(): TestSpool {
  const dir = tempDir();
  const path = join(dir, "spool.db");
  const clock = new FakeClock(T0);
  const spool = openSpool(path, { create: true, clock });
  migrate(spool);
  return { spool, clock, dir, path };
}

export const WIDE: BatchWindow = { quiet_s: 60, max_s: 300, max_events: 500, max_bytes: 786432 };

export function copy(route: string, destination: string, window: Partial<BatchWindow> = {}, tee = false): EventCopy {
  return { route, destination, tee, window: { ...WIDE, ...window } };
}

let seq = 0;

/** An event with sensible defaults: source s, key k, route r -> http:d, a small JSON payload. */
export function ev(over: Partial<NewEvent> = {}): NewEvent {
  seq++;
  return {
    source: "s",
    key: "k",
    eventType: "t",
    dedupId: null,
    payload: JSON.stringify({ n: seq }),
    raw: null,
    headers: {},
    copies: [copy("r", "http:d")],
    dedupWindowS: 86400,
    ...over,
  };
}

/** A payload of exactly `bytes` bytes of JSON. */
export function payloadOf(bytes: number): string {
  const base = '{"p":""}';
  return `{"p":"${"x".repeat(Math.max(0, bytes - base.length))}"}`;
}

export function batchRow(spool: SqliteSpool, id: number): Record<string, unknown> {
  return spool.db.query("SELECT * FROM batches WHERE id = ?").get(id) as Record<string, unknown>;
}

/** A sealed batch's row of one event on (route r, source s), first at `at`, as a store's insert takes it. */
export const sealedRow = (destination: string, key: string, at: number) => ({
  route: "r",
  source: "s",
  destination,
  key,
  state: "sealed",
  first_at: at,
  last_at: at,
  quiet_s: 0,
  max_s: 0,
  max_events: 10,
  max_bytes: 1000,
  count: 1,
  bytes: 10,
  sealed_at: at,
  content_hash: "sha256:x",
});
