// replay --dead --plan: what a bulk replay would put back, by destination, key and reason, with the
// pace each destination takes it at; nothing changes. And a replay itself goes through the rate.
import { describe, expect, test } from "bun:test";
import type { DeadReason } from "../../src/delivery.ts";
import { markDead } from "../../src/store/sqlite/marks.ts";
import { claimBatch } from "../../src/store/sqlite/claim.ts";
import { EXTRA_CONFIG, enqueueJson, initHome, inHome, type Home, storedState, withSpool } from "./home.ts";

const PACED = `${EXTRA_CONFIG}
[sources.paced]
max_events = 1
action = "web"
`;

async function deadFor(h: Home, source: string, key: string, reason: DeadReason): Promise<number> {
  const id = await enqueueJson(h, source, key, { n: key });
  withSpool(h.db, (spool) => {
    const now = spool.clock.now();
    const claim = claimBatch(spool, { batchId: id, destination: "x", now, leaseUntil: now + 60, host: "test", pid: 1 });
    if (!claim) throw new Error(`batch ${id} was not claimable`);
    const r = markDead(spool, {
      batchId: id,
      attemptId: claim.attemptId,
      owner: claim.owner,
      now,
      deadReason: reason,
      attempt: { klass: "permanent", status: 422, error: "said no", durationMs: 1, counted: false },
    });
    if (!r.applied) throw new Error("mark not applied");
  });
  return id;
}

describe("replay --dead --plan", () => {
  test("groups by destination, key and reason, names each destination's pace, and changes nothing", async () => {
    const h = await initHome({ extra: PACED.replace("unsigned = true\n", 'unsigned = true\nrate = "2/min"\n') });
    for (const k of ["a", "a", "b", "c", "d"]) await deadFor(h, "paced", k, "rejected");
    await deadFor(h, "paced", "a", "exhausted");
    await deadFor(h, "once", "z", "poison");
    const before = storedState(h.db);
    const r = await inHome(h, ["--json", "replay", "--dead", "--plan"]);
    expect(r.code).toBe(0);
    const plan = JSON.parse(r.out);
    expect(plan.changed).toBe(false);
    expect(plan.plan).toEqual([
      { destination: "script:demo-log", key: "z", reason: "poison", batches: 1, events: 1 },
      { destination: "web", key: "a", reason: "exhausted", batches: 1, events: 1 },
      { destination: "web", key: "a", reason: "rejected", batches: 2, events: 2 },
      { destination: "web", key: "b", reason: "rejected", batches: 1, events: 1 },
      { destination: "web", key: "c", reason: "rejected", batches: 1, events: 1 },
      { destination: "web", key: "d", reason: "rejected", batches: 1, events: 1 },
    ]);
    expect(plan.destinations).toEqual([
      { destination: "script:demo-log", batches: 1, events: 1, rate: null, at_least_s: 0 },
      // Six batches at two a minute: the last starts two windows after the first.
      {
        destination: "web",
        batches: 6,
        events: 6,
        rate: { limit: 2, window_s: 60, from: "its rate" },
        at_least_s: 120,
      },
    ]);
    expect(storedState(h.db)).toEqual(before);

    const text = await inHome(h, ["replay", "--dead", "--plan", "--destination", "web", "--reason", "rejected"]);
    expect(text.code).toBe(0);
    expect(text.out).toMatch(/^DESTINATION\s+KEY\s+REASON\s+BATCHES\s+EVENTS$/m);
    expect(text.out).toMatch(/^web\s+a\s+rejected\s+2\s+2$/m);
    expect(text.out).toContain(
      "web: 5 batch(es), 5 event(s); paced at 2 per 60 s (its rate): at least 2 min to deliver, " +
        "sharing its slots with live traffic",
    );
    expect(text.out).toContain("nothing changed");
    expect(storedState(h.db)).toEqual(before);
  });

  test("nothing to replay: exit 1 with one line; --plan only with --dead", async () => {
    const h = await initHome();
    const none = await inHome(h, ["replay", "--dead", "--plan"]);
    expect(none).toMatchObject({ code: 1 });
    expect(none.out.trim()).toBe("no dead batches match; nothing would be replayed");
    const misuse = await inHome(h, ["replay", "7", "--plan"]);
    expect(misuse.code).toBe(2);
    expect(misuse.err).toContain("--plan go with --dead");
  });
});
