// Sharing commits, on both backends: the slots one tick fills are leased in one transaction,
// attempts that end together are recorded in one, and in both each batch is decided alone under
// its savepoint. The store's cases go through the dispatch role the dispatcher uses.
import { expect, setDefaultTimeout, test } from "bun:test";
import { outcome } from "../../src/delivery.ts";
import { dispatchCounters, renderDispatchCounters } from "../../src/obs/counters.ts";
import type { OutcomeInput } from "../../src/store/outcome-plan.ts";
import { batchIdOf, fakeDestination, ok, rigOn } from "../helpers/dispatch.ts";
import { waitFor } from "../helpers/proc.ts";
import { copy, ev } from "../helpers/spool.ts";
import { onBothWorlds, type World } from "../helpers/world.ts";

setDefaultTimeout(30_000);

const POLICY = {
  maxAttempts: 10,
  backoffBaseS: 15,
  backoffCapS: 3600,
  tripAfter: 5,
  cooldownInitialS: 30,
  cooldownMaxS: 600,
};

async function sealedBatches(w: World, n: number, destination = "http:d") {
  const ids: number[] = [];
  for (let i = 0; i < n; i++)
    ids.push(
      batchIdOf(
        await w.enqueue(
          ev({ key: `k${i}`, copies: [copy(`r:${destination}`, destination, { max_events: 1 })] }),
          w.t0 + i,
        ),
      ),
    );
  return { ids, store: await w.dispatch() };
}

const batchRow = async (w: World, id: number) =>
  (await w.rows.get("SELECT * FROM batches WHERE id = ?", id)) as Record<string, unknown>;

