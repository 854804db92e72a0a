// The lock line (store/sqlite/wait.ts) on a real WAL file with a second connection holding the
// write lock: the event loop keeps turning while a write waits, queued writes commit in arrival
// order, each fails with SQLITE_BUSY once its own wait from its arrival is spent, reads never
// queue behind writes, a connection that waits by itself keeps its one, final SQLITE_BUSY, and
// retention's checkpoint waits for a reader in its way without holding the loop.
import { Database } from "bun:sqlite";
import { afterEach, expect, test } from "bun:test";
import { openSpool, type SqliteSpool, waitOffLoop } from "../../src/store/sqlite/db.ts";
import { isBusy } from "../../src/store/sqlite/wait.ts";
import { sqliteGroupCommit, sqliteIntakeStore, sqliteIssues } from "../../src/store/sqlite/store.ts";
import { ev, freshSpool, T0 } from "../helpers/spool.ts";
import { runRetention } from "../../src/store/sqlite/retention.ts";
import { statSync } from "node:fs";
import { waitFor } from "../helpers/proc.ts";

const holders: Database[] = [];
afterEach(() => {
  for (const h of holders.splice(0)) {
    if (h.inTransaction) h.run("ROLLBACK");
    h.close();
  }
});

/** The spool as the services open it (busy_timeout 0, waits off the loop up to `seconds`), and a holder of its lock. */
function lockedSpool(seconds: number): { spool: SqliteSpool; holder: Database } {
  const { spool, path } = freshSpool();
  waitOffLoop(spool, seconds);
  const holder = new Database(path);
  holders.push(holder);
  holder.run("BEGIN IMMEDIATE");
  return { spool, holder };
}

const write = (spool: SqliteSpool, key: string) =>
  spool.line.write(() =>
    spool.db.transaction(() => spool.db.run("INSERT INTO meta VALUES (?, '1')", [key])).immediate(),
  );

const metaKeys = (spool: SqliteSpool) =>
  (spool.db.query("SELECT key FROM meta WHERE key LIKE 'w%' ORDER BY rowid").all() as { key: string }[]).map(
    (r) => r.key,
  );

test("a write that meets the lock waits off the loop, and commits once the lock is free", async () => {
  const { spool, holder } = lockedSpool(10);
  expect(spool.db.query("PRAGMA busy_timeout").get()).toEqual({ timeout: 0 });
  const pending = write(spool, "w1");
  // The loop turns while the write waits: timers fire, and the write is still queued.
  let turns = 0;
  await waitFor("ten turns of the loop", async () => {
    await Bun.sleep(1);
    return ++turns >= 10;
  });
  expect(spool.line.waiting).toBe(1);
  expect(spool.line.busyTries).toBeGreaterThan(1);
  holder.run("ROLLBACK");
  await pending;
  expect(metaKeys(spool)).toEqual(["w1"]);
  expect(spool.line.waiting).toBe(0);
});

test("writes queued behind the lock commit in the order they arrived", async () => {
  const { spool, holder } = lockedSpool(10);
  const order: string[] = [];
  const all = ["w1", "w2", "w3", "w4"].map((k) => write(spool, k).then(() => order.push(k)));
  expect(spool.line.waiting).toBe(4);
  // A write arriving while others wait queues behind them even when it could run at once.
  await waitFor("a few busy tries", () => spool.line.busyTries >= 3);
  holder.run("ROLLBACK");
  await Promise.all(all);
  expect(order).toEqual(["w1", "w2", "w3", "w4"]);
  expect(metaKeys(spool)).toEqual(["w1", "w2", "w3", "w4"]);
});

test("a queued write fails with SQLITE_BUSY once its own wait, counted from its arrival, is spent", async () => {
  const { spool } = lockedSpool(0.3);
  const t0 = performance.now();
  const early = write(spool, "w1").catch((e) => e);
  const late = Bun.sleep(150).then(() => write(spool, "w2").catch((e) => e));
  const [a, b] = await Promise.all([early, late]);
  const ended = performance.now() - t0;
  expect(isBusy(a)).toBe(true);
  expect(isBusy(b)).toBe(true);
  // The second waited its own 0.3 s from its arrival at 0.15 s, not a second 0.3 s after the first.
  expect(ended).toBeGreaterThanOrEqual(440);
  expect(ended).toBeLessThan(1_500);
  expect(metaKeys(spool)).toEqual([]);
});

