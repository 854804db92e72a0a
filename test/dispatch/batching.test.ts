// Sharing commits: the slots one tick fills are leased in one transaction, attempts that end
// together are recorded in one, and in both each batch is decided alone under its savepoint.
import { expect, test } from "bun:test";
import { outcome } from "../../src/delivery.ts";
import { dispatchCounters, renderDispatchCounters } from "../../src/obs/counters.ts";
import { candidates, claimBatches } from "../../src/store/sqlite/queue.ts";
import { enqueue } from "../../src/store/sqlite/enqueue.ts";
import type { OutcomeInput } from "../../src/store/outcome-plan.ts";
import { recordOutcomes } from "../../src/store/sqlite/outcome.ts";
import { batchIdOf, fakeDestination, ok, rig } from "../helpers/dispatch.ts";
import { batchRow, copy, ev, freshSpool, T0 } from "../helpers/spool.ts";

const POLICY = {
  maxAttempts: 10,
  backoffBaseS: 15,
  backoffCapS: 3600,
  tripAfter: 5,
  cooldownInitialS: 30,
  cooldownMaxS: 600,
};

function sealedBatches(n: number, destination = "http:d") {
  const t = freshSpool();
  const ids = Array.from({ length: n }, (_, i) =>
    batchIdOf(
      enqueue(
        t.spool,
        ev({ key: `k${i}`, copies: [copy(`r:${destination}`, destination, { max_events: 1 })] }),
        T0 + i,
      ),
    ),
  );
  return { ...t, ids };
}

const claimOf = (id: number, destination = "http:d") => ({
  batchId: id,
  destination,
  now: T0 + 10,
  leaseUntil: T0 + 70,
  host: "h",
  pid: 1,
});

test("claimBatches leases several batches in one transaction; one taken first is null in its place", () => {
  const { spool, ids } = sealedBatches(3);
  spool.db.query("UPDATE batches SET state = 'dropped' WHERE id = ?").run(ids[1]);
  const claims = claimBatches(
    spool,
    ids.map((id) => claimOf(id)),
  );
  expect(claims.map((c) => c !== null)).toEqual([true, false, true]);
  expect(ids.map((id) => batchRow(spool, id).state)).toEqual(["leased", "dropped", "leased"]);
  // The lost race left nothing behind: no attempt row for the dropped batch.
  expect(
    (spool.db.query("SELECT batch_id FROM attempts ORDER BY id").all() as { batch_id: number }[]).map(
      (a) => a.batch_id,
    ),
  ).toEqual([ids[0], ids[2]]);
  expect(claims[0]?.owner).toBe(`h:1:${claims[0]?.attemptId}`);
});

test("recordOutcomes: an outcome that throws is undone alone, the others commit", () => {
  const { spool, ids } = sealedBatches(2);
  const claims = claimBatches(
    spool,
    ids.map((id) => claimOf(id)),
  );
  const input = (i: number, emits: OutcomeInput["emits"]): OutcomeInput => ({
    batchId: ids[i],
    attemptId: claims[i]?.attemptId ?? 0,
    owner: claims[i]?.owner ?? "",
    startedAt: T0 + 10,
    probe: false,
    script: true,
    outcome: outcome({ kind: "ok", reason: "ok", status: 0 }),
    emits,
    durationMs: 3,
    now: T0 + 11,
    jitter: 0.5,
    policy: POLICY,
  });
  // An emit with no copies is refused by the enqueue: the second outcome throws inside its savepoint.
  const r = recordOutcomes(spool, [input(0, []), input(1, [ev({ copies: [] })])]);
  expect(r[0]).toMatchObject({ applied: true, state: "delivered" });
  expect(r[1]).toBeInstanceOf(Error);
  expect(ids.map((id) => batchRow(spool, id).state)).toEqual(["delivered", "leased"]);
  expect(spool.db.query("SELECT finished_at FROM attempts WHERE batch_id = ?").get(ids[1])).toEqual({
    finished_at: null,
  });
});

test("candidates stop at the slots asked for, per destination, and a full destination does not hide another's", () => {
  const t = freshSpool();
  const a = Array.from({ length: 6 }, (_, i) =>
    batchIdOf(enqueue(t.spool, ev({ key: `a${i}`, copies: [copy("r:a", "http:a", { max_events: 1 })] }), T0 + i)),
  );
  const b = batchIdOf(enqueue(t.spool, ev({ key: "b", copies: [copy("r:b", "http:b", { max_events: 1 })] }), T0 + 100));
  // a's six are older than b's one: a global LIMIT 2 would return only a's.
  expect(candidates(t.spool, T0 + 200, 2).map((c) => c.id)).toEqual([a[0], a[1], b]);
  expect(candidates(t.spool, T0 + 200).map((c) => c.id)).toEqual([...a, b]);
  // A group's second batch is no head while its first is unfinished, even with slots to spare.
  const a0b = batchIdOf(
    enqueue(t.spool, ev({ key: "a0", copies: [copy("r:a", "http:a", { max_events: 1 })] }), T0 + 150),
  );
  expect(candidates(t.spool, T0 + 200, 10).map((c) => c.id)).not.toContain(a0b);
});

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
  const r = rig(`[sources.s]\naction = "hermes:a"\n`, [a]);
  const ids = ["A", "B", "C", "D"].map((k) => batchIdOf(r.put(k, "hermes:a")));
  const before = { ...dispatchCounters };
  await r.d.tick();
  expect(a.calls).toHaveLength(4);
  release();
  await r.d.drain();
  expect(ids.map((id) => r.batch(id).state)).toEqual(["delivered", "delivered", "delivered", "delivered"]);
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
