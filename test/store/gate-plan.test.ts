// The destination gate as a rule: every state and hold, the rate on top of max_inflight, and the
// claim-time check PostgreSQL makes with every dispatcher's leases counted.
import { describe, expect, test } from "bun:test";
import { closedRow, type DestinationRow } from "../../src/store/destinations.ts";
import { admits, decideGate, type GateFacts } from "../../src/store/gate-plan.ts";

const NOW = 1000;
const facts = (row: Partial<DestinationRow> = {}, o: Partial<GateFacts> = {}): GateFacts => ({
  row: { ...closedRow("d"), ...row },
  inflight: 0,
  maxInflight: 4,
  now: NOW,
  rate: null,
  window: [],
  ...o,
});

describe("decideGate", () => {
  test("closed: up to max_inflight, less what is in flight", () => {
    expect(decideGate(facts())).toMatchObject({ slots: 4, probe: false, hits: Number.POSITIVE_INFINITY, held: null });
    expect(decideGate(facts({}, { inflight: 3 }))).toMatchObject({ slots: 1 });
    expect(decideGate(facts({}, { inflight: 4 }))).toMatchObject({
      slots: 0,
      held: { why: "max_inflight", until: null },
    });
  });

  test("paused holds everything, with no end", () => {
    expect(decideGate(facts({ state: "paused" }))).toMatchObject({ slots: 0, held: { why: "paused", until: null } });
  });

  test("a Retry-After holds until it passes; a 429 gate says throttled", () => {
    expect(decideGate(facts({ retry_after_until: NOW + 30 }))).toMatchObject({
      slots: 0,
      held: { why: "retry_after", until: NOW + 30 },
    });
    expect(decideGate(facts({ retry_after_until: NOW + 30, throttled_at: NOW - 30, throttle_s: 60 }))).toMatchObject({
      slots: 0,
      held: { why: "throttled", until: NOW + 30 },
    });
  });

  test("after the 429 gate: one delivery first, none beside it", () => {
    const row = { retry_after_until: NOW - 1, throttled_at: NOW - 61, throttle_s: 60 };
    expect(decideGate(facts(row))).toMatchObject({ slots: 1, probe: false, held: { why: "throttled", until: null } });
    expect(decideGate(facts(row, { inflight: 1 }))).toMatchObject({ slots: 0, held: { why: "throttled" } });
  });

  test("open: nothing until the cooldown ends, then cooled (the caller moves it to half_open)", () => {
    expect(decideGate(facts({ state: "open", opened_at: NOW - 10, cooldown_s: 30 }))).toMatchObject({
      slots: 0,
      cooled: false,
      held: { why: "open", until: NOW + 20 },
    });
    expect(decideGate(facts({ state: "open", opened_at: NOW - 30, cooldown_s: 30 }))).toMatchObject({
      slots: 0,
      cooled: true,
    });
  });

  test("half_open: one probe, none while one is out", () => {
    expect(decideGate(facts({ state: "half_open", last_probe_batch_id: 7 }))).toMatchObject({
      slots: 1,
      probe: true,
      lastProbeBatchId: 7,
    });
    expect(decideGate(facts({ state: "half_open", probe_until: NOW + 5 }))).toMatchObject({
      slots: 0,
      held: { why: "probe", until: NOW + 5 },
    });
    expect(decideGate(facts({ state: "half_open" }, { inflight: 1 }))).toMatchObject({
      slots: 0,
      held: { why: "probe", until: null },
    });
  });

  test("the rate: room in hits on top of the slots; full, held until the next slot frees", () => {
    const rate = { limit: 2, windowS: 60 };
    expect(decideGate(facts({}, { rate, window: [{ hits: 1, finishedAt: NOW - 10 }] }))).toMatchObject({
      slots: 4,
      hits: 1,
    });
    const full = decideGate(
      facts(
        {},
        {
          rate,
          window: [
            { hits: 1, finishedAt: NOW - 10 },
            { hits: 1, finishedAt: null },
          ],
        },
      ),
    );
    expect(full).toMatchObject({ slots: 0, held: { why: "rate" } });
    expect(full.held?.until).toBeCloseTo(NOW - 10 + 60 + 1);
    // Full of work in flight only: its ends will say.
    expect(decideGate(facts({}, { rate, window: [{ hits: 2, finishedAt: null }] })).held).toEqual({
      why: "rate",
      until: null,
    });
  });

  test("an unwrap batch that needs more hits than are free waits for them", () => {
    const rate = { limit: 5, windowS: 60 };
    const window = [{ hits: 3, finishedAt: NOW - 50 }];
    expect(decideGate(facts({}, { rate, window }), 2)).toMatchObject({ slots: 4, hits: 2 });
    expect(decideGate(facts({}, { rate, window }), 3)).toMatchObject({ slots: 0, held: { why: "rate" } });
  });
});

describe("admits (a claim checked again under the claim lock)", () => {
  test("a probe only as the half-open breaker's, other claims only with a slot and room", () => {
    expect(admits(facts({ state: "half_open" }), { probe: true, hits: 0 })).toBe(true);
    expect(admits(facts({ state: "half_open" }), { probe: false, hits: 0 })).toBe(false);
    expect(admits(facts(), { probe: true, hits: 0 })).toBe(false);
    expect(admits(facts({}, { inflight: 4 }), { probe: false, hits: 0 })).toBe(false);
    const rate = { limit: 1, windowS: 60 };
    expect(admits(facts({}, { rate }), { probe: false, hits: 1 })).toBe(true);
    expect(admits(facts({}, { rate, window: [{ hits: 1, finishedAt: null }] }), { probe: false, hits: 1 })).toBe(false);
    // After a 429 gate, the first claim goes and a second (another dispatcher's) does not.
    const gate = { retry_after_until: NOW - 1, throttled_at: NOW - 61 };
    expect(admits(facts(gate), { probe: false, hits: 0 })).toBe(true);
    expect(admits(facts(gate, { inflight: 1 }), { probe: false, hits: 0 })).toBe(false);
  });
});
