// The wall clock stepped forward a day during a run, in-process with the injected clock:
// every open window closes at once and every backoff is due; the deadlines of workers in flight
// fire early (a transport retry, not a lost lease); the tick never recovers a lease one of its own
// live workers holds; and a late mark from a worker whose lease was taken is fenced, so one batch
// records one result. test/dispatch/loop.test.ts has the one-window case and the plain deadline.
import { expect, test } from "bun:test";
import { seededRng } from "../../src/clock.ts";
import { loadConfig } from "../../src/config/load.ts";
import { type Outcome, outcome } from "../../src/delivery.ts";
import { Dispatcher } from "../../src/dispatch/loop.ts";
import { createLogger } from "../../src/log.ts";
import { getMetaNumber } from "../../src/store/sqlite/meta.ts";
import { batchIdOf, down, fakeDestination, ok, rig } from "../helpers/dispatch.ts";
import { T0 } from "../helpers/spool.ts";
import { facts } from "./support.ts";
import { sqliteDispatchStore } from "../../src/store/sqlite/store.ts";

const DAY = 86400;

test(
  "a day forward: every open window closes and every backoff is due in the same tick; no fact is " + "rewritten",
  async () => {
    const a = fakeDestination("hermes:a", { maxInflight: 8 });
    const r = rig(`[sources.s]\naction = "hermes:a"\n`, [a]);
    let failing = true;
    const retrying = batchIdOf(r.put("R", "hermes:a"));
    a.answer = (call) => (call.batchId === retrying && failing ? down() : ok());
    const windows = [
      { quiet_s: 60, max_s: 300 },
      { quiet_s: 3600, max_s: DAY },
      { quiet_s: 600, max_s: 7200 },
    ];
    const open = windows.map((w, i) => batchIdOf(r.put(`W${i}`, "hermes:a", { window: w })));
    await r.step();
    expect(r.batch(retrying).state).toBe("retry");
    for (const id of open) expect(r.batch(id).state).toBe("open");
    const before = facts(r.spool);
    failing = false;

    r.clock.advance(DAY);
    const calls = a.calls.length;
    await r.step(); // one tick
    expect(a.calls.length - calls).toBe(1 + open.length);
    for (const id of [retrying, ...open]) expect(r.batch(id).state).toBe("delivered");
    for (const id of open) expect(r.batch(id).sealed_at).toBe(T0 + DAY);
    // first_at, last_at, received_at and the attempt history are the facts they were.
    const after = facts(r.spool);
    const pick = (bs: Record<string, unknown>[]) =>
      bs
        .filter((b) => open.includes(b.id as number))
        .map(({ id, first_at, last_at, count, bytes }) => ({ id, first_at, last_at, count, bytes }));
    expect(pick(after.batches)).toEqual(pick(before.batches));
    expect(after.events).toEqual(before.events);
    expect(after.attempts.slice(0, before.attempts.length)).toEqual(before.attempts);
    expect(getMetaNumber(r.spool, "last_tick_at")).toBe(T0 + DAY);
  },
);

/** A destination whose answer waits for the abort signal (or for the test to release it). */
function hanging(name: string, timeoutS: number, opts: { honourAbort: boolean }) {
  const d = fakeDestination(name, { timeoutS });
  const waiting: ((o: Outcome) => void)[] = [];
  d.answer = (_call, ctx) =>
    new Promise<Outcome>((resolve) => {
      waiting.push(resolve);
      if (opts.honourAbort)
        ctx.deadline.signal.addEventListener("abort", () =>
          resolve(outcome({ kind: "retry", klass: "transport", reason: "worker deadline" })),
        );
    });
  return { d, release: (o: Outcome = ok()) => waiting.splice(0).forEach((f) => f(o)) };
}

test(
  "a day forward mid-attempt: the worker's deadline fires early (transport retry) and its lease is " +
    "never recovered by the tick",
  async () => {
    // timeout_s 20, lease_grace_s 5: lease_until = T0 + 25, the worker's deadline T0 + 20. Both are
    // wall-clock instants; a day forward puts both in the past at once.
    const { d, release } = hanging("hermes:slow", 20, { honourAbort: true });
    const r = rig(`[dispatch]\nlease_grace_s = 5\n\n[sources.s]\naction = "hermes:slow"\n`, [d]);
    const id = batchIdOf(r.put("A", "hermes:slow"));
    try {
      await r.d.tick();
      expect(r.batch(id)).toMatchObject({ state: "leased", lease_until: T0 + 25 });
      const t = performance.now();
      r.clock.advance(DAY);
      await r.d.tick();
      // The tick did not take its own live worker's lease away.
      expect(r.attempts(id).map((x) => x.error)).not.toContain("lease expired");
      // The deadline has passed on the dispatcher's clock: the attempt ends now, not 20 s from now.
      const until = performance.now() + 1500;
      while (r.batch(id).state === "leased" && performance.now() < until) {
        await Bun.sleep(20);
        await r.d.tick();
      }
      expect(r.batch(id)).toMatchObject({ state: "retry", last_class: "transport" });
      expect(performance.now() - t).toBeLessThan(1500);
      const [attempt] = r.attempts(id);
      expect(attempt).toMatchObject({ outcome: "retry", klass: "transport", counted: 0 });
      expect(attempt.error).not.toBe("lease expired");
    } finally {
      release(down());
      await r.d.drain();
    }
  },
);

test(
  "a day forward, two dispatchers on one spool: the one that finds the lease expired delivers, the " +
    "late mark is fenced, one result",
  async () => {
    // A's worker ignores its abort signal, the pathological case fencing guards against: it returns late.
    const slow = hanging("hermes:a", 20, { honourAbort: false });
    const r = rig(`[dispatch]\nlease_grace_s = 5\n\n[sources.s]\naction = "hermes:a"\n`, [slow.d]);
    const id = batchIdOf(r.put("A", "hermes:a"));
    const quick = fakeDestination("hermes:a");
    const loadOptions = { home: r.home, env: {}, cwd: r.home };
    const b = new Dispatcher({
      store: sqliteDispatchStore(r.spool),
      loaded: loadConfig(loadOptions),
      loadOptions,
      clock: r.clock,
      rng: seededRng(9),
      log: createLogger("dispatch", { clock: r.clock }),
      destinations: () => quick,
      host: "otherhost",
      pid: 4343,
    });
    try {
      await r.d.tick(); // A claims: lease_until = T0 + 25
      const ownerA = r.batch(id).lease_owner as string;
      expect(ownerA).toStartWith("testhost:4242:");
      await b.tick(); // before the jump B leaves a lease that has not expired alone
      expect(r.batch(id).lease_owner).toBe(ownerA);

      r.clock.advance(DAY);
      await r.d.tick(); // A never recovers the lease its own live worker holds
      expect(r.batch(id)).toMatchObject({ state: "leased", lease_owner: ownerA });
      await b.tick(); // to B it is an expired lease of someone else: recovered, claimed, delivered
      await b.drain();
      expect(quick.calls.map((c) => c.batchId)).toEqual([id]);
      expect(r.batch(id)).toMatchObject({ state: "delivered", delivered_at: T0 + DAY });

      slow.release(ok()); // A's answer arrives late
      await r.d.drain();
      expect(r.batch(id)).toMatchObject({ state: "delivered", delivered_at: T0 + DAY });
      const attempts = r.attempts(id);
      expect(attempts.map((x) => x.outcome)).toEqual(["discarded", "ok"]);
      expect(attempts.filter((x) => x.outcome === "ok").length).toBe(1);
    } finally {
      slow.release(down());
      await r.d.drain();
      await b.drain();
    }
  },
);
