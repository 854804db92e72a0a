// The wall clock stepped back an hour during a run, in-process with the injected clock:
// now_eff = max(wall, last_tick_at) stands still, so nothing becomes due early (a backoff, a
// quiet window, a dead owner's lease), no stored fact is rewritten (first_at, last_at,
// received_at, next_attempt_at), last_tick_at never moves back, and delivery resumes as the
// wall clock catches up. test/dispatch/loop.test.ts has the one-batch case; this is the whole spool.
import { expect, test } from "bun:test";
import { claimBatch } from "../../src/store/sqlite/claim.ts";
import { sealReady } from "../../src/store/sqlite/queue.ts";
import { getMetaNumber } from "../../src/store/sqlite/meta.ts";
import { batchIdOf, down, fakeDestination, ok, rig } from "../helpers/dispatch.ts";
import { T0 } from "../helpers/spool.ts";
import { facts, rows } from "./support.ts";

const CONFIG = `[dispatch]\nheartbeat_s = 10\n\n[sources.s]\naction = "hermes:a"\n`;

test(
  "an hour back: time stands still for every batch, nothing is rewritten, and it all resumes on " + "catch-up",
  async () => {
    const a = fakeDestination("hermes:a");
    const r = rig(CONFIG, [a]);
    let failing = true;
    const retrying = batchIdOf(r.put("R", "hermes:a"));
    a.answer = (call) => (call.batchId === retrying && failing ? down() : ok());
    const delivered = batchIdOf(r.put("D", "hermes:a"));
    const open = batchIdOf(r.put("O", "hermes:a", { window: { quiet_s: 60, max_s: 600 } }));
    await r.step(); // T0: R fails (backoff), D delivered, O open
    expect([r.batch(retrying).state, r.batch(delivered).state, r.batch(open).state]).toEqual([
      "retry",
      "delivered",
      "open",
    ]);
    const due = r.batch(retrying).next_attempt_at as number;
    expect(due).toBeGreaterThan(T0 + 10);

    // A batch leased by a dispatcher that died, its lease running to T0 + 40.
    const orphan = batchIdOf(r.put("L", "hermes:a"));
    sealReady(r.spool, T0);
    expect(
      claimBatch(r.spool, {
        batchId: orphan,
        destination: "hermes:a",
        now: T0,
        leaseUntil: T0 + 40,
        host: "deadhost",
        pid: 1,
      }),
    ).not.toBeNull();
    // A second batch behind R on the same key waits for R (FIFO), whatever the clock does.
    const behind = batchIdOf(r.put("R", "hermes:a"));

    r.clock.set(T0 + 10);
    await r.step(); // the heartbeat persists last_tick_at = T0 + 10
    const lastTick = T0 + 10;
    expect(getMetaNumber(r.spool, "last_tick_at")).toBe(lastTick);
    expect(r.batch(orphan).state).toBe("leased");
    const calls = a.calls.length;
    const before = facts(r.spool);

    // The step: the wall clock jumps back an hour and runs on for 50 minutes without catching up.
    r.clock.set(lastTick - 3600);
    for (let i = 0; i < 10; i++) {
      await r.step();
      r.clock.advance(300);
    }
    expect(r.clock.now()).toBeLessThan(lastTick);
    expect(a.calls.length).toBe(calls);
    expect(facts(r.spool)).toEqual(before);
    expect(getMetaNumber(r.spool, "last_tick_at")).toBe(lastTick);
    // The heartbeat itself kept beating, with the wall clock it saw.
    expect(getMetaNumber(r.spool, "dispatcher_heartbeat_at")).toBeLessThan(lastTick);

    // An event arriving meanwhile is stamped with the wall clock (the intake uses it as is), but it
    // cannot pull its batch's last_at back, so the quiet window does not close early either.
    const lastAt = r.batch(open).last_at;
    r.put("O", "hermes:a", { window: { quiet_s: 60, max_s: 600 } });
    await r.step();
    expect(r.batch(open)).toMatchObject({ state: "open", count: 2, last_at: lastAt, first_at: T0 });
    const joined = rows(r.spool, "events", `batch_id = ${open}`);
    expect(joined[1].received_at).toBe(r.clock.now());
    expect(joined[0]).toEqual(before.events.find((e) => e.id === joined[0].id) as Record<string, unknown>);

    // Catch-up, step by step: each thing happens when its own time comes, not before.
    failing = false;
    r.clock.set(lastTick + 1);
    await r.step();
    expect(r.batch(retrying).state).toBe("retry");
    expect(r.batch(orphan).state).toBe("leased");
    r.clock.set(T0 + 41);
    await r.step(); // the orphan's lease ends: recovered and, due now, delivered
    expect(r.batch(orphan).state).toBe("delivered");
    expect(r.attempts(orphan)[0]).toMatchObject({ error: "lease expired" });
    r.clock.set(due);
    await r.step(); // R's backoff ends: delivered; the batch behind it waits for the next tick
    expect(r.batch(retrying).state).toBe("delivered");
    await r.step();
    expect(r.batch(behind).state).toBe("delivered");
    expect(r.batch(open).state).toBe("open");
    r.clock.set((lastAt as number) + 60);
    await r.step();
    expect(r.batch(open)).toMatchObject({
      state: "delivered",
      sealed_at: (lastAt as number) + 60,
      first_at: T0,
      last_at: lastAt,
    });

    // No attempt started before its batch was due.
    const started = (id: number) => r.attempts(id).map((x) => x.started_at as number);
    expect(Math.min(...started(retrying).slice(1))).toBeGreaterThanOrEqual(due);
    expect(Math.min(...started(orphan).slice(1))).toBeGreaterThanOrEqual(T0 + 40);
    expect(Math.min(...started(open))).toBeGreaterThanOrEqual((lastAt as number) + 60);
  },
);
