// Export through the operator role: every batch with its events (payloads, headers, raw bodies
// as base64) and attempts, oldest first, and its filters (source, destination, the last_at
// window, state, and `after`, where an export cut short goes on), across more batches than one
// page reads. Every backend must give these records.
import { expect, test } from "bun:test";
import type { BatchRow } from "../../src/store/batches.ts";
import { EXPORT_PAGE, type ExportEvent, type ExportFilter, type ExportRecord } from "../../src/store/export.ts";
import { copy, ev, T0 } from "../helpers/spool.ts";
import type { StoreUnderTest } from "../helpers/store-under-test.ts";
import type { Suite } from "./suite.ts";

/** A batch row of these cases: http:d's, sealed when its second event came, not yet attempted. */
const batch = (over: Partial<BatchRow>): BatchRow => ({
  id: 0,
  route: "r",
  source: "s",
  destination: "http:d",
  key: "k",
  state: "sealed",
  first_at: T0,
  last_at: T0,
  quiet_s: 60,
  max_s: 300,
  max_events: 2,
  max_bytes: 786432,
  not_before: null,
  count: 2,
  bytes: 180,
  sealed_at: null,
  content_hash: null,
  attempts: 0,
  next_attempt_at: null,
  lease_until: null,
  lease_owner: null,
  last_error: null,
  last_class: null,
  delivered_at: null,
  result: null,
  dead_reason: null,
  stale_floor: null,
  floor_at: null,
  ...over,
});

/** Event `id`, the i-th enqueued (payload {"i": i}), as export gives it. */
const event = (id: number, i: number, at: number): ExportEvent => ({
  id,
  event_type: "t",
  received_at: at,
  dedup_id: null,
  size: 90,
  excluded_at: null,
  route: "r",
  payload: JSON.stringify({ i }),
  trace: null,
  version: null,
  headers: {},
  raw_base64: null,
});

