// The breaker's verdict on a transport failure, as both backends apply it: count, trip at
// trip_after, re-trip only on a probe's failure with the cooldown doubled up to its maximum.
import { expect, test } from "bun:test";
import { breakerOnFailure, closedRow, type DestinationRow, type FailureInput } from "../../src/store/destinations.ts";

const f: FailureInput = {
  now: 1000,
  startedAt: 990,
  tripAfter: 3,
  cooldownInitialS: 30,
  cooldownMaxS: 100,
  error: "connect refused",
};
const row = (o: Partial<DestinationRow>): DestinationRow => ({ ...closedRow("http:a"), ...o });

test("closed counts failures and trips open at trip_after with the initial cooldown", () => {
  expect(breakerOnFailure(row({ consecutive_failures: 0 }), f)).toEqual({ effect: "counted", consecutive_failures: 1 });
  expect(breakerOnFailure(row({ consecutive_failures: 2 }), f)).toEqual({
    effect: "tripped",
    consecutive_failures: 3,
    opened_at: 1000,
    cooldown_s: 30,
  });
});

test("open or half_open re-trips on a probe's failure, doubling the cooldown up to its maximum", () => {
  for (const state of ["open", "half_open"] as const) {
    expect(breakerOnFailure(row({ state, consecutive_failures: 3, opened_at: 900, cooldown_s: 30 }), f)).toEqual({
      effect: "retripped",
      consecutive_failures: 4,
      opened_at: 1000,
      cooldown_s: 60,
    });
    expect(breakerOnFailure(row({ state, consecutive_failures: 3, opened_at: 900, cooldown_s: 80 }), f)).toMatchObject({
      cooldown_s: 100,
    });
  }
});

test("a failure of an attempt in flight when the breaker opened, or while paused, changes nothing", () => {
  expect(breakerOnFailure(row({ state: "open", consecutive_failures: 3, opened_at: 995, cooldown_s: 30 }), f)).toEqual({
    effect: "ignored",
  });
  expect(breakerOnFailure(row({ state: "open", consecutive_failures: 3, opened_at: 990, cooldown_s: 30 }), f)).toEqual({
    effect: "ignored",
  });
  expect(breakerOnFailure(row({ state: "paused", consecutive_failures: 0 }), f)).toEqual({ effect: "ignored" });
});
