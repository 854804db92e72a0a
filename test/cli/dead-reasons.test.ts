// Dead letters that say why: each dead batch carries the reason it died, the receiver's verdict
// (rejected) apart from the pipeline's faults, and list, show, status, /metrics and replay read it.
import { describe, expect, test } from "bun:test";
import type { DeadReason } from "../../src/delivery.ts";
import { claimBatch } from "../../src/store/sqlite/claim.ts";
import { markDead } from "../../src/store/sqlite/marks.ts";
import { quarantine } from "../../src/store/sqlite/enqueue.ts";
import { enqueueJson, initHome, inHome, spoolAtSchema, type Home, withDb, withSpool } from "./home.ts";

/** A batch of the `once` source (sealed at its enqueue), claimed and ended dead for `reason`. */
async function deadFor(h: Home, key: string, reason: DeadReason): Promise<number> {
  const id = await enqueueJson(h, "once", key, { n: key });
  withSpool(h.db, (spool) => {
    const now = spool.clock.now();
    const claim = claimBatch(spool, {
      batchId: id,
      destination: "script:demo-log",
      now,
      leaseUntil: now + 60,
      host: "test",
      pid: 1,
    });
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

function quarantineOne(h: Home): number {
  return withSpool(
    h.db,
    (spool) =>
      quarantine(spool, {
        source: "demo",
        raw: new TextEncoder().encode("{}"),
        headers: {},
        authHeaders: [],
        url: null,
        reason: "not_json",
      }).batchId,
  );
}

describe("dead reasons", () => {
  test("list --reason, show, status and metrics tell the receiver's refusals from the pipeline's faults", async () => {
    const h = await initHome();
    const rejected = await deadFor(h, "a", "rejected");
    const exhausted = await deadFor(h, "b", "exhausted");
    const processor = await deadFor(h, "c", "processor_permanent");
    const q = quarantineOne(h);
    const ids = async (argv: string[]) =>
      (JSON.parse((await inHome(h, ["--json", "list", ...argv])).out) as { id: number }[]).map((b) => b.id);
    expect(await ids(["--state", "dead", "--reason", "rejected"])).toEqual([rejected]);
    expect(await ids(["--reason", "exhausted"])).toEqual([exhausted]);
    expect(await ids(["--reason", "quarantined"])).toEqual([q]);
    const rows = JSON.parse((await inHome(h, ["--json", "list", "--state", "dead"])).out) as {
      id: number;
      dead_reason: string;
    }[];
    expect(Object.fromEntries(rows.map((r) => [r.id, r.dead_reason]))).toEqual({
      [rejected]: "rejected",
      [exhausted]: "exhausted",
      [processor]: "processor_permanent",
      [q]: "quarantined",
    });
    // The human list's last column is the reason for a dead batch.
    expect((await inHome(h, ["list", "--state", "dead"])).out).toMatch(
      new RegExp(`^${processor}\\s+dead\\s.*processor_permanent$`, "m"),
    );
    expect((await inHome(h, ["show", String(rejected)])).out).toMatch(
      /^dead because\s+rejected \(the destination refused it for good/m,
    );
    const status = JSON.parse((await inHome(h, ["--json", "status"])).out);
    expect(status.dead_by_reason).toEqual({
      rejected: 1,
      exhausted: 1,
      poison: 0,
      processor_permanent: 1,
      bad_emit: 0,
      config: 0,
      quarantined: 1,
      agent_failed: 0,
    });
    expect(status.degraded).toContain("batches: 3 dead (1 rejected, 1 exhausted, 1 processor_permanent)");
    expect((await inHome(h, ["status"])).out).toMatch(/^dead\s+1 rejected, 1 exhausted, 1 processor_permanent$/m);
    const metrics = (await inHome(h, ["metrics"])).out;
    expect(metrics).toContain('hookspool_dead_batches{reason="rejected"} 1');
    expect(metrics).toContain('hookspool_dead_batches{reason="poison"} 0');
    expect((await inHome(h, ["list", "--reason", "nonsense"])).code).toBe(2);
  });

  test("replay --dead --reason replays one class and leaves the others dead; the reason clears", async () => {
    const h = await initHome();
    const rejected = await deadFor(h, "a", "rejected");
    const exhausted = [await deadFor(h, "b", "exhausted"), await deadFor(h, "c", "exhausted")];
    const r = await inHome(h, ["--json", "replay", "--dead", "--reason", "exhausted"]);
    expect(r.code).toBe(0);
    expect((JSON.parse(r.out).replayed as { batchId: number }[]).map((x) => x.batchId).sort()).toEqual(
      exhausted.sort(),
    );
    const states = withDb(h.db, (db) => db.query("SELECT id, state, dead_reason FROM batches ORDER BY id").all());
    expect(states).toEqual([
      { id: rejected, state: "dead", dead_reason: "rejected" },
      { id: exhausted[0], state: "retry", dead_reason: null },
      { id: exhausted[1], state: "retry", dead_reason: null },
    ]);
    expect((await inHome(h, ["replay", "--dead", "--reason", "poison"])).code).toBe(1);
    expect((await inHome(h, ["replay", String(rejected), "--reason", "rejected"])).code).toBe(2);
  });

  test("schema 5 -> 6 gives the batches already dead their reason from their last class", async () => {
    const h = await initHome();
    spoolAtSchema(h, 5);
    withDb(h.db, (db) => {
      const add = (dest: string, key: string, state: string, last: string | null) =>
        db.run(
          `INSERT INTO batches (route, source, destination, key, state, first_at, last_at, quiet_s, ` +
            `max_s, max_events, max_bytes, content_hash, last_class)
           VALUES ('r', 's', ?, ?, ?, 1, 1, 0, 0, 1, 1, 'sha256:x', ?)`,
          [dest, key, state, last],
        );
      add("http:d", "a", "dead", "permanent");
      add("http:d", "b", "dead", "batch");
      add("http:d", "c", "dead", "poison");
      add("quarantine", "quarantine", "dead", "quarantine");
      add("http:d", "e", "delivered", null);
    });
    expect((await inHome(h, ["migrate"])).code).toBe(0);
    expect(withDb(h.db, (db) => db.query("SELECT key, dead_reason FROM batches ORDER BY id").all())).toEqual([
      { key: "a", dead_reason: "rejected" },
      { key: "b", dead_reason: "exhausted" },
      { key: "c", dead_reason: "poison" },
      { key: "quarantine", dead_reason: "quarantined" },
      { key: "e", dead_reason: null },
    ]);
  });
});
