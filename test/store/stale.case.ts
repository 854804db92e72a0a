// Versions and the stale floor through the services' roles: an event's version is stored with
// it and puts a batch's content in its order (content_hash over that order, the same on every
// backend); a batch's first lease fixes its key's last delivered version on its row and a later
// lease keeps it; the delivered mark (and an awaited run's delivery) records the batch's highest
// version in the same transaction, never lowering the key's; a replayed dead batch is judged
// again; retention lets a key's record go with the delivered batches; an unwrap retry resumes
// where the last attempt failed, in the document's order. Every backend must leave these rows.
import { expect, test } from "bun:test";
import { outcome } from "../../src/delivery.ts";
import { documentOrder } from "../../src/store/content.ts";
import type { RetentionPolicy } from "../../src/store/retention.ts";
import { claimOne, end, POLICY } from "../helpers/attempts.ts";
import { copy, ev, T0 } from "../helpers/spool.ts";
import type { StoreUnderTest } from "../helpers/store-under-test.ts";
import type { Suite } from "./suite.ts";

const DAY = 86400;

/** A batch of key `key` holding events with these versions, sealed by its size. */
async function batchOf(s: StoreUnderTest, key: string, versions: (number | null)[], at: number): Promise<number> {
  let id = 0;
  for (const [i, version] of versions.entries()) {
    const [r] = await s.intake.enqueueAll(
      [
        ev({
          key,
          payload: JSON.stringify({ i }),
          version,
          copies: [copy("r", "http:d", { max_events: versions.length })],
        }),
      ],
      at + i,
    );
    if (r.status !== "queued") throw new Error(r.status);
    id = r.placed[0].batchId;
  }
  return id;
}

const claimAt = async (s: StoreUnderTest, batchId: number, now: number) => {
  const c = await claimOne(s, {
    batchId,
    destination: "http:d",
    now,
    leaseUntil: now + 60,
    host: "h",
    pid: 1,
    deliveryId: (a) => `dv-${a}`,
  });
  if (!c) throw new Error(`batch ${batchId} not claimed`);
  return c;
};

const floorOf = async (s: StoreUnderTest, id: number) => {
  const b = await s.batch(id);
  return { stale_floor: b?.stale_floor ?? null, floor_at: b?.floor_at ?? null };
};

const record = (s: StoreUnderTest) =>
  s.rows("delivered_versions", { cols: ["route", "key", "version", "batch_id", "at"], order: "key" });

