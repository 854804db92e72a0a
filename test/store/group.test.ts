// Group commit: events enqueued in one turn share one transaction, each in its own savepoint;
// a failing event is rolled back alone, a failed BEGIN or COMMIT rejects every event in it,
// and a group is bounded by count and bytes.
import { Database } from "bun:sqlite";
import { expect, test } from "bun:test";
import { openSpool } from "../../src/store/sqlite/db.ts";
import { sqliteGroupCommit } from "../../src/store/sqlite/store.ts";
import { copy, ev, freshSpool, T0 } from "../helpers/spool.ts";

const count = (db: Database, table: string) =>
  (db.query(`SELECT COUNT(*) AS n FROM ${table}`).get() as { n: number }).n;

test("events enqueued together commit in one transaction, and each caller gets its own result", async () => {
  const { spool } = freshSpool();
  const g = sqliteGroupCommit(spool);
  const results = await Promise.all(Array.from({ length: 10 }, (_, i) => g.enqueue(ev({ key: `k${i}` }), T0)));
  expect(g.stats).toEqual({ commits: 1, events: 10 });
  expect(results.map((r) => r.status)).toEqual(Array(10).fill("queued"));
  expect(new Set(results.map((r) => (r.status === "queued" ? r.placed[0].batchId : 0))).size).toBe(10);
  expect(count(spool.db, "events")).toBe(10);
});

test("a lone event commits in its own transaction, and later ones in the next", async () => {
  const { spool } = freshSpool();
  const g = sqliteGroupCommit(spool);
  await g.enqueue(ev(), T0);
  expect(g.stats).toEqual({ commits: 1, events: 1 });
  await g.enqueue(ev(), T0);
  expect(g.stats).toEqual({ commits: 2, events: 2 });
});

test("the dedup check sees the events before it in the same group", async () => {
  const { spool } = freshSpool();
  const g = sqliteGroupCommit(spool);
  const [a, b] = await Promise.all([g.enqueue(ev({ dedupId: "d1" }), T0), g.enqueue(ev({ dedupId: "d1" }), T0)]);
  expect([a.status, b.status]).toEqual(["queued", "duplicate"]);
  expect(g.stats.commits).toBe(1);
  expect(count(spool.db, "events")).toBe(1);
});

test("an event whose enqueue fails is rolled back alone; the others in its group commit", async () => {
  const { spool } = freshSpool();
  // Key "b" fails after its batch row was written: the savepoint must take that row back too.
  spool.db.run(
    "CREATE TEMP TRIGGER fail_b AFTER INSERT ON events WHEN (SELECT key FROM batches WHERE id = NEW.batch_id) = 'b' " +
      "BEGIN SELECT RAISE(ABORT, 'refused by the test'); END",
  );
  const g = sqliteGroupCommit(spool);
  const settled = await Promise.allSettled([
    g.enqueue(ev({ key: "a" }), T0),
    g.enqueue(ev({ key: "b" }), T0),
    g.enqueue(ev({ key: "c" }), T0),
    g.enqueue(ev({ key: "d", copies: [] }), T0),
  ]);
  expect(settled.map((s) => s.status)).toEqual(["fulfilled", "rejected", "fulfilled", "rejected"]);
  expect(String((settled[1] as PromiseRejectedResult).reason)).toContain("refused by the test");
  expect(String((settled[3] as PromiseRejectedResult).reason)).toContain("no destination");
  expect(g.stats).toEqual({ commits: 1, events: 4 });
  expect((spool.db.query("SELECT key FROM batches ORDER BY id").all() as { key: string }[]).map((r) => r.key)).toEqual([
    "a",
    "c",
  ]);
  expect(count(spool.db, "events")).toBe(2);
});

test("a transaction that cannot begin rejects every event in it, and stores none", async () => {
  const { path, clock } = freshSpool();
  const spool = openSpool(path, { create: false, busyTimeoutS: 0, clock });
  const other = new Database(path);
  other.run("BEGIN IMMEDIATE");
  try {
    const g = sqliteGroupCommit(spool);
    const settled = await Promise.allSettled([g.enqueue(ev({ key: "a" }), T0), g.enqueue(ev({ key: "b" }), T0)]);
    expect(settled.map((s) => s.status)).toEqual(["rejected", "rejected"]);
    expect(String((settled[0] as PromiseRejectedResult).reason)).toMatch(/locked|busy/i);
    expect(g.stats.commits).toBe(0);
  } finally {
    other.run("ROLLBACK");
    other.close();
  }
  expect(count(spool.db, "events")).toBe(0);
});

test("a group is bounded by its event count and its bytes, and takes at least one event", async () => {
  const { spool } = freshSpool();
  const byCount = sqliteGroupCommit(spool, { events: 3, bytes: 1 << 20 });
  await Promise.all(Array.from({ length: 7 }, (_, i) => byCount.enqueue(ev({ key: `c${i}` }), T0)));
  expect(byCount.stats).toEqual({ commits: 3, events: 7 });
  const byBytes = sqliteGroupCommit(spool, { events: 100, bytes: 250 });
  const big = "x".repeat(180);
  await Promise.all(
    Array.from({ length: 3 }, (_, i) =>
      byBytes.enqueue(ev({ key: `b${i}`, payload: JSON.stringify({ big }), copies: [copy("r", "http:d")] }), T0),
    ),
  );
  expect(byBytes.stats).toEqual({ commits: 3, events: 3 });
});

test("the store parses a payload itself unless the caller made it with JSON.parse or JSON.stringify", async () => {
  const { spool } = freshSpool();
  const g = sqliteGroupCommit(spool);
  await expect(g.enqueue(ev({ payload: '{"a":' }), T0)).rejects.toThrow("not valid JSON");
  // The intake's classify sets the flag only on text it parsed or serialized; the store trusts it.
  const made = JSON.stringify({ a: 1 });
  expect((await g.enqueue(ev({ payload: made, payloadParsed: true }), T0)).status).toBe("queued");
  expect(count(spool.db, "events")).toBe(1);
});

test("a full disk inside one event's savepoint refuses the whole group: nothing of it is stored", async () => {
  const { spool } = freshSpool();
  const g = sqliteGroupCommit(spool);
  const pages = (spool.db.query("PRAGMA page_count").get() as { page_count: number }).page_count;
  // Room for the small events, not for the large one between them.
  spool.db.run(`PRAGMA max_page_count = ${pages + 8}`);
  const big = "x".repeat(200_000);
  const settled = await Promise.allSettled([
    g.enqueue(ev({ key: "a" }), T0),
    g.enqueue(ev({ key: "b", payload: JSON.stringify({ big }) }), T0),
    g.enqueue(ev({ key: "c" }), T0),
  ]);
  // SQLite ended the transaction at the error: the savepoints after it must not commit on their own.
  expect(settled.map((s) => s.status)).toEqual(["rejected", "rejected", "rejected"]);
  expect(settled.map((s) => (s.status === "rejected" ? (s.reason as { code?: string }).code : null))).toEqual([
    "SQLITE_FULL",
    "SQLITE_FULL",
    "SQLITE_FULL",
  ]);
  expect(count(spool.db, "events")).toBe(0);
});
