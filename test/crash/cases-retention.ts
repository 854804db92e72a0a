// The crash case of a retention pass, reached through `hookspool prune` with the clock
// eight days on: killed in its first transaction, the pass rolls back whole; run again, it
// deletes delivered batches with their events and never touches a dead one.
import { expect } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { quickCheck } from "../../src/store/sqlite/db.ts";
import { dump } from "./checks.ts";
import { type CrashCase, hook, type Scene, statusOf } from "./harness.ts";

/** No event may outlive its batch: a pass deletes a batch's events with it or before it. */
function expectNoOrphans(s: Scene, when: string): void {
  const orphans = s.db
    .query("SELECT e.id, e.batch_id FROM events e LEFT JOIN batches b ON b.id = e.batch_id WHERE b.id IS NULL")
    .all() as { id: number; batch_id: number }[];
  expect(
    orphans,
    `${when}, events without their batch: ${orphans.map((o) => `event ${o.id} (batch ${o.batch_id})`).join(", ")}`,
  ).toEqual([]);
}

const EIGHT_DAYS = { HOOKSPOOL_TEST_CLOCK_OFFSET_S: String(8 * 86400) };

export const killedInRetention: CrashCase = {
  name: "the pass's transaction rolls back whole; quick_check ok; no event without its batch; dead batches untouched",
  async run(s) {
    // Delivered batches, a dead one (422 from deadend) and a quarantine batch, from a real run.
    writeFileSync(join(s.home, "broken"), "");
    const { hs, port } = await s.start();
    const sent = [
      hook("demo", { topic: "alpha", type: "push", n: 1 }, "r1"),
      hook("demo", { topic: "beta", type: "push", n: 2 }, "r2"),
      hook("demo", { topic: "alpha", type: "reject", n: 3 }, "r3"),
      hook("flaky", { topic: "gamma", type: "push", n: 4 }),
    ];
    for (const h of sent) expect(statusOf(await s.send(port, h)), `event ${h.dedupId ?? h.source}`).toMatch(/^202 /);
    await s.settled();
    hs.kill("SIGTERM");
    expect(await hs.exited, "the run's clean stop").toBe(0);
    const dead = s.db.query("SELECT id FROM batches WHERE state = 'dead' ORDER BY id").all() as { id: number }[];
    expect(dead.length, "a rejected batch and a quarantine batch").toBe(2);
    const deadRows = () => dump(s.db).batches.filter((b) => dead.some((d) => d.id === (b as { id: number }).id));
    const deadEvents = () =>
      s.db.query(`SELECT * FROM events WHERE batch_id IN (${dead.map((d) => d.id).join(",")}) ORDER BY id`).all();
    const before = dump(s.db);
    const deadBefore = { batches: deadRows(), events: deadEvents() };
    expect(
      s.count("batches WHERE state = 'delivered'"),
      "delivered batches for the pass to delete",
    ).toBeGreaterThanOrEqual(4);
    s.closeDb();

    const killed = await s.command(["prune"], { hook: "retention.before_commit", env: EIGHT_DAYS });
    expect(killed.signal, `prune should die at retention.before_commit: ${killed.stderr}`).toBe("SIGKILL");
    expect(quickCheck(s.store), "quick_check after the killed pass").toEqual([]);
    expectNoOrphans(s, "after the killed pass");
    const after = dump(s.db);
    for (const table of Object.keys(before)) {
      expect(after[table], `table ${table}: the killed retention transaction was half applied`).toEqual(before[table]);
    }
    s.closeDb();

    const pass = await s.command(["prune"], { env: EIGHT_DAYS });
    expect(pass.code, `prune: ${pass.stderr}`).toBe(0);
    expect(quickCheck(s.store), "quick_check after the pass").toEqual([]);
    expectNoOrphans(s, "after the pass");
    expect(s.count("batches WHERE state = 'delivered'"), "delivered batches eight days old").toBe(0);
    expect(
      { batches: deadRows(), events: deadEvents() },
      `dead batches ${dead.map((d) => d.id).join(", ")} were touched by retention`,
    ).toEqual(deadBefore);
  },
};
