// The poll clock through the dispatcher's stepPoll: an instance scheduled, ticked (its tick an
// event with a dedup id), skipped while its last tick's batch is unfinished, ticked again once
// that batch is delivered (the outcome transaction records it for the clock), rescheduled when
// its interval is shortened. Every backend must step the same way and keep these rows.
import { expect, test } from "bun:test";
import { attemptWith } from "../helpers/attempts.ts";
import { copy, ev, T0 } from "../helpers/spool.ts";
import type { Suite } from "./suite.ts";

/** The poll clock cases, on whatever store fresh() opens. */
export function pollCases({ fresh }: Suite): void {
  test("scheduled, ticked, skipped while a tick is unfinished, ticked after its delivery, rescheduled", async () => {
    const s = await fresh();
    const plan = { instance: "feed", everyS: 60, jitterS: 10 };
    let draws = 0;
    const rng = { next: () => [0.5, 0.25, 0.75, 0.1, 0.9, 0.3, 0.6][draws++ % 7] };
    const tick = (at: number) =>
      ev({
        source: "feed",
        key: "feed",
        dedupId: `poll:feed:${at}`,
        payload: JSON.stringify({ tick_at: at }),
        copies: [copy("feed", "script:feed", { quiet_s: 0, max_s: 0, max_events: 1 })],
      });
    const step = (now: number, p = plan) => s.dispatch.stepPoll(p, now, rng, tick);
    const polls = async () => await s.maintenance.pollRows();
    const base = {
      instance: "feed",
      last_tick_at: null,
      last_batch_id: null,
      delivered_at: null,
      delivered_tick_at: null,
      skipped: 0,
      created_at: T0,
      last_batch_state: null,
    };
    // Scheduled: its first tick within the jitter.
    expect(await step(T0)).toBe("scheduled");
    expect(await polls()).toEqual([{ ...base, next_at: T0 + 2.5 }]);
    expect(await step(T0 + 1)).toBeNull();
    // Ticked at its tick time (not the clock's): batch 1, sealed at once; the next an interval and its jitter on.
    expect(await step(T0 + 10)).toBe("ticked");
    const ticked = { ...base, last_tick_at: T0 + 2.5, last_batch_id: 1, last_batch_state: "sealed" as const };
    expect(await polls()).toEqual([{ ...ticked, next_at: T0 + 77.5 }]);
    // Due, but batch 1 is unfinished: skipped (counted), the next an interval and its jitter from now.
    expect(await step(T0 + 80)).toBe("skipped");
    expect(await polls()).toEqual([{ ...ticked, next_at: T0 + 141, skipped: 1 }]);
    // The tick's batch is delivered (through the outcome transaction, which records it for the clock).
    const [row] = await polls();
    const id = row.last_batch_id;
    if (id === null) throw new Error("no tick batch");
    const r = await attemptWith(s, {
      batchId: id,
      route: "feed",
      key: "feed",
      destination: "script:feed",
      now: T0 + 81,
      endAt: T0 + 82,
      script: true,
      outcome: { kind: "ok", reason: "ok", status: 0 },
    });
    expect(r).toMatchObject({ applied: true, state: "delivered" });
    const delivered = { ...ticked, skipped: 1, delivered_at: T0 + 82, delivered_tick_at: T0 + 2.5 };
    expect(await polls()).toEqual([{ ...delivered, next_at: T0 + 141, last_batch_state: "delivered" as const }]);
    expect(await step(T0 + 150)).toBe("ticked");
    // Its interval shortened to 5 s: the next tick, 80 s away, is brought forward.
    expect(await step(T0 + 151, { ...plan, everyS: 5, jitterS: 0 })).toBe("rescheduled");
    expect(await polls()).toEqual([
      { ...delivered, last_tick_at: T0 + 141, last_batch_id: 2, last_batch_state: "sealed", next_at: T0 + 156 },
    ]);
    expect(await s.rows("batches", { cols: ["id", "state", "key", "count"], order: "id" })).toEqual([
      { id: 1, state: "delivered", key: "feed", count: 1 },
      { id: 2, state: "sealed", key: "feed", count: 1 },
    ]);
    expect(await s.rows("events", { cols: ["id", "batch_id", "dedup_id", "payload"], order: "id" })).toEqual([
      { id: 1, batch_id: 1, dedup_id: `poll:feed:${T0 + 2.5}`, payload: `{"tick_at":${T0 + 2.5}}` },
      { id: 2, batch_id: 2, dedup_id: `poll:feed:${T0 + 141}`, payload: `{"tick_at":${T0 + 141}}` },
    ]);
  });
}
