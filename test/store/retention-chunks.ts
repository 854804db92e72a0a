// Retention's small transactions, on each dialect: a pass deletes at most batchSize rows per
// transaction and lets the event loop turn between them, and SQLite's ends with its WAL
// truncated. Not a conformance case: the chunk size and each transaction's changed rows are the
// dialect's own loop (sqlite/retention.ts, pg/retention.ts). MaintenanceStore.runRetention takes
// no batch size and says nothing of its transactions, so each dialect's test file
// (retention-chunks.test.ts, pg/retention-chunks.test.ts) runs these cases through its own
// runRetention, watching its transactions; the rows are laid out and read back through the
// store facade, the delivered batch made the services' way (attempts.ts).
import { afterEach, describe, expect, test } from "bun:test";
import { statSync } from "node:fs";
import type { RetentionCounts, RetentionOptions, RetentionPolicy } from "../../src/store/retention.ts";
import { DAY, deliveredIn, NOW, RETENTION_POLICY } from "./retention.case.ts";
import type { Row, StoreUnderTest } from "../helpers/store-under-test.ts";

/** One dialect's retention pass over `s`; `onCommit` hears, after each transaction, how many rows it changed. */
export type WatchedPass = (
  s: StoreUnderTest,
  policy: RetentionPolicy,
  now: number,
  opts: RetentionOptions,
  onCommit: (rows: number) => void,
) => Promise<RetentionCounts>;

/** The chunk cases on a dialect: `open` a fresh store (closed after each test), `pass` its watched retention. */
export function retentionChunkCases(open0: () => Promise<StoreUnderTest>, pass: WatchedPass): void {
  type S = StoreUnderTest;
  // The conformance cases' policy (retention.case.ts): dropped_days 3, two sources' dedup windows.
  const policy = RETENTION_POLICY;
  let keys = 0;

  const opened: S[] = [];
  afterEach(async () => {
    for (const s of opened.splice(0)) await s.close();
  });
  const open = async () => {
    const s = await open0();
    opened.push(s);
    return s;
  };

  /** A batch of `n` events received and sealed at `at - 10`, claimed and delivered at `at`. */
  const deliveredAt = (s: S, at: number, n: number) => deliveredIn(s, `k${++keys}`, at, n);

  describe("small transactions (1,000 rows at most, yielding between)", () => {
    test(
      "2,500+ deletable rows: no transaction over batchSize, the loop turns between them, " + "the WAL is truncated",
      async () => {
        const s = await open();
        const old = NOW - 100 * DAY;
        const batches: Row[] = [];
        const sizes: number[] = [];
        const add = (state: string, n: number) => {
          batches.push({
            route: "r",
            source: "s",
            destination: "http:d",
            key: `k${++keys}`,
            state,
            first_at: old,
            last_at: old,
            quiet_s: 0,
            max_s: 0,
            max_events: 5000,
            max_bytes: 1000000,
            count: n,
            bytes: 2 * n,
            sealed_at: old,
            content_hash: "sha256:x",
            delivered_at: old,
          });
          sizes.push(n);
        };
        for (let i = 0; i < 300; i++) add("delivered", 4); // 1,500 rows
        add("delivered", 2300); // one batch bigger than a transaction: 2,301 rows
        for (let i = 0; i < 100; i++) add("dropped", 2); // 300 rows
        for (let i = 0; i < 20; i++) add("dead", 3); // kept
        const batchIds = await s.insert("batches", batches);
        await s.insert(
          "events",
          batchIds.flatMap((id, i) =>
            Array.from({ length: sizes[i] }, () => ({
              source: "s",
              route: "r",
              batch_id: id,
              received_at: old,
              payload: "{}",
              size: 2,
            })),
          ),
        );
        await s.insert(
          "attempts",
          Array.from({ length: 1200 }, () => ({
            batch_id: 1,
            n: 1,
            destination: "http:d",
            started_at: old,
            finished_at: old,
            outcome: "retry",
          })),
        );
        await s.insert(
          "dedup",
          Array.from({ length: 1200 }, (_, i) => ({ source: "s", dedup_id: `id${i}`, event_id: 1, seen_at: old })),
        );

        let turns = 0;
        let spinning = true;
        const spin = () => {
          turns++;
          if (spinning) setImmediate(spin);
        };
        setImmediate(spin);
        const txs: { rows: number; turn: number }[] = [];
        const counts = await pass(s, policy, NOW, { batchSize: 1000 }, (rows) => txs.push({ rows, turn: turns }));
        spinning = false;

        expect(counts).toEqual({ batches: 401, events: 1200 + 2300 + 200, attempts: 1200, dedup: 1200, issues: 0 });
        const busy = txs.filter((x) => x.rows > 0);
        expect(busy.length).toBeGreaterThanOrEqual(8);
        expect(Math.max(...txs.map((x) => x.rows))).toBeLessThanOrEqual(1000);
        // after every transaction that deleted something, the event loop ran before the next one
        txs.forEach((x, i) => {
          if (x.rows > 0 && i + 1 < txs.length) expect(txs[i + 1].turn).toBeGreaterThan(x.turn);
        });
        expect(await s.count("batches", { state: "dead" })).toBe(20);
        expect(await s.count("events")).toBe(60);
        // SQLite's pass ends with a checkpoint that empties the WAL, waiting less than the
        // connection would, and restores the connection's timeout; PostgreSQL has neither.
        if (s.sqlite) {
          expect(statSync(`${s.sqlite.path}-wal`).size).toBe(0);
          expect(s.sqlite.spool.db.query("PRAGMA busy_timeout").get()).toEqual({ timeout: 30000 });
        }
      },
    );

    test("batchSize 1 still finishes, one row per transaction", async () => {
      const s = await open();
      const b = await deliveredAt(s, NOW - 10 * DAY, 3);
      // The batch's journal rows (its events, seal, lease, delivery) go in the same pass.
      const journal = await s.count("journal", { batch_id: b.id });
      expect(journal).toBeGreaterThan(0);
      const txs: number[] = [];
      const counts = await pass(
        s,
        { ...policy, attemptsDays: 1000 } satisfies RetentionPolicy,
        NOW,
        { batchSize: 1 },
        (rows) => txs.push(rows),
      );
      expect(counts).toMatchObject({ batches: 1, events: 3 });
      expect(txs.filter((x) => x > 0)).toEqual(Array(4 + journal).fill(1));
      expect(await s.count("journal", { batch_id: b.id })).toBe(0);
      expect(await s.count("events", { batch_id: b.id })).toBe(0);
    });
  });
}