/** The stale cases, on whatever store fresh() opens. */
export function staleCases({ fresh }: Suite): void {
  test("versions are stored, order the content and its hash; the delivered mark records the highest", async () => {
    const s = await fresh();
    const id = await batchOf(s, "k", [30, null, 10.5, 20], T0);
    expect(await s.rows("events", { cols: ["id", "version"], order: "id" })).toEqual([
      { id: 1, version: 30 },
      { id: 2, version: null },
      { id: 3, version: 10.5 },
      { id: 4, version: 20 },
    ]);
    const delivery = await s.dispatch.deliveryOf(id);
    // By version; the event without one keeps its place.
    expect(documentOrder(delivery?.content ?? []).map((e) => e.id)).toEqual([3, 2, 4, 1]);
    // The same hash on every backend: versions are in event_meta, and the order is theirs
    // ({"event_meta":[{...,"id":3,...,"version":10.5},{...,"id":2,...},...],"events":[{"i":2},{"i":1},...]}).
    expect(delivery?.batch.content_hash).toBe(
      "sha256:0786c2e9588feea3762b631f6305778b03ce25ba966af1625a32d0454281c118",
    );
    expect(await floorOf(s, id)).toEqual({ stale_floor: null, floor_at: null });
    const c = await claimAt(s, id, T0 + 10);
    // Nothing delivered for the key yet: the floor is none, fixed now.
    expect(await floorOf(s, id)).toEqual({ stale_floor: null, floor_at: T0 + 10 });
    await end(s, { batchId: id, attemptId: c.attemptId, owner: c.owner, now: T0 + 11, ending: { kind: "delivered" } });
    expect(await record(s)).toEqual([{ route: "r", key: "k", version: 30, batch_id: id, at: T0 + 11 }]);

    // The next batch of the key is judged against 30; a lower batch never lowers the record,
    // an excluded event does not count.
    const next = await batchOf(s, "k", [25, 40], T0 + 20);
    await s.operator.excludeEvents(next, [6], T0 + 21);
    const c2 = await claimAt(s, next, T0 + 30);
    expect(await floorOf(s, next)).toEqual({ stale_floor: 30, floor_at: T0 + 30 });
    await end(s, {
      batchId: next,
      attemptId: c2.attemptId,
      owner: c2.owner,
      now: T0 + 31,
      ending: { kind: "delivered" },
    });
    expect(await record(s)).toEqual([{ route: "r", key: "k", version: 30, batch_id: id, at: T0 + 31 }]);
    // A batch without versions records nothing; another key has a record of its own.
    const plain = await batchOf(s, "plain", [null], T0 + 40);
    const other = await batchOf(s, "other", [5], T0 + 41);
    for (const [b, at] of [
      [plain, T0 + 50],
      [other, T0 + 52],
    ]) {
      const cb = await claimAt(s, b, at);
      await end(s, {
        batchId: b,
        attemptId: cb.attemptId,
        owner: cb.owner,
        now: at + 1,
        ending: { kind: "delivered" },
      });
    }
    expect(await record(s)).toEqual([
      { route: "r", key: "k", version: 30, batch_id: id, at: T0 + 31 },
      { route: "r", key: "other", version: 5, batch_id: other, at: T0 + 53 },
    ]);
  });

  test("a later lease keeps the floor; a replayed dead batch is judged again", async () => {
    const s = await fresh();
    const first = await batchOf(s, "k", [100], T0);
    const c1 = await claimAt(s, first, T0 + 1);
    await end(s, {
      batchId: first,
      attemptId: c1.attemptId,
      owner: c1.owner,
      now: T0 + 2,
      ending: { kind: "delivered" },
    });
    const b = await batchOf(s, "k", [50, 150], T0 + 3);
    const c2 = await claimAt(s, b, T0 + 10);
    await end(s, {
      batchId: b,
      attemptId: c2.attemptId,
      owner: c2.owner,
      now: T0 + 11,
      ending: { kind: "retry", nextAttemptAt: T0 + 20 },
    });
    // The key's record moves meanwhile (as an operator's other work could): the retry keeps its floor.
    await s.update("delivered_versions", { version: 120 }, { key: "k" });
    const c3 = await claimAt(s, b, T0 + 20);
    expect(await floorOf(s, b)).toEqual({ stale_floor: 100, floor_at: T0 + 10 });
    await end(s, { batchId: b, attemptId: c3.attemptId, owner: c3.owner, now: T0 + 21, ending: { kind: "dead" } });
    // Dead: nothing recorded. Replayed, it is a new run: judged again at its next lease.
    expect(await record(s)).toMatchObject([{ version: 120, batch_id: first }]);
    await s.operator.replayBatch(b, T0 + 30);
    expect(await floorOf(s, b)).toEqual({ stale_floor: null, floor_at: null });
    const c4 = await claimAt(s, b, T0 + 31);
    expect(await floorOf(s, b)).toEqual({ stale_floor: 120, floor_at: T0 + 31 });
    await end(s, { batchId: b, attemptId: c4.attemptId, owner: c4.owner, now: T0 + 32, ending: { kind: "delivered" } });
    expect(await record(s)).toEqual([{ route: "r", key: "k", version: 150, batch_id: b, at: T0 + 32 }]);
  });

  test("an awaited run counts when it is delivered; retention lets an old record go", async () => {
    const s = await fresh();
    const id = await batchOf(s, "k", [7], T0);
    const c = await claimAt(s, id, T0 + 1);
    const [r] = await s.dispatch.recordOutcomes([
      {
        batchId: id,
        attemptId: c.attemptId,
        owner: c.owner,
        startedAt: T0 + 1,
        probe: false,
        script: false,
        outcome: outcome({ kind: "ok", reason: "http 202", status: 202 }),
        emits: [],
        durationMs: 1,
        now: T0 + 2,
        jitter: 0,
        policy: POLICY,
        awaitOutcomeS: 600,
      },
    ]);
    expect(r).toMatchObject({ state: "awaiting" });
    expect(await record(s)).toEqual([]);
    const settled = await s.dispatch.reportOutcome({
      deliveryId: c.deliveryId ?? "",
      status: "ok",
      reason: null,
      permanent: false,
      via: "cli",
      now: T0 + 5,
      jitter: 0,
      policy: POLICY,
    });
    expect(settled).toMatchObject({ kind: "settled", state: "delivered" });
    expect(await record(s)).toEqual([{ route: "r", key: "k", version: 7, batch_id: id, at: T0 + 5 }]);
    const policy: RetentionPolicy = {
      deliveredDays: 7,
      attemptsDays: 30,
      droppedDays: 7,
      issuesDays: 90,
      dedupWindowS: () => DAY,
    };
    await s.maintenance.runRetention(policy, T0 + 5 + 7 * DAY);
    expect(await record(s)).toHaveLength(1);
    await s.maintenance.runRetention(policy, T0 + 6 + 7 * DAY);
    expect(await record(s)).toEqual([]);
  });

  test("an unwrap retry resumes at the event the last attempt failed on, in the document's order", async () => {
    const s = await fresh();
    // Document order: event 2 (version 1), then event 1 (version 2), then event 3 (version 3).
    const id = await batchOf(s, "k", [2, 1, 3], T0);
    const attempt = async (now: number, failed: number, delivered: number) => {
      const c = await claimAt(s, id, now);
      const [r] = await s.dispatch.recordOutcomes([
        {
          batchId: id,
          attemptId: c.attemptId,
          owner: c.owner,
          startedAt: now,
          probe: false,
          script: false,
          outcome: outcome({
            kind: "retry",
            klass: "transport",
            reason: "http 503",
            status: 503,
            retryAfterS: 1,
            eventsDelivered: delivered,
            failedEventId: failed,
            sent: 1,
          }),
          emits: [],
          durationMs: 1,
          now: now + 1,
          jitter: 0,
          policy: POLICY,
        },
      ]);
      expect(r).toMatchObject({ state: "retry" });
    };
    await attempt(T0 + 10, 1, 1);
    await attempt(T0 + 20, 3, 2);
    // The latest failure, though a smaller id failed later in another order would read otherwise.
    expect(await s.dispatch.resumePoint(id)).toEqual({ before: 3, unconfirmed: false });
  });
}
