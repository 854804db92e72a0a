// What the crash and power-loss suites read back: attempt rows, stored copies, batch rows,
// deliveries, and whole-database dumps; each assertion names the batch or event it is about.
import type { Database } from "bun:sqlite";
import { expect } from "bun:test";
import type { Delivery, Scene } from "./harness.ts";

export interface AttemptRow {
  id: number;
  n: number;
  outcome: string | null;
  error: string | null;
  counted: number;
  finished_at: number | null;
  started_at: number;
  delivery_id: string | null;
}

export function attemptsOf(s: Scene, batchId: number): AttemptRow[] {
  return s.db
    .query(
      "SELECT id, n, outcome, error, counted, finished_at, started_at, delivery_id FROM attempts " +
        "WHERE batch_id = ? ORDER BY id",
    )
    .all(batchId) as AttemptRow[];
}

/** The (event id, batch id, route) of every stored copy of the event with this dedup id. */
export function copiesOf(s: Scene, dedupId: string): { id: number; batch_id: number; route: string }[] {
  return s.db.query("SELECT id, batch_id, route FROM events WHERE dedup_id = ? ORDER BY id").all(dedupId) as {
    id: number;
    batch_id: number;
    route: string;
  }[];
}

export function batchRow(
  s: Scene,
  id: number,
): {
  id: number;
  state: string;
  sealed_at: number | null;
  content_hash: string | null;
  lease_owner: string | null;
  delivered_at: number | null;
  count: number;
} {
  const row = s.db
    .query("SELECT id, state, sealed_at, content_hash, lease_owner, delivered_at, count FROM batches WHERE id = ?")
    .get(id);
  if (!row) throw new Error(`batch ${id} is missing`);
  return row as ReturnType<typeof batchRow>;
}

/** The receiver got batch `batchId` exactly once, carrying these events' `n` values. */
export function expectDeliveredOnce(s: Scene, batchId: number, ns: unknown[]): Delivery {
  const got = s.receiver.of(batchId);
  expect(got.length, `batch ${batchId} reached the receiver ${got.length} times, not once`).toBe(1);
  expect(got[0].batchHeader, `batch ${batchId}: X-Hookspool-Batch`).toBe(String(batchId));
  expect(
    got[0].doc.events.map((e) => e.n),
    `batch ${batchId} carried the wrong events`,
  ).toEqual(ns);
  expect(batchRow(s, batchId).state, `batch ${batchId} was delivered but not marked delivered`).toBe("delivered");
  return got[0];
}

/** The story of a batch whose first attempt died with its process: one lease expired, then ok. */
export function expectLeaseExpiredThenOk(s: Scene, batchId: number): AttemptRow[] {
  const rows = attemptsOf(s, batchId);
  expect(
    rows.map((a) => ({ n: a.n, outcome: a.outcome, error: a.error, counted: a.counted })),
    `batch ${batchId}: the attempt rows do not tell "lease expired, then ok"`,
  ).toEqual([
    { n: 1, outcome: "retry", error: "lease expired", counted: 0 },
    { n: 2, outcome: "ok", error: null, counted: rows[1]?.counted ?? 0 },
  ]);
  expect(rows[0].finished_at, `batch ${batchId}: the killed attempt was never finished`).not.toBeNull();
  return rows;
}

/** Every row of every table, blobs as hex: two databases with equal dumps hold the same state. */
export function dump(db: Database): Record<string, unknown[]> {
  const tables = (
    db
      .query("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")
      .all() as { name: string }[]
  ).map((t) => t.name);
  const out: Record<string, unknown[]> = {};
  for (const t of tables) {
    out[t] = (db.query(`SELECT * FROM "${t}" ORDER BY rowid`).all() as Record<string, unknown>[]).map((row) =>
      Object.fromEntries(
        Object.entries(row).map(([k, v]) => [k, v instanceof Uint8Array ? Buffer.from(v).toString("hex") : v]),
      ),
    );
  }
  return out;
}
