// The status figures as the status role reads them: batches per state (quarantine counted apart
// from dead), dead batches by reason, the oldest work still to deliver (overall and per
// destination) and what is leased per destination; a pull destination's consumers, each one's
// last lease and the batches it holds, and its leases' owners read back without their nonce.
// Every backend must give these figures.
import { expect, test } from "bun:test";
import { consumerKey } from "../../src/store/pull.ts";
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

  test("a pull destination's consumers: last lease, leased now; its owners shown without the nonce", async () => {
    const s = await fresh();
    const pull = (key: string) => ev({ key, payload: "{}", copies: [copy("r", "pull:laptop", { max_events: 1 })] });
    for (const [i, key] of ["a", "b", "c", "d"].entries()) await s.intake.enqueueAll([pull(key)], T0 + i);
    const pushed = ev({ key: "e", payload: "{}", copies: [copy("r", "http:d", { max_events: 1 })] });
    await s.intake.enqueueAll([pushed], T0 + 4);
    // A consumer's lease is the dispatcher's claim with its name and a nonce as the host (pid 0).
    const nonces = ["1".repeat(32), "2".repeat(32), "3".repeat(32)];
    const claims = await s.dispatch.claimBatches(
      [
        [1, "a", "laptop-1", nonces[0]],
        [2, "b", "laptop-1", nonces[1]],
        [3, "c", "desk.2", nonces[2]],
      ].map(([batchId, key, consumer, nonce]) => ({
        batchId: batchId as number,
        route: "r",
        key: key as string,
        destination: "pull:laptop",
        now: T0 + 10,
        leaseUntil: T0 + 70,
        host: `pull:${consumer}/${nonce}`,
        pid: 0,
      })),
    );
    expect(claims.every((c) => c !== null && c !== "gated")).toBe(true);
    const [push] = await s.dispatch.claimBatches([
      { batchId: 5, route: "r", key: "e", destination: "http:d", now: T0 + 10, leaseUntil: T0 + 70, host: "h", pid: 1 },
    ]);
    expect(push).toMatchObject({ n: 1 });
    await s.setMeta(consumerKey("pull:laptop", "laptop-1"), String(T0 + 10));
    await s.setMeta(consumerKey("pull:laptop", "idle"), String(T0 + 2));
    // A meta row that is not a consumer's, and a pushed lease: neither is a consumer.
    await s.setMeta("consumer:no-at-sign", String(T0));
    const f = await s.status.statusFacts({ now: T0 + 20, paces: new Map(), budgets: new Map(), staleS: 60 });
    expect(f.pullConsumers).toEqual([
      { destination: "pull:laptop", consumer: "idle", lastLeaseAt: T0 + 2 },
      { destination: "pull:laptop", consumer: "laptop-1", lastLeaseAt: T0 + 10 },
    ]);
    expect(f.pullLeased).toEqual([
      { destination: "pull:laptop", consumer: "desk.2", n: 1 },
      { destination: "pull:laptop", consumer: "laptop-1", n: 2 },
    ]);
    expect(Object.fromEntries(f.leased)).toEqual({ "http:d": 1, "pull:laptop": 3 });
    // The stored owner keeps the nonce (the pull API's fence); every reader but that API sees "*".
    const owner = (await s.batch(1))?.lease_owner as string;
    expect(owner).toBe(`pull:laptop-1/${nonces[0]}:0:${(claims[0] as { attemptId: number }).attemptId}`);
    const shown = `pull:laptop-1/*:0:${(claims[0] as { attemptId: number }).attemptId}`;
    expect((await s.operator.getBatch(1))?.lease_owner).toBe(shown);
    expect((await s.dashboard.getBatch(1))?.lease_owner).toBe(shown);
    const read: unknown[] = [
      await s.operator.listBatches({ limit: 10 }),
      await s.dashboard.listBatches({ limit: 10 }),
      await s.operator.getBatch(3),
      await s.dashboard.getBatch(2),
    ];
    for await (const r of s.operator.exportBatches({})) read.push(r);
    const text = JSON.stringify(read);
    for (const n of nonces) expect(text).not.toContain(n);
    expect(text).toContain('"lease_owner":"pull:desk.2/*:0:');
    expect((await s.operator.getBatch(4))?.lease_owner).toBeNull();
    expect((await s.operator.getBatch(5))?.lease_owner).toMatch(/^h:1:\d+$/);
  });
}