test("a read never queues behind a waiting write", async () => {
  const { spool } = lockedSpool(10);
  const pending = write(spool, "w1").catch(() => {});
  const read = await spool.line.read(() => spool.db.query("SELECT COUNT(*) AS n FROM meta").get());
  expect(read).toEqual({ n: expect.any(Number) });
  expect(spool.line.waiting).toBe(1);
  holders[0].run("ROLLBACK");
  await pending;
});

test("an error other than busy fails at once, and the next write goes on", async () => {
  const { spool } = freshSpool();
  waitOffLoop(spool, 10);
  const bad = spool.line.write(() => spool.db.run("INSERT INTO nowhere VALUES (1)")).catch((e) => e);
  expect(String(await bad)).toContain("no such table");
  await write(spool, "w1");
  expect(metaKeys(spool)).toEqual(["w1"]);
});

test("the health probe never waits: busy while another holds the lock or writes are queued", async () => {
  const { spool, holder } = lockedSpool(10);
  const intake = sqliteIntakeStore(spool);
  const t0 = performance.now();
  expect(await intake.probeWrite(T0)).toBe("busy");
  expect(performance.now() - t0).toBeLessThan(200);
  holder.run("ROLLBACK");
  expect(await intake.probeWrite(T0)).toBe("written");
  holder.run("BEGIN IMMEDIATE");
  const queued = sqliteIssues(spool).resolveIssue("nothing", T0);
  holder.run("ROLLBACK");
  // The lock is free now, but a write is queued: the probe does not jump the line.
  expect(await intake.probeWrite(T0)).toBe("busy");
  await queued;
  expect(await intake.probeWrite(T0)).toBe("written");
});

test("a group commit waits from its oldest request's arrival, then rejects the whole group", async () => {
  const { spool } = lockedSpool(0.2);
  const g = sqliteGroupCommit(spool);
  const t0 = performance.now();
  const settled = await Promise.allSettled([g.enqueue(ev({ key: "a" }), T0), g.enqueue(ev({ key: "b" }), T0)]);
  expect(settled.map((s) => s.status)).toEqual(["rejected", "rejected"]);
  expect(isBusy((settled[0] as PromiseRejectedResult).reason)).toBe(true);
  expect(performance.now() - t0).toBeGreaterThanOrEqual(190);
  expect(g.stats.commits).toBe(0);
  holders[0].run("ROLLBACK");
  await g.enqueue(ev({ key: "c" }), T0);
  expect((spool.db.query("SELECT key FROM batches").all() as { key: string }[]).map((r) => r.key)).toEqual(["c"]);
});

test("a connection that waits by itself (busy_timeout) fails once, without a second wait", async () => {
  const { path } = freshSpool();
  const spool = openSpool(path, { busyTimeoutS: 0.2 });
  const holder = new Database(path);
  holders.push(holder);
  holder.run("BEGIN IMMEDIATE");
  const t0 = performance.now();
  const e = await write(spool, "w1").catch((x) => x);
  expect(isBusy(e)).toBe(true);
  expect(performance.now() - t0).toBeLessThan(1_000);
  expect(spool.line.busyTries).toBe(0);
  spool.close();
});

test("retention's checkpoint on a waiting connection empties the WAL once a reader in its way lets go", async () => {
  const { spool, path } = freshSpool();
  waitOffLoop(spool, 10);
  for (let i = 0; i < 50; i++) await write(spool, `w${i}`);
  const reader = new Database(path);
  holders.push(reader);
  // A read transaction on an old snapshot: TRUNCATE cannot empty the WAL under it.
  reader.run("BEGIN");
  reader.query("SELECT COUNT(*) FROM meta").get();
  await write(spool, "after-snapshot");
  const policy = { deliveredDays: 7, attemptsDays: 30, droppedDays: 7, issuesDays: 30, dedupWindowS: () => 86_400 };
  const pass = runRetention(spool, policy, T0);
  await Bun.sleep(100);
  expect(statSync(`${path}-wal`).size).toBeGreaterThan(0);
  reader.run("COMMIT");
  await pass;
  expect(statSync(`${path}-wal`).size).toBe(0);
});
