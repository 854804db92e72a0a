// A retention pass through the roles that run it (maintenance's chore and the operator's
// prune): delivered and dropped batches past their age go with their events, attempts and
// journal rows past theirs, resolved issues past theirs, dedup ids past their source's window;
// dead batches never, whatever their age. Every backend must keep exactly these rows.
import { expect, test } from "bun:test";
import { existsSync, utimesSync } from "node:fs";
import { BODY_GRACE_S, type BodyFile, BodySink, bodyPath, bodyReference } from "../../src/bodies.ts";
import { systemClock } from "../../src/clock.ts";
import { parseConfig } from "../../src/config/load.ts";
import type { outcome } from "../../src/delivery.ts";
import { retentionPass } from "../../src/dispatch/retention-pass.ts";
import { createLogger } from "../../src/log.ts";
import { Faults } from "../../src/obs/faults.ts";
import type { RetentionCounts, RetentionPolicy } from "../../src/store/retention.ts";
import { attemptWith } from "../helpers/attempts.ts";
import { LOG_LINES } from "../helpers/logs.ts";
import { copy, ev, T0 } from "../helpers/spool.ts";
import { tempDir } from "../helpers/tmp.ts";
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

  /** A body kept in `dir` as the intake keeps one: streamed, fsync'd, renamed to its hash; aged past the grace. */
  async function keptBody(dir: string, text: string): Promise<BodyFile> {
    const sink = await BodySink.open(dir, crypto.randomUUID());
    await sink.write(new TextEncoder().encode(text));
    const file = await sink.finish();
    await sink.keep(file);
    const old = systemClock.now() - 2 * BODY_GRACE_S;
    utimesSync(bodyPath(dir, file.sha256), old, old);
    return file;
  }

  test("the retention chore deletes a deleted event's body file, logging body_files and body_bytes", async () => {
    const s = await fresh();
    const dir = tempDir();
    const gone = await keptBody(dir, `{"gone":"${"g".repeat(300_000)}"}`);
    const kept = await keptBody(dir, `{"kept":"${"k".repeat(310_000)}"}`);
    const one = { max_events: 1 };
    // The first is delivered at T0 (past delivered_days by now), the second waits in its batch.
    await s.intake.enqueueAll(
      [ev({ key: "k0", payload: bodyReference(gone), body: gone, copies: [copy("r", "http:d", one)] })],
      T0,
    );
    await s.intake.enqueueAll(
      [ev({ key: "k1", payload: bodyReference(kept), body: kept, copies: [copy("r", "http:d", one)] })],
      T0,
    );
    await end(s, 1, { kind: "ok", reason: "ok", status: 200 }, T0 + 1);
    expect(await s.maintenance.namedBodies([gone.sha256, kept.sha256])).toEqual(new Set([gone.sha256, kept.sha256]));

    // SQLite's now_eff is the injected clock; PostgreSQL's the server's, long past T0 too.
    s.clock.set(T0 + 365 * DAY);
    const { config } = parseConfig('[sources.s]\naction = "hermes:a"\n', "t.toml");
    const log = createLogger("maintenance");
    const from = LOG_LINES.length;
    const chore = retentionPass({
      store: s.maintenance,
      leader: s.dispatch,
      config: () => config,
      clock: systemClock,
      log,
      env: {},
      faults: new Faults(s.maintenance, "maintenance", log, () => systemClock.now()),
      bodies: dir,
    });
    await chore.runNow();
    expect(await s.count("events"), "the delivered event went, the waiting one stayed").toBe(1);
    expect(existsSync(bodyPath(dir, gone.sha256)), "the deleted event's body file").toBe(false);
    expect(existsSync(bodyPath(dir, kept.sha256)), "the waiting event's body file").toBe(true);
    const line = LOG_LINES.slice(from).find((l) => l.includes("retention pass"));
    expect(line, "the pass's log line").toContain(
      `reason="batches=1 events=1 attempts=1 dedup=0 issues=0 body_files=1 body_bytes=${gone.bytes}"`,
    );
    // Only the waiting event's file is named now, on both roles that sweep.
    expect(await s.operator.namedBodies([gone.sha256, kept.sha256])).toEqual(new Set([kept.sha256]));
    expect(await s.maintenance.namedBodies([gone.sha256, kept.sha256])).toEqual(new Set([kept.sha256]));
  });
}