onBothWorlds((open) => {
  const claimOf = (w: World, id: number, i: number, destination = "http:d") => ({
    batchId: id,
    destination,
    route: `r:${destination}`,
    key: `k${i}`,
    now: w.t0 + 10,
    leaseUntil: w.t0 + 70,
    host: "h",
    pid: 1,
  });

  test("claimBatches leases several batches in one transaction; one taken first is null in its place", async () => {
    const w = await open();
    const { store, ids } = await sealedBatches(w, 3);
    await w.rows.run("UPDATE batches SET state = 'dropped' WHERE id = ?", ids[1]);
    const claims = await store.claimBatches(ids.map((id, i) => claimOf(w, id, i)));
    expect(claims.map((c) => c !== null && c !== "gated")).toEqual([true, false, true]);
    expect((await Promise.all(ids.map((id) => batchRow(w, id)))).map((b) => b.state)).toEqual([
      "leased",
      "dropped",
      "leased",
    ]);
    // The lost race left nothing behind: no attempt row for the dropped batch.
    expect((await w.rows.all("SELECT batch_id FROM attempts ORDER BY id")).map((a) => a.batch_id)).toEqual([
      ids[0],
      ids[2],
    ]);
    const c0 = claims[0] === "gated" ? null : claims[0];
    expect(c0?.owner).toBe(`h:1:${c0?.attemptId}`);
  });

  test("recordOutcomes: an outcome that throws is undone alone, the others commit", async () => {
    const w = await open();
    const { store, ids } = await sealedBatches(w, 2);
    const claimed = await store.claimBatches(ids.map((id, i) => claimOf(w, id, i)));
    const claims = claimed.map((c) => (c === "gated" ? null : c));
    const input = (i: number, emits: OutcomeInput["emits"]): OutcomeInput => ({
      batchId: ids[i],
      attemptId: claims[i]?.attemptId ?? 0,
      owner: claims[i]?.owner ?? "",
      startedAt: w.t0 + 10,
      probe: false,
      script: true,
      outcome: outcome({ kind: "ok", reason: "ok", status: 0 }),
      emits,
      durationMs: 3,
      now: w.t0 + 11,
      jitter: 0.5,
      policy: POLICY,
    });
    // An emit with no copies is refused by the enqueue: the second outcome throws inside its savepoint.
    const r = await store.recordOutcomes([input(0, []), input(1, [ev({ copies: [] })])]);
    expect(r[0]).toMatchObject({ applied: true, state: "delivered" });
    expect(r[1]).toBeInstanceOf(Error);
    expect((await Promise.all(ids.map((id) => batchRow(w, id)))).map((b) => b.state)).toEqual(["delivered", "leased"]);
    expect(await w.rows.get("SELECT finished_at FROM attempts WHERE batch_id = ?", ids[1])).toEqual({
      finished_at: null,
    });
  });

  test(
    "candidates stop at the slots asked for, per destination," + " and a full destination does not hide another's",
    async () => {
      const w = await open();
      const store = await w.dispatch();
      const T0 = w.t0;
      const a: number[] = [];
      for (let i = 0; i < 6; i++)
        a.push(
          batchIdOf(await w.enqueue(ev({ key: `a${i}`, copies: [copy("r:a", "http:a", { max_events: 1 })] }), T0 + i)),
        );
      const b = batchIdOf(
        await w.enqueue(ev({ key: "b", copies: [copy("r:b", "http:b", { max_events: 1 })] }), T0 + 100),
      );
      // a's six are older than b's one: a global LIMIT 2 would return only a's.
      expect((await store.candidates(T0 + 200, 2)).map((c) => c.id)).toEqual([a[0], a[1], b]);
      expect((await store.candidates(T0 + 200, Number.POSITIVE_INFINITY)).map((c) => c.id)).toEqual([...a, b]);
      // A group's second batch is no head while its first is unfinished, even with slots to spare.
      const a0b = batchIdOf(
        await w.enqueue(ev({ key: "a0", copies: [copy("r:a", "http:a", { max_events: 1 })] }), T0 + 150),
      );
      expect((await store.candidates(T0 + 200, 10)).map((c) => c.id)).not.toContain(a0b);
    },
  );

  test("deliveries that end together are recorded in one outcome transaction", async () => {
    const a = fakeDestination("hermes:a", { maxInflight: 4 });
    let release: () => void = () => {};
    const gate = new Promise<void>((res) => {
      release = res;
    });
    a.answer = async () => {
      await gate;
      return ok();
    };
    const r = await rigOn(open, `[sources.s]\naction = "hermes:a"\n`, [a]);
    const ids: number[] = [];
    for (const k of ["A", "B", "C", "D"]) ids.push(batchIdOf(await r.put(k, "hermes:a")));
    const before = { ...dispatchCounters };
    await r.d.tick();
    // On PostgreSQL the deliveries reach the destination after tick() returns (a claim's round trip).
    await waitFor("the four deliveries", () => a.calls.length >= 4, 5_000);
    expect(a.calls).toHaveLength(4);
    release();
    await r.d.drain();
    expect((await Promise.all(ids.map((id) => r.batch(id)))).map((b) => b.state)).toEqual([
      "delivered",
      "delivered",
      "delivered",
      "delivered",
    ]);
    expect(r.d.outcomes.stats).toEqual({ commits: 1, outcomes: 4 });
    // The same in the process's counters /metrics shows: one claim commit and one outcome commit for the four.
    expect({
      claimCommits: dispatchCounters.claimCommits - before.claimCommits,
      claims: dispatchCounters.claims - before.claims,
      outcomeCommits: dispatchCounters.outcomeCommits - before.outcomeCommits,
      outcomes: dispatchCounters.outcomes - before.outcomes,
    }).toEqual({ claimCommits: 1, claims: 4, outcomeCommits: 1, outcomes: 4 });
    expect(dispatchCounters.wakeups).toBeGreaterThan(before.wakeups);
    const text = renderDispatchCounters();
    expect(text).toContain(`hookspool_dispatcher_wakeups_total ${dispatchCounters.wakeups}\n`);
    expect(text).toContain(`hookspool_dispatcher_batches_total{kind="outcome"} ${dispatchCounters.outcomes}\n`);
  });
});