/** The export cases, on whatever store fresh() opens. */
export function exportCases({ fresh }: Suite): void {
  const all = async (s: StoreUnderTest, filter: ExportFilter) => {
    const out: ExportRecord[] = [];
    for await (const r of s.operator.exportBatches(filter)) out.push(r);
    return out;
  };

  test("batches, events with payloads, headers and raw bodies, attempts; filters", async () => {
    const s = await fresh();
    for (let i = 0; i < 7; i++) {
      const e = ev({
        key: `k${i % 3}`,
        source: i % 2 ? "a" : "b",
        payload: JSON.stringify({ i }),
        copies: [copy("r", "http:d", { max_events: 2 })],
      });
      await s.intake.enqueueAll([e], T0 + i);
    }
    const q = {
      source: "gh",
      raw: new Uint8Array([0, 255, 123, 10]),
      headers: { "X-GitHub-Event": "push" },
      authHeaders: [],
      url: "/hooks/gh",
      reason: "not_json",
    };
    await s.intake.quarantine(q, T0 + 8);
    const [c] = await s.dispatch.claimBatches([
      { batchId: 1, route: "r", key: "k0", destination: "http:d", now: T0 + 9, leaseUntil: T0 + 99, host: "h", pid: 1 },
    ]);
    expect(c).toEqual({ attemptId: 1, n: 1, owner: "h:1:1", leaseUntil: T0 + 99, deliveryId: null, resend: 0 });
    const records = await all(s, {});
    expect(records).toEqual([
      {
        batch: batch({
          id: 1,
          source: "b",
          key: "k0",
          state: "leased",
          first_at: T0,
          last_at: T0 + 3,
          sealed_at: T0 + 3,
          content_hash: "sha256:33498c7234add8643cb3c101767d59afca6c6f8f3678841d83b38b147a50753f",
          lease_until: T0 + 99,
          lease_owner: "h:1:1",
          floor_at: T0 + 9,
        }),
        events: [event(1, 0, T0), event(4, 3, T0 + 3)],
        attempts: [
          {
            id: 1,
            batch_id: 1,
            n: 1,
            destination: "http:d",
            started_at: T0 + 9,
            finished_at: null,
            outcome: null,
            klass: null,
            status: null,
            error: null,
            duration_ms: null,
            probe: 0,
            counted: 0,
            delivery_id: null,
            events_delivered: null,
            failed_event_id: null,
            hits: null,
            answer: null,
            unconfirmed: 0,
          },
        ],
      },
      {
        batch: batch({
          id: 2,
          source: "a",
          key: "k1",
          first_at: T0 + 1,
          last_at: T0 + 4,
          sealed_at: T0 + 4,
          content_hash: "sha256:6ec9b3d4fc8febfe783aba2cc32df6a08d77fa0f7f8414f930b90f25a388abd2",
        }),
        events: [event(2, 1, T0 + 1), event(5, 4, T0 + 4)],
        attempts: [],
      },
      {
        batch: batch({
          id: 3,
          source: "b",
          key: "k2",
          first_at: T0 + 2,
          last_at: T0 + 5,
          sealed_at: T0 + 5,
          content_hash: "sha256:136faba6c4f154f8050c1d00a9dd4ab81f4a3ef91737f5827767d10d6a3dd94e",
        }),
        events: [event(3, 2, T0 + 2), event(6, 5, T0 + 5)],
        attempts: [],
      },
      {
        batch: batch({
          id: 4,
          source: "b",
          key: "k0",
          state: "open",
          first_at: T0 + 6,
          last_at: T0 + 6,
          count: 1,
          bytes: 90,
        }),
        events: [event(7, 6, T0 + 6)],
        attempts: [],
      },
      {
        // The quarantined request: no payload, its non-credential headers, its raw body as base64.
        batch: batch({
          id: 5,
          route: "gh",
          source: "gh",
          destination: "quarantine",
          key: "quarantine",
          state: "dead",
          first_at: T0 + 8,
          last_at: T0 + 8,
          quiet_s: 0,
          max_s: 0,
          max_events: 1,
          max_bytes: 4,
          count: 1,
          bytes: 4,
          sealed_at: T0 + 8,
          content_hash: "sha256:cf06826a3fc64d81cca5d42c266d5ca9709cba2b73237a8146b6b74b79c06302",
          last_error: "not_json",
          last_class: "quarantine",
          dead_reason: "quarantined",
        }),
        events: [
          {
            id: 8,
            event_type: "",
            received_at: T0 + 8,
            dedup_id: null,
            size: 4,
            excluded_at: null,
            route: "gh",
            payload: null,
            trace: { stage: "quarantined", reason: "not_json" },
            version: null,
            headers: { "X-GitHub-Event": "push" },
            raw_base64: "AP97Cg==",
          },
        ],
        attempts: [],
      },
    ]);
    // Each filter gives the matching records, whole and in order; `after` goes on past a batch id.
    for (const [filter, ids] of [
      [{ source: "a" }, [2]],
      [{ destination: "quarantine" }, [5]],
      [{ since: T0 + 3, until: T0 + 6 }, [1, 2, 3, 4]],
      [{ state: "leased" }, [1]],
      [{ after: 2 }, [3, 4, 5]],
      [{ source: "a", after: 2 }, []],
    ] as [ExportFilter, number[]][]) {
      expect({ filter, records: await all(s, filter) }).toEqual({
        filter,
        records: records.filter((r) => ids.includes(r.batch.id)),
      });
    }
  });

  test(`more batches than a page (${EXPORT_PAGE}): every record once, in id order, across the pages`, async () => {
    const s = await fresh();
    const n = EXPORT_PAGE + 2;
    // One request of n events, one batch each (its own key, max_events 1), in one transaction.
    const evs = Array.from({ length: n }, (_, i) =>
      ev({ key: `p${i}`, payload: `{"p":${i}}`, copies: [copy("r", "http:d", { max_events: 1 })] }),
    );
    expect((await s.intake.enqueueAll(evs, T0)).filter((r) => r.status === "queued")).toHaveLength(n);
    const records = await all(s, {});
    expect(records.map((r) => r.batch.id)).toEqual(Array.from({ length: n }, (_, i) => i + 1));
    expect(records.map((r) => r.events.map((e) => e.payload))).toEqual(
      Array.from({ length: n }, (_, i) => [`{"p":${i}}`]),
    );
    // Going on after the first page's last batch: the rest.
    expect((await all(s, { after: EXPORT_PAGE })).map((r) => r.batch.id)).toEqual([EXPORT_PAGE + 1, EXPORT_PAGE + 2]);
  });
}
