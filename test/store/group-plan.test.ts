// The join rule over a whole group in memory (src/store/group-plan.ts), without a database: the
// same steps as the one-by-one enqueue, in the same order. test/store/pg/enqueue-set.test.ts
// holds the rows it leads to against the one-by-one path on a real server.
import { describe, expect, test } from "bun:test";
import {
  dedupTwice,
  type GroupBatch,
  type GroupState,
  groupKey,
  planGroup,
  storedBatch,
} from "../../src/store/group-plan.ts";
import { copy, ev, T0 } from "../helpers/spool.ts";

/** A batch open before the group, as the dialect's read gives it. */
function open(over: Partial<Parameters<typeof storedBatch>[0]> = {}): GroupBatch {
  return storedBatch({
    id: 7,
    route: "r",
    source: "s",
    destination: "http:d",
    key: "k",
    first_at: T0 - 10,
    last_at: T0 - 5,
    quiet_s: 60,
    max_s: 300,
    max_events: 3,
    max_bytes: 100_000,
    count: 2,
    bytes: 200,
    ...over,
  });
}

const groups = (entries: [string, GroupState][]) => new Map(entries);

describe("the join rule over a group", () => {
  test("joins the open batch, seals it at max_events, and opens the next one at the group's latest first_at", () => {
    const jobs = [[ev({ dedupId: "a" })], [ev({ dedupId: "b" })]];
    const state = groups([[groupKey("r", "k"), { open: open(), maxFirstAt: T0 + 50 }]]);
    const plan = planGroup(jobs, [T0, T0 + 1], state, [101, 102]);
    // The first event fills the batch open before the group (3 of 3) and seals it; the second opens a new one.
    expect(plan.batches.map((b) => [b.id, b.count, b.sealedAt])).toEqual([
      [7, 3, T0],
      [null, 1, null],
    ]);
    // Never before an unfinished batch of its group (another intake's clock may be ahead).
    expect(plan.opened[0].first_at).toBe(T0 + 50);
    expect(plan.journal.map((j) => [j.kind, j.eventId])).toEqual([
      ["event", 101],
      ["sealed", null],
      ["event", 102],
    ]);
    expect(plan.results.map((r) => r.map((x) => (x.status === "queued" ? x.placed[0].sealed : null)))).toEqual([
      [true],
      [false],
    ]);
  });

  test("an event that would overflow max_bytes seals the open batch before it joins", () => {
    const big = ev({ payload: JSON.stringify({ p: "x".repeat(500) }) });
    const state = groups([[groupKey("r", "k"), { open: open({ max_bytes: 600, bytes: 400 }), maxFirstAt: T0 - 10 }]]);
    const plan = planGroup([[big]], [T0], state, [9]);
    expect(plan.journal.map((j) => j.kind)).toEqual(["sealed", "event"]);
    expect(plan.batches.map((b) => [b.id, b.addedCount, b.sealedAt])).toEqual([
      [7, 0, T0],
      [null, 1, null],
    ]);
  });

  test("tees join their own route's group; every copy takes the next id, the primary first", () => {
    const e = ev({ copies: [copy("r", "http:d", { max_events: 1 }), copy("t", "http:t", {}, true)] });
    const state = groups([
      [groupKey("r", "k"), { open: null, maxFirstAt: 0 }],
      [groupKey("t", "k"), { open: null, maxFirstAt: 0 }],
    ]);
    const plan = planGroup([[e]], [T0], state, [1, 2]);
    expect(plan.events.map((x) => [x.id, x.route])).toEqual([
      [1, "r"],
      [2, "t"],
    ]);
    // max_events 1 seals the primary's new batch at once; the tee's stays open.
    expect(plan.opened.map((b) => [b.route, b.sealedAt])).toEqual([
      ["r", T0],
      ["t", null],
    ]);
    expect(plan.readyAt).toBe(T0);
  });

  test("a dedup id twice in one group is for the one-by-one path", () => {
    expect(dedupTwice([[ev({ dedupId: "x" })], [ev({ dedupId: "y" })]])).toBe(false);
    expect(dedupTwice([[ev({ dedupId: "x" })], [ev({ dedupId: "x" })]])).toBe(true);
    expect(dedupTwice([[ev({ dedupId: "x" })], [ev({ dedupId: "x", source: "other" })]])).toBe(false);
  });
});
