// The status figures as the status role reads them: batches per state (quarantine counted apart
// from dead), dead batches by reason, the oldest work still to deliver (overall and per
// destination) and what is leased per destination. Every backend must give these figures.
import { expect, test } from "bun:test";
import { attemptWith } from "../helpers/attempts.ts";
import { copy, ev, T0 } from "../helpers/spool.ts";
import type { Suite } from "./suite.ts";

/** The status cases, on whatever store fresh() opens. */
export function statusCases({ fresh }: Suite): void {
  test("per state, dead by reason, oldest pending, leased", async () => {
    const s = await fresh();
    const events = [
      ev({ key: "a", payload: '{"a":1}', copies: [copy("r", "http:d", { max_events: 1 })] }),
      ev({ key: "b", payload: '{"b":1}', copies: [copy("r", "http:d", { max_events: 1 })] }),
      ev({ key: "c", payload: '{"c":1}', copies: [copy("r", "http:e")] }),
    ];
    for (const [i, e] of events.entries()) await s.intake.enqueueAll([e], T0 + i);
    // Batch 1 leased and then dead (rejected); batch 2 leased and left so; batch 3 open.
    const lease = (id: number, key: string, now: number) =>
      s.dispatch.claimBatches([
        { batchId: id, route: "r", key, destination: "http:d", now, leaseUntil: now + 60, host: "h", pid: 1 },
      ]);
    const dead = await attemptWith(s, {
      batchId: 1,
      route: "r",
      key: "a",
      now: T0 + 5,
      endAt: T0 + 6,
      durationMs: 2,
      outcome: { kind: "dead", klass: "permanent", reason: "http 422", status: 422 },
    });
    expect(dead).toMatchObject({ applied: true, state: "dead", deadReason: "rejected" });
    const [c2] = await lease(2, "b", T0 + 7);
    expect(c2).toMatchObject({ n: 1, leaseUntil: T0 + 67 });
    await s.intake.quarantine(
      { source: "s", raw: new Uint8Array([0xff]), headers: {}, authHeaders: [], url: null, reason: "not_utf8" },
      T0 + 8,
    );
    const f = await s.status.statusFacts({ now: T0 + 10, paces: new Map(), budgets: new Map(), staleS: 60 });
    expect(f.batches).toEqual({
      open: 1,
      sealed: 0,
      leased: 1,
      retry: 0,
      awaiting: 0,
      delivered: 0,
      dead: 1,
      dropped: 0,
      quarantined: 1,
    });
    expect(f.deadReasons).toEqual({
      rejected: 1,
      exhausted: 0,
      poison: 0,
      processor_permanent: 0,
      bad_emit: 0,
      config: 0,
      quarantined: 1,
      agent_failed: 0,
    });
    // Batch 1 is dead: http:d's oldest still to deliver is batch 2 (T0 + 1); http:e's is batch 3.
    expect(f.pending).toEqual({
      overall: T0 + 1,
      byDestination: new Map([
        ["http:d", T0 + 1],
        ["http:e", T0 + 2],
      ]),
    });
    expect(f.leased).toEqual(new Map([["http:d", 1]]));
  });
}
