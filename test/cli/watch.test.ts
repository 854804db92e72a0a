// hookspool watch: the journal of changes, each line with its cursor; --since resumes after a
// cursor with nothing missed and nothing invented; a cursor behind retention says so; filters.
import { describe, expect, test } from "bun:test";
import { claimBatch } from "../../src/store/sqlite/claim.ts";
import { markDelivered } from "../../src/store/sqlite/marks.ts";
import { enqueueJson, initHome, inHome, type Home, withDb, withSpool } from "./home.ts";

type Line = { cursor: number; kind: string; batch: number; source: string; key: string; [k: string]: unknown };
const lines = (out: string) =>
  out
    .trim()
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Line);
const watch = async (h: Home, argv: string[]) =>
  lines((await inHome(h, ["--json", "watch", "--for", "5", ...argv])).out);

function deliver(h: Home, id: number): void {
  withSpool(h.db, (spool) => {
    const now = spool.clock.now();
    const c = claimBatch(spool, {
      batchId: id,
      destination: "script:demo-log",
      now,
      leaseUntil: now + 60,
      host: "t",
      pid: 1,
    });
    if (!c) throw new Error("not claimable");
    markDelivered(spool, {
      batchId: id,
      attemptId: c.attemptId,
      owner: c.owner,
      now,
      attempt: { klass: null, status: 0, error: null, durationMs: 4, counted: true },
    });
  });
}

describe("watch", () => {
  test("every change in commit order, each with its cursor: an event queued, sealed, leased, delivered", async () => {
    const h = await initHome();
    const id = await enqueueJson(h, "once", "k1", { n: 1 });
    deliver(h, id);
    const all = await watch(h, ["--since", "0", "--count", "4"]);
    expect(all.map((l) => [l.kind, l.batch, l.key])).toEqual([
      ["event", id, "k1"],
      ["sealed", id, "k1"],
      ["leased", id, "k1"],
      ["delivered", id, "k1"],
    ]);
    expect(all.map((l) => l.cursor)).toEqual([1, 2, 3, 4]);
    expect(all[3]).toMatchObject({ status: 0, duration_ms: 4 });
    const human = await inHome(h, ["watch", "--since", "0", "--count", "1", "--for", "5"]);
    expect(human.out).toMatch(/^1 \S+Z event batch \d+ event \d+ once -> script:demo-log key=k1 /);
  });

  test("an attempt is named by its number within its batch (as show --attempts has it), not its row id", async () => {
    const h = await initHome();
    const a = await enqueueJson(h, "once", "ka", { n: 1 });
    const b = await enqueueJson(h, "once", "kb", { n: 2 });
    deliver(h, a);
    deliver(h, b);
    const human = await inHome(h, ["watch", "--since", "0", "--for", "5", "--count", "8"]);
    const of = (batch: number, kind: string) =>
      human.out.split("\n").find((l) => l.includes(` ${kind} batch ${batch} `)) ?? "";
    // Batch b's first attempt is the spool's second attempt row.
    expect(of(b, "leased")).toContain(`batch ${b} attempt 1 `);
    expect(of(b, "delivered")).toContain(`batch ${b} attempt 1 `);
    expect(of(b, "leased")).not.toContain(" n=");
    const json = (await watch(h, ["--since", "0", "--count", "8"])).filter((l) => l.batch === b && l.kind === "leased");
    expect(json).toEqual([expect.objectContaining({ attempt: 2, attempt_n: 1 })]);
  });

  test("--since a cursor goes on after it: nothing missed, nothing twice, across watchers", async () => {
    const h = await initHome();
    for (let i = 0; i < 3; i++) await enqueueJson(h, "demo", `k${i}`, { n: i });
    const first = await watch(h, ["--since", "0", "--count", "2"]);
    const cursor = first[first.length - 1].cursor;
    // Changes while no one watches.
    for (let i = 3; i < 5; i++) await enqueueJson(h, "demo", `k${i}`, { n: i });
    const rest = await watch(h, ["--since", String(cursor), "--count", "3"]);
    expect([...first, ...rest].map((l) => l.key)).toEqual(["k0", "k1", "k2", "k3", "k4"]);
    expect(rest[0].cursor).toBe(cursor + 1);
  });

  test("a watcher started before a change sees it as it commits", async () => {
    const h = await initHome();
    // From cursor 0 of an empty journal, so what it sees does not depend on which starts first.
    const live = inHome(h, ["--json", "watch", "--since", "0", "--count", "1", "--for", "10"]);
    await enqueueJson(h, "demo", "later", { n: 1 });
    const got = lines((await live).out);
    expect(got.map((l) => [l.kind, l.key])).toEqual([["event", "later"]]);
  });

  test("filters: a source, a destination or a key", async () => {
    const h = await initHome();
    await enqueueJson(h, "demo", "a", { n: 1 });
    await enqueueJson(h, "once", "b", { n: 2 });
    expect(
      (await watch(h, ["--since", "0", "--source", "once", "--count", "2"])).map((l) => [l.source, l.kind]),
    ).toEqual([
      ["once", "event"],
      ["once", "sealed"],
    ]);
    expect((await watch(h, ["--since", "0", "--key", "a", "--count", "1"])).map((l) => l.key)).toEqual(["a"]);
  });

  test(
    "a cursor behind what retention kept: cursor reset required, with the oldest position; one " +
      "never given is refused",
    async () => {
      const h = await initHome();
      for (let i = 0; i < 3; i++) await enqueueJson(h, "demo", `k${i}`, { n: i });
      withDb(h.db, (db) => db.run("DELETE FROM journal WHERE id <= 2"));
      const r = await inHome(h, ["watch", "--since", "1", "--for", "1"]);
      expect(r.code).toBe(1);
      expect(r.err).toContain(
        "cursor reset required: cursor 1 is older than the journal keeps; the oldest position is 2",
      );
      // From the oldest position, nothing is missing.
      expect((await watch(h, ["--since", "2", "--count", "1"])).map((l) => l.key)).toEqual(["k2"]);
      expect((await inHome(h, ["watch", "--since", "99", "--for", "1"])).code).toBe(2);
    },
  );
});
