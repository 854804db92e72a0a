// The join rule and the dedup decision both backends apply: the bounds of a batch (max_bytes a
// true bound, max_events and max_bytes sealing in the same transaction), the dedup window's
// edge, and what a redelivery does to the batch its event joined.
import { Database } from "bun:sqlite";
import { describe, expect, test } from "bun:test";
import {
  JOINS_WITHOUT_SEAL_SQL,
  readyAfterJoin,
  redelivery,
  requeuedCount,
  sealsBeforeJoin,
  sealsOnSize,
  seenWithin,
} from "../../src/store/enqueue-plan.ts";

describe("the dedup decision", () => {
  test("a row counts within the window only: its edge is outside", () => {
    expect(seenWithin({ seen_at: 100, dup_count: 0 }, 60, 159)).toBe(true);
    expect(seenWithin({ seen_at: 100, dup_count: 0 }, 60, 160)).toBe(false);
    expect(seenWithin(null, 60, 100)).toBe(false);
    expect(seenWithin(undefined, 60, 100)).toBe(false);
  });

  test("dead is replayed, dropped is queued anew with its count carried on, anything else is a duplicate", () => {
    expect(redelivery("dead")).toBe("replay");
    expect(redelivery("dropped")).toBe("requeue");
    for (const s of ["open", "sealed", "leased", "retry", "awaiting", "delivered", undefined])
      expect(redelivery(s)).toBe("duplicate");
    expect(requeuedCount({ seen_at: 1, dup_count: 4 })).toBe(5);
  });
});

describe("the join rule", () => {
  test("an event that would push the open batch past max_bytes seals it first, unless the batch is empty", () => {
    expect(sealsBeforeJoin({ count: 1, bytes: 900, max_bytes: 1000 }, 100)).toBe(false);
    expect(sealsBeforeJoin({ count: 1, bytes: 900, max_bytes: 1000 }, 101)).toBe(true);
    expect(sealsBeforeJoin({ count: 0, bytes: 0, max_bytes: 1000 }, 5000)).toBe(false);
  });

  test("the rule's SQL form (a one-statement join's WHERE) agrees with it on every edge", () => {
    const db = new Database(":memory:");
    const joins = db.query(`SELECT ${JOINS_WITHOUT_SEAL_SQL} AS j FROM (SELECT $count AS count, $bytes AS bytes,
      $max_bytes AS max_bytes)`);
    const cases: [number, number, number, number][] = [];
    for (const count of [0, 1, 2, 50])
      for (const bytes of [0, 1, 899, 900, 999, 1000, 1001])
        for (const size of [0, 1, 100, 101, 1000, 5000]) cases.push([count, bytes, 1000, size]);
    for (const [count, bytes, max_bytes, size] of cases) {
      const sql = (joins.get({ $count: count, $bytes: bytes, $max_bytes: max_bytes, $size: size }) as { j: number }).j;
      expect([count, bytes, size, sql === 1]).toEqual([
        count,
        bytes,
        size,
        !sealsBeforeJoin({ count, bytes, max_bytes }, size),
      ]);
    }
    db.close();
  });

  test("the batch seals on reaching max_events or max_bytes", () => {
    expect(sealsOnSize({ count: 9, bytes: 10, max_events: 10, max_bytes: 1000 })).toBe(false);
    expect(sealsOnSize({ count: 10, bytes: 10, max_events: 10, max_bytes: 1000 })).toBe(true);
    expect(sealsOnSize({ count: 1, bytes: 1000, max_events: 10, max_bytes: 1000 })).toBe(true);
  });

  test(
    "a batch is ready when sealed or windowless, else when its quiet or its max window ends, whichever is " + "first",
    () => {
      const b = { first_at: 100, last_at: 130, quiet_s: 20, max_s: 60 };
      expect(readyAfterJoin(b, false, 130)).toBe(150);
      expect(readyAfterJoin({ ...b, last_at: 150 }, false, 150)).toBe(160);
      expect(readyAfterJoin(b, true, 130)).toBe(130);
      expect(readyAfterJoin({ ...b, quiet_s: 0, max_s: 0 }, false, 130)).toBe(130);
    },
  );
});
