// The attempt-history rules both backends read their rows into: which past attempts a poison
// run is made of, where it stops, the bad emit twice in a row, and the run of ignored answers.
import { describe, expect, test } from "bun:test";
import { ignoredRun, type PastAttempt, previousBadEmit, strikeGaps } from "../../src/store/attempts-plan.ts";

const failed = (finished_at: number, klass = "transport"): PastAttempt => ({
  outcome: "failed",
  klass,
  error: "connect refused",
  finished_at,
});

describe("the poison run", () => {
  test("one gap per earlier strike, newest first, each ending at the next failure", () => {
    expect(strikeGaps([failed(30), failed(20), failed(10)], 40)).toEqual([
      { from: 30, to: 40 },
      { from: 20, to: 30 },
      { from: 10, to: 20 },
    ]);
  });

  test("an expired lease and an awaited 2xx say nothing: the run goes on past them", () => {
    const expired: PastAttempt = { outcome: "failed", klass: null, error: "lease expired", finished_at: 25 };
    const awaited: PastAttempt = { outcome: "ok", klass: "await", error: null, finished_at: 22 };
    expect(strikeGaps([failed(30), expired, awaited, failed(20)], 40)).toEqual([
      { from: 30, to: 40 },
      { from: 20, to: 30 },
    ]);
  });

  test("a failed agent run is a strike; a success or another class ends the run", () => {
    expect(strikeGaps([failed(30, "agent"), failed(20)], 40)).toHaveLength(2);
    expect(
      strikeGaps([failed(30), { outcome: "ok", klass: null, error: null, finished_at: 20 }, failed(10)], 40),
    ).toHaveLength(1);
    expect(strikeGaps([failed(30), failed(20, "throttle"), failed(10)], 40)).toHaveLength(1);
    expect(strikeGaps([], 40)).toEqual([]);
  });
});

describe("the bad emit and the ignored run", () => {
  test("the previous attempt that says something decides whether the last emit was bad", () => {
    const badEmit: PastAttempt = { outcome: "failed", klass: "batch", error: "bad emit: not JSON", finished_at: 10 };
    expect(previousBadEmit([badEmit])).toBe(true);
    expect(
      previousBadEmit([{ outcome: "failed", klass: null, error: "lease expired", finished_at: 11 }, badEmit]),
    ).toBe(true);
    expect(previousBadEmit([failed(12), badEmit])).toBe(false);
    expect(previousBadEmit([])).toBe(false);
  });

  test("the run of ignored answers counts from the newest until the first that was not", () => {
    expect(ignoredRun(["ignored", "ignored", "accepted", "ignored"])).toBe(2);
    expect(ignoredRun(["ignored", "ignored"])).toBe(2);
    expect(ignoredRun([null, "ignored"])).toBe(0);
    expect(ignoredRun([])).toBe(0);
  });
});
