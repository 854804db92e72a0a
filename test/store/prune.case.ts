// A retention pass through the roles that run it (maintenance's chore and the operator's
// prune): delivered and dropped batches past their age go with their events, attempts and
// journal rows past theirs, resolved issues past theirs, dedup ids past their source's window;
// dead batches never, whatever their age. Every backend must keep exactly these rows.
import { expect, test } from "bun:test";
import type { outcome } from "../../src/delivery.ts";
import type { RetentionCounts, RetentionPolicy } from "../../src/store/retention.ts";
import { attemptWith } from "../helpers/attempts.ts";
import { copy, ev, T0 } from "../helpers/spool.ts";
import type { StoreUnderTest } from "../helpers/store-under-test.ts";
import type { Suite } from "./suite.ts";

const DAY = 86_400;

/** The prune cases, on whatever store fresh() opens. */
export function pruneCases({ fresh }: Suite): void {
  type S = StoreUnderTest;

  /** Claim batch `id` (key k<id - 1>) at `now` and end its attempt then with `o`. */
  async function end(s: S, id: number, o: Parameters<typeof outcome>[0], now: number): Promise<void> {
    expect(await attemptWith(s, { batchId: id, route: "r", key: `k${id - 1}`, now, outcome: o })).toMatchObject({
      applied: true,
    });
  }

  /** Six single-event batches a day apart (two with dedup ids); four ended, one dropped, one left sealed. */
  async function sixDays(s: S): Promise<void> {
    for (let i = 0; i < 6; i++) {
      const e = ev({
        key: `k${i}`,
        source: i % 2 ? "gh" : "zoom",
        dedupId: i < 2 ? `d${i}` : null,
        payload: `{"i":${i}}`,
        copies: [copy("r", "http:d", { max_events: 1 })],
      });
      await s.intake.enqueueAll([e], T0 + i * DAY);
    }
    const ok = { kind: "ok" as const, reason: "ok", status: 200 };
    await end(s, 1, ok, T0 + 1);
    await end(s, 2, { kind: "dead", klass: "permanent", reason: "http 422", status: 422 }, T0 + DAY + 1);
    await end(s, 3, ok, T0 + 2 * DAY + 1);
    await end(s, 6, ok, T0 + 5 * DAY + 1);
    await s.operator.dropBatches([4], T0 + 3 * DAY);
    await s.maintenance.resolveIssue("delivery:http:d:permanent", T0 + DAY + 2);
  }

  const retention: RetentionPolicy = {
    deliveredDays: 3,
    attemptsDays: 4,
    droppedDays: 1,
    issuesDays: 2,
    dedupWindowS: (source) => (source === "gh" ? DAY : 10 * DAY),
  };

  const passes: [string, (s: S, now: number) => Promise<RetentionCounts>][] = [
    ["maintenance's retention chore", (s, now) => s.maintenance.runRetention(retention, now)],
    ["the operator's prune", (s, now) => s.operator.runRetention(retention, now)],
  ];
  for (const [who, pass] of passes) {
    test(`${who}: the same rows go, dead batches never`, async () => {
      const s = await fresh();
      await sixDays(s);
      const counts = await pass(s, T0 + 6 * DAY);
      // Delivered batches 1 and 3 are past delivered_days, dropped batch 4 past dropped_days, with their events;
      // attempts 1 and 2 are past attempts_days (the dead batch's attempt too); gh's dedup id is past its window;
      // the resolved issue is past issues_days.
      expect(counts).toEqual({ batches: 3, events: 3, attempts: 2, dedup: 1, issues: 1 });
      const kept = async (table: string, key: string) =>
        (await s.rows(table, { cols: [key], order: key })).map((r) => r[key]);
      expect(await kept("batches", "id")).toEqual([2, 5, 6]);
      expect(await kept("events", "id")).toEqual([2, 5, 6]);
      expect(await kept("attempts", "id")).toEqual([3, 4]);
      expect(await kept("dedup", "dedup_id")).toEqual(["d0"]);
      expect(await kept("issues", "fingerprint")).toEqual([]);
      // The journal keeps delivered_days of rows, whatever their batch: those from T0 + 3 days on.
      expect(await kept("journal", "id")).toEqual([7, 8, 9, 10, 11, 12, 19, 20, 21]);
      // The dead batch stays, whatever its age.
      expect(await s.row("batches", { cols: ["state"], where: { id: 2 } })).toEqual({ state: "dead" });
    });
  }
}
