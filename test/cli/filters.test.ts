// list and export filters: key, the last attempt's status code, a time range, a dead reason,
// and paging with a cursor; list and export read the same filter.
import { describe, expect, test } from "bun:test";
import { claimBatch } from "../../src/store/sqlite/claim.ts";
import { markDead, markRetry } from "../../src/store/sqlite/marks.ts";
import { enqueueJson, initHome, inHome, type Home, withDb, withSpool } from "./home.ts";

/** One attempt of a sealed batch, ended with `status`: dead (rejected) for 4xx, retry for the rest. */
function attempt(h: Home, id: number, status: number): void {
  withSpool(h.db, (spool) => {
    const now = spool.clock.now();
    const c = claimBatch(spool, {
      batchId: id,
      destination: "script:demo-log",
      now,
      leaseUntil: now + 60,
      host: "test",
      pid: 1,
    });
    if (!c) throw new Error(`batch ${id} not claimable`);
    const base = {
      batchId: id,
      attemptId: c.attemptId,
      owner: c.owner,
      now,
      attempt: { klass: status < 500 ? "permanent" : "transport", status, error: "x", durationMs: 1, counted: false },
    };
    const r = status < 500 ? markDead(spool, base) : markRetry(spool, { ...base, nextAttemptAt: now + 30 });
    if (!r.applied) throw new Error("not applied");
  });
}

describe("list and export filters", () => {
  test("key, status, time range and reason narrow list; export takes the same", async () => {
    const h = await initHome();
    const a = await enqueueJson(h, "once", "alpha", { n: 1 });
    const b = await enqueueJson(h, "once", "beta", { n: 2 });
    const c = await enqueueJson(h, "once", "alpha", { n: 3 });
    attempt(h, a, 503);
    attempt(h, b, 422);
    // Move a's last event back a day, so the time range tells them apart.
    withDb(h.db, (db) => db.run("UPDATE batches SET last_at = last_at - 86400 WHERE id = ?", [a]));
    const ids = async (argv: string[]) =>
      (JSON.parse((await inHome(h, ["--json", "list", ...argv])).out) as { id: number }[]).map((r) => r.id);
    expect(await ids(["--key", "alpha"])).toEqual([c, a]);
    expect(await ids(["--status", "503"])).toEqual([a]);
    expect(await ids(["--status", "422", "--reason", "rejected"])).toEqual([b]);
    expect(await ids(["--since", "12h"])).toEqual([c, b]);
    expect(await ids(["--until", "12h"])).toEqual([a]);
    expect(await ids(["--key", "alpha", "--since", "12h"])).toEqual([c]);
    const exported = (await inHome(h, ["export", "--key", "alpha", "--status", "503"])).out
      .trim()
      .split("\n")
      .map((l) => (JSON.parse(l) as { batch: { id: number } }).batch.id);
    expect(exported).toEqual([a]);
    for (const bad of [
      ["--status", "abc"],
      ["--since", "1h", "--until", "2h"],
      ["--reason", "nope"],
      ["--state", "nope"],
    ])
      expect((await inHome(h, ["list", ...bad])).code).toBe(2);
  });

  test("a full page names the cursor of the next; --before walks to the end", async () => {
    const h = await initHome();
    const made = [];
    for (let i = 0; i < 5; i++) made.push(await enqueueJson(h, "once", `k${i}`, { n: i }));
    const page1 = await inHome(h, ["list", "--limit", "2"]);
    const cursor = /^more: --before (\d+)$/m.exec(page1.out)?.[1];
    expect(cursor).toBe(String(made[3]));
    const page2 = JSON.parse((await inHome(h, ["--json", "list", "--limit", "2", "--before", String(cursor)])).out) as {
      id: number;
    }[];
    expect(page2.map((r) => r.id)).toEqual([made[2], made[1]]);
    const last = await inHome(h, ["list", "--limit", "2", "--before", String(made[1])]);
    expect(last.out).not.toContain("more:");
  });
});
