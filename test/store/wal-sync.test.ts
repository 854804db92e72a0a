// The intake's commits made durable off the event loop: a group commits under synchronous =
// NORMAL, and its requests are answered only when an fdatasync of the WAL file begun after the
// COMMIT has finished; the commits made while one sync runs share the next; a failed sync
// refuses its requests and leaves every later commit to SQLite's own sync (FULL).
import { Database } from "bun:sqlite";
import { expect, test } from "bun:test";
import { renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { type SqliteSpool, syncedLater } from "../../src/store/sqlite/db.ts";
import { sqliteGroupCommit } from "../../src/store/sqlite/store.ts";
import { WalSync } from "../../src/store/sqlite/wal-sync.ts";
import { tempDir } from "../helpers/tmp.ts";
import { ev, freshSpool, T0 } from "../helpers/spool.ts";

/** A sync the test finishes by hand: each call is one pending sync, in call order. */
function gatedSync() {
  const calls: { fd: number; finish(): void; fail(e: Error): void }[] = [];
  const sync = (fd: number) =>
    new Promise<void>((finish, fail) => {
      calls.push({ fd, finish, fail });
    });
  return { calls, sync };
}

/** Whether `p` has settled by the time the microtasks queued now have run. */
async function settled(p: Promise<unknown>): Promise<boolean> {
  let done = false;
  p.then(
    () => {
      done = true;
    },
    () => {
      done = true;
    },
  );
  for (let i = 0; i < 10; i++) await Promise.resolve();
  return done;
}

/** Wait (a turn of the loop at a time, at most 2 s) until `ok` holds. */
async function until(ok: () => boolean): Promise<void> {
  const end = performance.now() + 2000;
  while (!ok()) {
    if (performance.now() > end) throw new Error("gave up waiting");
    await new Promise((r) => setImmediate(r));
  }
}

function walFile(): string {
  const path = join(tempDir("hookspool-wal-sync-"), "spool.db-wal");
  writeFileSync(path, "");
  return path;
}

test("a commit is durable only after a sync that began after it", async () => {
  const g = gatedSync();
  const wal = new WalSync(walFile(), g.sync);
  expect(wal.ready()).toBe(true);
  const first = wal.durable();
  expect(g.calls.length).toBe(1);
  // Committed while the first sync runs: that sync may have begun before its frames were written.
  const second = wal.durable();
  expect(g.calls.length).toBe(1);
  g.calls[0].finish();
  await first;
  expect(await settled(second)).toBe(false);
  expect(g.calls.length).toBe(2);
  g.calls[1].finish();
  await second;
  expect(wal.stats).toEqual({ syncs: 2, commits: 2 });
});

test("the commits made while one sync runs share the next", async () => {
  const g = gatedSync();
  const wal = new WalSync(walFile(), g.sync);
  wal.ready();
  const first = wal.durable();
  const later = [wal.durable(), wal.durable(), wal.durable()];
  g.calls[0].finish();
  await first;
  expect(g.calls.length).toBe(2);
  g.calls[1].finish();
  await Promise.all(later);
  expect(wal.stats).toEqual({ syncs: 2, commits: 4 });
});

test("a failed sync refuses its commits and the ones waiting, and the next commits keep SQLite's sync", async () => {
  const g = gatedSync();
  const wal = new WalSync(walFile(), g.sync);
  wal.ready();
  const first = wal.durable();
  const waiting = wal.durable();
  g.calls[0].fail(new Error("EIO"));
  await expect(first).rejects.toThrow("EIO");
  await expect(waiting).rejects.toThrow("EIO");
  expect(g.calls.length).toBe(1);
  expect(wal.ready()).toBe(false);
});

test("no WAL file, or another file at its path, keeps SQLite's own sync", () => {
  const path = join(tempDir("hookspool-wal-sync-"), "spool.db-wal");
  const wal = new WalSync(path, gatedSync().sync);
  expect(wal.ready()).toBe(false);
  writeFileSync(path, "");
  expect(wal.ready()).toBe(true);
  // SQLite still writes the file it opened: a sync of the new one would make nothing durable.
  writeFileSync(`${path}.other`, "");
  renameSync(`${path}.other`, path);
  expect(wal.ready()).toBe(false);
  rmSync(path);
  expect(wal.ready()).toBe(false);
});

test("syncedLater runs its transaction under NORMAL and puts FULL back, even when it throws", () => {
  const { spool } = freshSpool();
  const level = () => (spool.db.query("PRAGMA synchronous").get() as { synchronous: number }).synchronous;
  expect(level()).toBe(2);
  expect(syncedLater(spool, level)).toBe(1);
  expect(level()).toBe(2);
  expect(() =>
    syncedLater(spool, () => {
      throw new Error("refused");
    }),
  ).toThrow("refused");
  expect(level()).toBe(2);
});

test("a group's requests are answered after the sync, its rows committed before it", async () => {
  const { spool } = freshSpool();
  const g = gatedSync();
  const gated: SqliteSpool = { ...spool, wal: new WalSync(`${spool.path}-wal`, g.sync) };
  const group = sqliteGroupCommit(gated);
  const answered = Promise.all([group.enqueue(ev({ key: "a" }), T0), group.enqueue(ev({ key: "b" }), T0)]);
  await until(() => g.calls.length === 1);
  const reader = new Database(spool.path, { readonly: true });
  try {
    // Another connection sees the rows: the COMMIT has returned, and only the sync is awaited.
    expect((reader.query("SELECT COUNT(*) AS n FROM events").get() as { n: number }).n).toBe(2);
  } finally {
    reader.close();
  }
  expect(group.stats).toEqual({ commits: 0, events: 0 });
  expect(g.calls.length).toBe(1);
  expect(await settled(answered)).toBe(false);
  expect((spool.db.query("PRAGMA synchronous").get() as { synchronous: number }).synchronous).toBe(2);
  g.calls[0].finish();
  expect((await answered).map((r) => r.status)).toEqual(["queued", "queued"]);
  expect(gated.wal.stats).toEqual({ syncs: 1, commits: 1 });
});

test("a group whose sync failed is refused, though its rows are committed", async () => {
  const { spool } = freshSpool();
  const g = gatedSync();
  const group = sqliteGroupCommit({ ...spool, wal: new WalSync(`${spool.path}-wal`, g.sync) });
  const answered = Promise.all([
    group.enqueue(ev({ key: "a", dedupId: "d1" }), T0),
    group.enqueue(ev({ key: "b", dedupId: "d2" }), T0),
  ]);
  await until(() => g.calls.length === 1);
  g.calls[0].fail(new Error("EIO"));
  await expect(answered).rejects.toThrow("EIO");
  // The sender tries again: its dedup id finds the committed event, and nothing is queued twice.
  const again = await group.enqueue(ev({ key: "a", dedupId: "d1" }), T0 + 1);
  expect(again.status).toBe("duplicate");
  // After a failed sync the COMMIT syncs again itself.
  expect(g.calls.length).toBe(1);
});

test("a lone request with nothing behind it commits under FULL, synced in its COMMIT", async () => {
  const { spool } = freshSpool();
  const g = gatedSync();
  const wal = new WalSync(`${spool.path}-wal`, g.sync);
  const group = sqliteGroupCommit({ ...spool, wal });
  expect((await group.enqueue(ev({ key: "a" }), T0)).status).toBe("queued");
  expect(g.calls.length).toBe(0);
  // Two in one turn share a group: that one leaves its sync to the WAL sync.
  const two = Promise.all([group.enqueue(ev({ key: "b" }), T0), group.enqueue(ev({ key: "c" }), T0)]);
  await until(() => g.calls.length === 1);
  g.calls[0].finish();
  await two;
  expect(wal.stats).toEqual({ syncs: 1, commits: 1 });
});

test("without the WAL file held, a group commits under FULL and is answered without a sync", async () => {
  const { spool, dir } = freshSpool();
  const g = gatedSync();
  const wal = new WalSync(join(dir, "no-such-wal"), g.sync);
  const group = sqliteGroupCommit({ ...spool, wal });
  const both = await Promise.all([group.enqueue(ev({ key: "a" }), T0), group.enqueue(ev({ key: "b" }), T0)]);
  expect(both.map((r) => r.status)).toEqual(["queued", "queued"]);
  expect(group.stats).toEqual({ commits: 1, events: 2 });
  expect(g.calls.length).toBe(0);
  expect(wal.stats).toEqual({ syncs: 0, commits: 0 });
});
