// The destination breaker and gate: trip on one key, rotating probe, only probes
// re-trip, probe_until, a single-batch destination stays open, pause/resume, Retry-After gate,
// and the poison rule (with a flaky receiver that must not poison healthy batches); on both backends.
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { seededRng } from "../../src/clock.ts";
import { outcome } from "../../src/delivery.ts";
import { batchIdOf, down, fakeDestination, ok, rigOn, type WorldRig } from "../helpers/dispatch.ts";
import { waitFor } from "../helpers/proc.ts";
import { onBothWorlds } from "../helpers/world.ts";

setDefaultTimeout(60_000);

const BASE = `[sources.s]\naction = "hermes:a"\n`;

/** When the open breaker of hermes:a lets a probe through: opened_at + cooldown_s. */
async function reopensAt(r: WorldRig): Promise<number> {
  const d = await r.dest("hermes:a");
  return (d.opened_at as number) + (d.cooldown_s as number);
}

/** Move the clock to when batch `id` is due, then tick. */
async function dueStep(r: WorldRig, id: number): Promise<void> {
  const next = (await r.batch(id)).next_attempt_at as number | null;
  if (next !== null && next > r.clock.now()) r.clock.set(next);
  await r.step();
}

onBothWorlds((open) => {
  describe("breaker", () => {
    test("a destination fed by one key trips on that batch's third transport failure", async () => {
      const a = fakeDestination("hermes:a");
      a.answer = () => down();
      const r = await rigOn(open, BASE, [a]);
      const id = batchIdOf(await r.put("A", "hermes:a"));
      await r.step();
      await dueStep(r, id);
      expect(await r.dest("hermes:a")).toMatchObject({ state: "closed", consecutive_failures: 2 });
      await dueStep(r, id);
      expect(await r.dest("hermes:a")).toMatchObject({ state: "open", cooldown_s: 30, consecutive_failures: 3 });
      expect(await r.batch(id)).toMatchObject({ state: "retry", attempts: 0 }); // transport never counts
      // open: nothing is claimed, even when the batch is due
      r.clock.set(((await r.dest("hermes:a")).opened_at as number) + 29);
      const calls = a.calls.length;
      await r.step();
      expect(a.calls.length).toBe(calls);
      const issue = (await r.world.rows.get(
        "SELECT state, last_error FROM issues WHERE fingerprint = 'delivery:hermes:a:unreachable'",
      )) as { state: string; last_error: string };
      expect(issue.state).toBe("open");
      expect(issue.last_error).toContain(`batch ${id} failed last`);
    });

    test("the probe rotates with one slot free too (parallel = 1)", async () => {
      const a = fakeDestination("hermes:a");
      a.answer = () => down();
      const r = await rigOn(open, `${BASE}[dispatch]\nparallel = 1\n\n[dispatch.breaker]\ntrip_after = 1\n`, [a]);
      const x = batchIdOf(await r.put("X", "hermes:a"));
      r.clock.advance(1);
      const y = batchIdOf(await r.put("Y", "hermes:a"));
      await r.step();
      const probes: number[] = [];
      for (let i = 0; i < 4; i++) {
        const ready = Math.max(
          ...(await Promise.all([x, y].map(async (b) => ((await r.batch(b)).next_attempt_at as number | null) ?? 0))),
          await reopensAt(r),
        );
        r.clock.set(ready);
        const before = a.calls.length;
        await r.step();
        if (a.calls.length > before) probes.push(a.calls[a.calls.length - 1].batchId);
      }
      // With only the slot's one candidate read, the same head would be probed for ever.
      expect(new Set(probes)).toEqual(new Set([x, y]));
    });

    test(
      "half_open: one rotating probe (counted 0, probe 1);" + " a failed probe doubles the cooldown; success closes",
      async () => {
        const a = fakeDestination("hermes:a");
        a.answer = () => down();
        const r = await rigOn(open, `${BASE}[dispatch.breaker]\ntrip_after = 1\n`, [a]);
        const x = batchIdOf(await r.put("X", "hermes:a"));
        r.clock.advance(1);
        const y = batchIdOf(await r.put("Y", "hermes:a"));
        await r.step(); // both fail in one tick; the first trips
        expect((await r.dest("hermes:a")).state).toBe("open");
        const probes: number[] = [];
        const cooldowns: number[] = [];
        for (let i = 0; i < 4; i++) {
          r.clock.set(
            Math.max(
              (await r.batch(x)).next_attempt_at as number,
              (await r.batch(y)).next_attempt_at as number,
              await reopensAt(r),
            ),
          );
          const before = a.calls.length;
          await r.step();
          expect(a.calls.length).toBe(before + 1); // exactly one probe
          probes.push(a.calls[a.calls.length - 1].batchId);
          cooldowns.push((await r.dest("hermes:a")).cooldown_s as number);
        }
        expect(probes).toEqual([x, y, x, y]); // rotates away from last_probe_batch_id
        expect(cooldowns).toEqual([60, 120, 240, 480]);
        // The issue names the batch the failed probe carried, and where to look at it.
        const tripped = (await r.world.rows.get(
          "SELECT last_error, sample_batch_id FROM issues WHERE fingerprint = 'delivery:hermes:a:unreachable'",
        )) as { last_error: string; sample_batch_id: number };
        expect(tripped.sample_batch_id).toBe(y);
        expect(tripped.last_error).toContain(`the probe (batch ${y}) failed with connection refused`);
        expect(tripped.last_error).toContain(`hookspool show ${y} --attempts`);
        const probeRows = await r.world.rows.all("SELECT probe, counted FROM attempts WHERE probe = 1");
        expect(probeRows.length).toBe(4);
        for (const row of probeRows) expect(row).toEqual({ probe: 1, counted: 0 });
        a.answer = () => ok();
        r.clock.set(
          Math.max(
            (await r.batch(x)).next_attempt_at as number,
            (await r.batch(y)).next_attempt_at as number,
            await reopensAt(r),
          ),
        );
        await r.step();
        expect(await r.dest("hermes:a")).toMatchObject({ state: "closed", consecutive_failures: 0, cooldown_s: null });
        await dueStep(r, x);
        await dueStep(r, y);
        expect([(await r.batch(x)).state, (await r.batch(y)).state]).toEqual(["delivered", "delivered"]);
        expect(
          await r.world.rows.get("SELECT state FROM issues WHERE fingerprint = 'delivery:hermes:a:unreachable'"),
        ).toEqual({ state: "resolved" });
      },
    );

    test(
      "cooldown doubling stops at cooldown_max_s;" + " a single-batch destination stays open and its batch never dies",
      async () => {
        const a = fakeDestination("hermes:a");
        a.answer = () => down();
        const r = await rigOn(open, `${BASE}[dispatch.breaker]\ntrip_after = 1\ncooldown_max_s = 100\n`, [a]);
        const id = batchIdOf(await r.put("A", "hermes:a"));
        await r.step();
        for (let i = 0; i < 12; i++) {
          const d = await r.dest("hermes:a");
          r.clock.set(
            Math.max((await r.batch(id)).next_attempt_at as number, (d.opened_at as number) + (d.cooldown_s as number)),
          );
          await r.step();
        }
        expect(await r.dest("hermes:a")).toMatchObject({ state: "open", cooldown_s: 100 });
        expect(await r.batch(id)).toMatchObject({ state: "retry", attempts: 0 });
        expect(a.calls.length).toBe(13);
      },
    );

    test(
      "only a probe re-trips:" + " an attempt in flight when the breaker opened records its outcome and nothing else",
      async () => {
        const a = fakeDestination("hermes:a", { maxInflight: 2 });
        let releaseB: () => void = () => {};
        a.answer = (call) => (call.batchId === 2 ? new Promise((res) => (releaseB = () => res(down()))) : down());
        const r = await rigOn(open, `${BASE}[dispatch.breaker]\ntrip_after = 1\n`, [a]);
        await r.put("A", "hermes:a");
        await r.put("B", "hermes:a");
        await r.d.tick();
        // A fails and trips; B still in flight.
        await waitFor("A's failure trips the breaker", async () => (await r.dest("hermes:a")).state === "open", 5_000);
        expect(await r.dest("hermes:a")).toMatchObject({ state: "open", cooldown_s: 30 });
        const openedAt = (await r.dest("hermes:a")).opened_at;
        r.clock.advance(5);
        releaseB();
        await r.d.drain();
        expect(await r.dest("hermes:a")).toMatchObject({ state: "open", cooldown_s: 30, opened_at: openedAt });
      },
    );

    test("probe_until: while the probe is out, nothing else is claimed for the destination", async () => {
      const a = fakeDestination("hermes:a");
      a.answer = () => down();
      const r = await rigOn(open, `${BASE}[dispatch.breaker]\ntrip_after = 1\n`, [a]);
      const x = batchIdOf(await r.put("X", "hermes:a"));
      const y = batchIdOf(await r.put("Y", "hermes:a"));
      await r.step();
      let release: () => void = () => {};
      a.answer = () => new Promise((res) => (release = () => res(down())));
      r.clock.set(
        Math.max((await r.batch(x)).next_attempt_at as number, (await r.batch(y)).next_attempt_at as number, r.t0 + 31),
      );
      const before = a.calls.length;
      await r.d.tick();
      const d = await r.dest("hermes:a");
      expect(d.state).toBe("half_open");
      expect(d.probe_until).toBeGreaterThan(r.clock.now());
      // The tick claims the probe; its worker reaches the destination a moment later (on PostgreSQL
      // after more round trips): count from the probe's own call.
      await waitFor("the probe's call", () => a.calls.length === before + 1, 5_000);
      await r.d.tick();
      await r.d.tick();
      // Nothing else claimed (a claim commits within its tick), and nothing else called.
      expect([(await r.batch(x)).state, (await r.batch(y)).state].filter((s) => s === "leased")).toEqual(["leased"]);
      expect(a.calls.length).toBe(before + 1);
      release();
      await r.d.drain();
    });

    test("pause: spool only, from any state; resume: closed with counters reset", async () => {
      const a = fakeDestination("hermes:a");
      a.answer = () => down();
      const r = await rigOn(open, BASE, [a]);
      const id = batchIdOf(await r.put("A", "hermes:a"));
      await r.step();
      await r.world.operator.pauseDestination("hermes:a", "ops", r.clock.now());
      r.clock.set((await r.batch(id)).next_attempt_at as number);
      await r.step();
      expect(a.calls.length).toBe(1);
      expect(await r.dest("hermes:a")).toMatchObject({ state: "paused", paused_by: "ops" });
      expect(await r.world.operator.resumeDestination("hermes:a", r.clock.now())).toBe(true);
      expect(await r.dest("hermes:a")).toMatchObject({ state: "closed", consecutive_failures: 0 });
      expect(await r.world.operator.resumeDestination("hermes:a", r.clock.now())).toBe(false);
      a.answer = () => ok();
      await r.step();
      expect((await r.batch(id)).state).toBe("delivered");
    });

    test("Retry-After is a soft gate: the destination waits without changing state", async () => {
      const a = fakeDestination("hermes:a");
      a.answer = () => outcome({ kind: "retry", klass: "throttle", reason: "http 429", status: 429, retryAfterS: 120 });
      const r = await rigOn(open, BASE, [a]);
      const x = batchIdOf(await r.put("X", "hermes:a"));
      await r.step();
      expect(await r.batch(x)).toMatchObject({
        state: "retry",
        next_attempt_at: r.t0 + 120,
        attempts: 0,
        last_class: "throttle",
      });
      expect(await r.dest("hermes:a")).toMatchObject({
        state: "closed",
        retry_after_until: r.t0 + 120,
        consecutive_failures: 0,
      });
      a.answer = () => ok();
      await r.put("Y", "hermes:a");
      r.clock.advance(60);
      await r.step();
      expect(a.calls.length).toBe(1); // Y waits behind the soft gate too
      r.clock.set(r.t0 + 120);
      await r.step();
      expect(a.calls.length).toBe(3);
    });
  });

  describe("poison", () => {
    test(
      "a batch failing six times in a row" + " while the destination delivers others is dead (poison), uncounted",
      async () => {
        const a = fakeDestination("hermes:a", { maxInflight: 4 });
        const r = await rigOn(open, BASE, [a]);
        const bad = batchIdOf(await r.put("BAD", "hermes:a"));
        a.answer = (call) => (call.batchId === bad ? down() : ok());
        let rounds = 0;
        while ((await r.batch(bad)).state !== "dead" && rounds < 20) {
          await r.put(`ok${rounds}`, "hermes:a"); // another key the destination accepts in the same tick
          await dueStep(r, bad);
          rounds++;
        }
        expect(rounds).toBe(6);
        expect(await r.batch(bad)).toMatchObject({
          state: "dead",
          last_class: "poison",
          attempts: 0,
          dead_reason: "poison",
        });
        expect((await r.attempts(bad)).at(-1)).toMatchObject({ outcome: "dead", klass: "poison", counted: 0 });
        expect(await r.dest("hermes:a")).toMatchObject({ state: "closed" });
        const issue = (await r.world.rows.get(
          "SELECT state, last_error FROM issues WHERE fingerprint = 'delivery:hermes:a:poison'",
        )) as { state: string; last_error: string };
        expect(issue.state).toBe("open");
        expect(issue.last_error).toContain(`hookspool replay ${bad}`);
      },
    );

    test("a whole outage scores no strike: nothing succeeds in between", async () => {
      const a = fakeDestination("hermes:a");
      a.answer = () => down();
      const r = await rigOn(open, `${BASE}[dispatch.breaker]\ntrip_after = 100\n`, [a]);
      const id = batchIdOf(await r.put("A", "hermes:a"));
      for (let i = 0; i < 12; i++) await dueStep(r, id);
      expect((await r.batch(id)).state).toBe("retry");
    });

    test("a flaky receiver (30 % random failures) delivers every healthy batch and poisons none", async () => {
      // Whether an attempt fails is drawn from its batch and attempt number, not from the order the
      // calls arrive in (which on PostgreSQL follows round trips), so every run sees the same failures.
      const fails = (batchId: number, attempt: number) => seededRng(batchId * 1000 + attempt).next() < 0.3;
      // Healthy: a batch is delivered at its first success, and none fails poison's six times in a
      // row before it; about 30 % of attempts fail.
      const draws = Array.from({ length: 120 }, (_, b) => Array.from({ length: 30 }, (_, n) => fails(b + 1, n + 1)));
      const leadingFailures = (d: boolean[]) => (d.includes(false) ? d.indexOf(false) : d.length);
      expect(Math.max(...draws.map(leadingFailures))).toBeLessThan(6);
      const share = draws.flat().filter(Boolean).length / (120 * 30);
      expect(share).toBeGreaterThan(0.2);
      expect(share).toBeLessThan(0.4);
      const a = fakeDestination("hermes:a", { maxInflight: 4 });
      a.answer = (call) => (fails(call.batchId, call.attempt) ? down() : ok());
      const r = await rigOn(open, `${BASE}[dispatch.breaker]\ntrip_after = 50\n`, [a]);
      for (let i = 0; i < 120; i++) await r.put(`k${i % 12}`, "hermes:a", { window: { max_events: 1 } });
      for (let i = 0; i < 400; i++) {
        const next = (await r.world.rows.get(
          "SELECT MIN(next_attempt_at) AS t FROM batches WHERE state = 'retry'",
        )) as {
          t: number | null;
        };
        if (next.t !== null && next.t > r.clock.now()) r.clock.set(next.t);
        await r.step();
        const left = (await r.world.rows.get("SELECT COUNT(*) AS n FROM batches WHERE state <> 'delivered'")) as {
          n: number;
        };
        if (left.n === 0) break;
      }
      expect(await r.world.rows.all("SELECT state, COUNT(*) AS n FROM batches GROUP BY state")).toEqual([
        { state: "delivered", n: 120 },
      ]);
    });
  });
});
