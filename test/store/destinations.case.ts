// A destination's row through the dispatcher's outcomes and the operator's verbs: the breaker
// counts transport failures, trips open, ignores a failure that was in flight when it opened,
// half-opens once cooled, re-trips on a probe's failure with the cooldown doubled up to its
// maximum and closes on a probe's success; an operator's pause, a Retry-After gate and resume.
// Every backend must leave these rows (this is what makes the two backends agree).
import { expect, test } from "bun:test";
import { type Outcome, outcome } from "../../src/delivery.ts";
import { closedRow, type DestinationRow } from "../../src/store/destinations.ts";
import type { Claim } from "../../src/store/queue.ts";
import { claimOne, endWith } from "../helpers/attempts.ts";
import { copy, ev, T0 } from "../helpers/spool.ts";
import type { StoreUnderTest } from "../helpers/store-under-test.ts";
import type { Suite } from "./suite.ts";

/** The destination cases, on whatever store fresh() opens. */
export function destinationCases({ fresh }: Suite): void {
  type S = StoreUnderTest;

  /** Batches 1..n for http:d, one event each (key k<i>), sealed as they are enqueued. */
  async function batches(s: S, n: number): Promise<void> {
    for (let i = 1; i <= n; i++) {
      const e = ev({ key: `k${i}`, payload: `{"i":${i}}`, copies: [copy("r", "http:d", { max_events: 1 })] });
      const [r] = await s.intake.enqueueAll([e], T0);
      expect(r).toMatchObject({ status: "queued", placed: [{ batchId: i }] });
    }
  }

  /** Batch `id` claimed at `now` (a probe's claim when `probe`). */
  async function claim(s: S, id: number, now: number, probe = false): Promise<Claim> {
    const c = await claimOne(s, {
      batchId: id,
      route: "r",
      key: `k${id}`,
      destination: "http:d",
      now,
      leaseUntil: now + 600,
      host: "h",
      pid: 1,
      probe,
    });
    if (!c) throw new Error(`batch ${id} not claimed`);
    return c;
  }

  /** The attempt on `c` (started at `startedAt`) ends at `now` with `o`. */
  const end = (s: S, id: number, c: Claim, o: Outcome, at: { startedAt: number; now: number; probe?: boolean }) =>
    endWith(s, c, { batchId: id, now: at.startedAt, endAt: at.now, probe: at.probe, outcome: o, durationMs: 5 });

  const fail = (n: number) =>
    outcome({ kind: "retry", klass: "transport", reason: `http 503 #${n}`, status: 503, detail: "HTTP 503" });
  const row = (over: Partial<DestinationRow>): DestinationRow => ({ ...closedRow("http:d"), ...over });

  test(
    "the breaker: counted, tripped, a failure in flight ignored, half-open once cooled, a probe's failure " +
      "doubles the cooldown up to its maximum, a probe's success closes it",
    async () => {
      const s = await fresh();
      await batches(s, 6);
      const state = () => s.dispatch.destinationState("http:d");
      const c1 = await claim(s, 1, T0);
      const c3 = await claim(s, 3, T0 + 0.5);
      const c2 = await claim(s, 2, T0 + 1);

      // Counted: one failure of the two trip_after allows.
      expect(await end(s, 1, c1, fail(1), { startedAt: T0, now: T0 })).toEqual({
        applied: true,
        state: "retry",
        klass: "transport",
        nextAttemptAt: T0 + 1,
      });
      expect(await state()).toEqual(row({ consecutive_failures: 1, last_error: "http 503 #1" }));
      // Tripped: open for the initial cooldown.
      expect(await end(s, 2, c2, fail(2), { startedAt: T0 + 1, now: T0 + 1 })).toEqual({
        applied: true,
        state: "retry",
        klass: "transport",
        nextAttemptAt: T0 + 3,
        breaker: "opened",
      });
      const opened = row({ state: "open", consecutive_failures: 2, opened_at: T0 + 1, cooldown_s: 10 });
      expect(await state()).toEqual({ ...opened, last_error: "http 503 #2" });
      // Ignored: that attempt started before the breaker opened (only its error is kept).
      expect(await end(s, 3, c3, fail(3), { startedAt: T0 + 0.5, now: T0 + 2 })).toEqual({
        applied: true,
        state: "retry",
        klass: "transport",
        nextAttemptAt: T0 + 4,
      });
      expect(await state()).toEqual({ ...opened, last_error: "http 503 #3" });

      // Cooled at opened_at + cooldown: half-open; the probe fails: open again, the cooldown doubled.
      expect(await s.dispatch.halfOpenIfCooled("http:d", T0 + 11)).toBe(true);
      expect(await state()).toEqual({ ...opened, state: "half_open", last_error: "http 503 #3" });
      const c4 = await claim(s, 4, T0 + 11.5, true);
      expect(await state()).toEqual({
        ...opened,
        state: "half_open",
        last_error: "http 503 #3",
        last_probe_batch_id: 4,
        probe_until: T0 + 611.5,
      });
      expect(await end(s, 4, c4, fail(4), { startedAt: T0 + 11.5, now: T0 + 12, probe: true })).toEqual({
        applied: true,
        state: "retry",
        klass: "transport",
        nextAttemptAt: T0 + 14,
        breaker: "reopened",
      });
      const reopened = row({
        state: "open",
        consecutive_failures: 3,
        opened_at: T0 + 12,
        cooldown_s: 20,
        last_probe_batch_id: 4,
        last_error: "http 503 #4",
      });
      expect(await state()).toEqual(reopened);
      // Not cooled before opened_at + 20 s; then half-open, and a second probe's failure: capped at 25 s.
      expect(await s.dispatch.halfOpenIfCooled("http:d", T0 + 20)).toBe(false);
      expect(await state()).toEqual(reopened);
      expect(await s.dispatch.halfOpenIfCooled("http:d", T0 + 33)).toBe(true);
      const c5 = await claim(s, 5, T0 + 33.5, true);
      expect(await end(s, 5, c5, fail(5), { startedAt: T0 + 33.5, now: T0 + 34, probe: true })).toEqual({
        applied: true,
        state: "retry",
        klass: "transport",
        nextAttemptAt: T0 + 38,
        breaker: "reopened",
      });
      expect(await state()).toEqual(
        row({
          state: "open",
          consecutive_failures: 4,
          opened_at: T0 + 34,
          cooldown_s: 25,
          last_probe_batch_id: 5,
          last_error: "http 503 #5",
        }),
      );
      // Cooled at T0 + 59: the third probe gets through and closes the breaker.
      expect(await s.dispatch.halfOpenIfCooled("http:d", T0 + 58)).toBe(false);
      expect(await s.dispatch.halfOpenIfCooled("http:d", T0 + 60)).toBe(true);
      const c6 = await claim(s, 6, T0 + 60.5, true);
      const ok = outcome({ kind: "ok", reason: "ok", status: 200 });
      expect(await end(s, 6, c6, ok, { startedAt: T0 + 60.5, now: T0 + 61, probe: true })).toEqual({
        applied: true,
        state: "delivered",
        klass: null,
        breaker: "closed",
      });
      expect(await state()).toEqual(row({ last_ok_at: T0 + 61, last_probe_batch_id: 6 }));
    },
  );

  test("an operator's pause, a Retry-After gate, resume once (a second resume has nothing to do)", async () => {
    const s = await fresh();
    await batches(s, 1);
    const c1 = await claim(s, 1, T0 + 60);
    await s.operator.pauseDestination("http:d", "ops", T0 + 70);
    const throttled = outcome({ kind: "retry", klass: "throttle", reason: "http 429", status: 429, retryAfterS: 20 });
    expect(await end(s, 1, c1, throttled, { startedAt: T0 + 60, now: T0 + 70 })).toEqual({
      applied: true,
      state: "retry",
      klass: "throttle",
      nextAttemptAt: T0 + 90,
    });
    const paused = row({ state: "paused", paused_at: T0 + 70, paused_by: "ops", retry_after_until: T0 + 90 });
    expect(await s.dispatch.destinationState("http:d")).toEqual(paused);
    expect(await s.operator.destinationNames()).toEqual(["http:d"]);
    expect(await s.operator.resumeDestination("http:d", T0 + 95)).toBe(true);
    expect(await s.operator.resumeDestination("http:d", T0 + 95)).toBe(false);
    // Resumed: closed, the pause and every gate cleared.
    expect(await s.dispatch.destinationState("http:d")).toEqual(row({}));
  });
}
