// hookspool prune [--vacuum] and hookspool export.
import { describe, expect, test } from "bun:test";
import { statSync } from "node:fs";
import { claimBatch } from "../../src/store/sqlite/claim.ts";
import { markRetry } from "../../src/store/sqlite/marks.ts";
import { enqueueTx, quarantine } from "../../src/store/sqlite/enqueue.ts";
import { cli } from "../helpers/cli.ts";
import { copy, ev, payloadOf } from "../helpers/spool.ts";
import { type Home, enqueueJson, initHome, oneErrorLine, withDb, withSpool } from "./home.ts";

const DAY = 86400;

/** Run prune or export against this home (the root does not list them yet). */
function run(h: Home, argv: string[], opts: Parameters<typeof cli>[1] = {}) {
  return cli(["--home", h.home, ...argv], opts);
}

/** Deliver a batch behind the CLI's back, `daysAgo` days before the real clock. */
function deliveredDaysAgo(h: Home, id: number, daysAgo: number): void {
  withDb(h.db, (db) => {
    const at = Date.now() / 1000 - daysAgo * DAY;
    db.run(
      "UPDATE batches SET state = 'delivered', sealed_at = ?, content_hash = 'sha256:x', delivered_at = ? WHERE id = ?",
      [at, at, id],
    );
  });
}

function count(h: Home, table: string): number {
  return withDb(h.db, (db) => (db.query(`SELECT COUNT(*) AS n FROM ${table}`).get() as { n: number }).n);
}

describe("prune", () => {
  test("deletes what retention says and prints the counts; --json prints the counts object", async () => {
    const h = await initHome();
    const old = await enqueueJson(h, "demo", "a", { n: 1 }, ["--dedup-id", "d1"]);
    const fresh = await enqueueJson(h, "demo", "b", { n: 2 });
    const open = await enqueueJson(h, "demo", "c", { n: 3 });
    deliveredDaysAgo(h, old, 8);
    deliveredDaysAgo(h, fresh, 6);
    // the dedup row is as old as its event: past the demo source's default window
    withDb(h.db, (db) => db.run("UPDATE dedup SET seen_at = seen_at - ?", [2 * DAY]));

    const r = await run(h, ["prune"]);
    expect(r).toMatchObject({ code: 0, err: "" });
    expect(r.out.trim()).toBe("deleted 1 batch (1 event), 0 attempts, 1 dedup row, 0 issues");
    const left = withDb(h.db, (db) => db.query("SELECT id FROM batches ORDER BY id").all());
    expect(left).toEqual([{ id: fresh }, { id: open }]);
    expect(count(h, "events")).toBe(2);
    expect(count(h, "dedup")).toBe(0);

    const again = await run(h, ["--json", "prune"]);
    expect(again).toMatchObject({ code: 0, err: "" });
    expect(JSON.parse(again.out)).toEqual({
      batches: 0,
      events: 0,
      attempts: 0,
      dedup: 0,
      issues: 0,
      body_files: 0,
      body_bytes: 0,
    });
    expect((await run(h, ["prune"])).out.trim()).toBe("nothing to delete");
  });

  test("reads retention and per-source windows from the config", async () => {
    const extra = [
      "",
      "[retention]",
      "delivered_days = 1",
      "",
      "[sources.fast]",
      "dedup_window_s = 600",
      'action = "script:demo-log"',
      "",
    ].join("\n");
    const h = await initHome({ extra });
    const id = await enqueueJson(h, "demo", "a", {});
    deliveredDaysAgo(h, id, 2);
    await enqueueJson(h, "demo", "b", {}, ["--dedup-id", "x"]);
    await enqueueJson(h, "fast", "b", {}, ["--dedup-id", "x"]);
    // an hour old: past fast's 600 s window, inside demo's default day
    withDb(h.db, (db) => db.run("UPDATE dedup SET seen_at = seen_at - 3600"));
    const r = await run(h, ["--json", "prune"]);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.out)).toEqual({
      batches: 1,
      events: 1,
      attempts: 0,
      dedup: 1,
      issues: 0,
      body_files: 0,
      body_bytes: 0,
    });
    expect(withDb(h.db, (db) => db.query("SELECT source FROM dedup").all())).toEqual([{ source: "demo" }]);
  });

  test("never creates or migrates a spool", async () => {
    const h = await initHome();
    withDb(h.db, (db) => db.run("PRAGMA user_version = 1"));
    const r = await run(h, ["prune"]);
    expect(r.code).toBe(2);
    expect(oneErrorLine(r.err)).toContain("run hookspool migrate");
  });

  test("--vacuum gives the freed space back and prints the sizes", async () => {
    const h = await initHome();
    withSpool(h.db, (spool) => {
      spool.db
        .transaction(() => {
          for (let i = 0; i < 150; i++) {
            // Not the payload byte for byte, so it is stored beside it: both count toward the file.
            const raw = new TextEncoder().encode(` ${payloadOf(16_000)}`);
            enqueueTx(
              spool.db,
              ev({
                source: "demo",
                key: `k${i}`,
                payload: payloadOf(16_000),
                raw,
                copies: [copy("demo", "script:demo-log")],
              }),
              1_000_000,
            );
          }
          spool.db.run(
            "UPDATE batches SET state = 'delivered', sealed_at = 1000000, content_hash = 'sha256:x', " +
              "delivered_at = 1000000",
          );
        })
        .immediate();
    });
    await enqueueJson(h, "demo", "kept", { n: 1 });
    const r = await run(h, ["--json", "prune", "--vacuum"]);
    expect(r.code).toBe(0);
    expect(r.err).toContain("twice its size");
    const doc = JSON.parse(r.out);
    expect(doc).toMatchObject({ batches: 150, events: 150 });
    expect(doc.vacuum.bytes_before).toBeGreaterThan(4_000_000);
    expect(doc.vacuum.bytes_after).toBeLessThan(doc.vacuum.bytes_before / 10);
    expect(statSync(h.db).size).toBeLessThan(doc.vacuum.bytes_before / 10);
    expect(count(h, "events")).toBe(1);

    const text = await run(h, ["prune", "--vacuum"]);
    expect(text.code).toBe(0);
    expect(text.out).toContain("nothing to delete");
    expect(text.out).toMatch(/^vacuum: .+ -> .+$/m);
  });
});

/** export's stdout as records; every line must be one JSON object. */
function records(
  out: string,
): { batch: Record<string, unknown>; events: Record<string, unknown>[]; attempts: Record<string, unknown>[] }[] {
  const lines = out.split("\n").filter((l) => l !== "");
  return lines.map((l) => JSON.parse(l));
}

describe("export", () => {
  /** Three batches: a retry batch with two events and an attempt, a delivered one, a quarantined request. */
  async function seeded() {
    const h = await initHome();
    const a = await enqueueJson(h, "demo", "a", { n: 1, s: "first" }, ["--dedup-id", "d1", "--event-type", "push"]);
    await enqueueJson(h, "demo", "a", { n: 2 });
    const b = await enqueueJson(h, "demo", "b", { n: 3 });
    let attemptId = 0;
    withSpool(h.db, (spool) => {
      spool.db.run("UPDATE batches SET state = 'sealed', sealed_at = last_at, content_hash = 'sha256:x' WHERE id = ?", [
        a,
      ]);
      const now = spool.clock.now();
      const c = claimBatch(spool, {
        batchId: a,
        destination: "script:demo-log",
        now,
        leaseUntil: now + 60,
        host: "h",
        pid: 1,
      });
      if (!c) throw new Error("claim");
      attemptId = c.attemptId;
      markRetry(spool, {
        batchId: a,
        attemptId,
        owner: c.owner,
        now,
        nextAttemptAt: now + 30,
        attempt: { klass: "transport", status: null, error: "refused", durationMs: 4, counted: false },
      });
    });
    deliveredDaysAgo(h, b, 1);
    const q = withSpool(h.db, (spool) =>
      quarantine(spool, {
        source: "demo",
        raw: new Uint8Array([0, 255, 1]),
        headers: { "content-type": "x/y" },
        authHeaders: [],
        url: null,
        reason: "plugin_error:TypeError",
      }),
    );
    return { h, a, b, q: q.batchId, attemptId };
  }

  test("one JSON line per batch, oldest first, with events (payloads, headers, raw base64) and attempts", async () => {
    const { h, a, b, q, attemptId } = await seeded();
    const r = await run(h, ["export"]);
    expect(r.code).toBe(0);
    expect(r.err.trim()).toBe("exported 3 batches (4 events)");
    const recs = records(r.out);
    expect(recs.map((x) => x.batch.id)).toEqual([a, b, q]);
    expect(recs[0].batch).toMatchObject({ id: a, state: "retry", key: "a", count: 2, source: "demo" });
    expect(recs[0].events).toHaveLength(2);
    expect(recs[0].events[0]).toMatchObject({
      event_type: "push",
      dedup_id: "d1",
      route: "demo",
      excluded_at: null,
      headers: {},
    });
    expect(JSON.parse(recs[0].events[0].payload as string)).toEqual({ n: 1, s: "first" });
    // the CLI keeps the raw body (spool.store_raw defaults to true)
    expect(Buffer.from(recs[0].events[0].raw_base64 as string, "base64").toString()).toBe(
      recs[0].events[0].payload as string,
    );
    expect(Object.keys(recs[0].events[0]).sort()).toEqual([
      "dedup_id",
      "event_type",
      "excluded_at",
      "headers",
      "id",
      "payload",
      "raw_base64",
      "received_at",
      "route",
      "size",
      "trace",
      "version",
    ]);
    expect(recs[0].events[0].trace).toMatchObject({ stage: "implicit", route: "demo" });
    expect(recs[0].attempts).toEqual([
      expect.objectContaining({ id: attemptId, batch_id: a, outcome: "retry", klass: "transport", error: "refused" }),
    ]);
    expect(recs[1]).toMatchObject({ batch: { id: b, state: "delivered" }, attempts: [] });
    expect(recs[2].batch).toMatchObject({ id: q, state: "dead", destination: "quarantine" });
    expect(recs[2].events[0]).toMatchObject({
      payload: null,
      headers: { "content-type": "x/y" },
      raw_base64: Buffer.from([0, 255, 1]).toString("base64"),
    });
  });

  test("--state and --since filter; --json changes nothing", async () => {
    const { h, a, b, q } = await seeded();
    const ids = async (argv: string[]) => {
      const r = await run(h, ["export", ...argv]);
      expect(r.code).toBe(0);
      return records(r.out).map((x) => x.batch.id);
    };
    expect(await ids(["--state", "delivered"])).toEqual([b]);
    expect(await ids(["--state", "dead"])).toEqual([q]);
    expect(await ids(["--state=retry"])).toEqual([a]);
    expect(await ids(["--state", "open"])).toEqual([]);
    withDb(h.db, (db) => {
      for (const [id, at] of [
        [a, 1000],
        [b, 2000],
        [q, 3000],
      ])
        db.run("UPDATE batches SET last_at = ? WHERE id = ?", [at, id]);
    });
    expect(await ids(["--since", "2000"])).toEqual([b, q]);
    expect(await ids(["--since", "1970-01-01T00:40:00Z"])).toEqual([q]);
    expect(await ids(["--since", "24h"])).toEqual([]);
    expect(await ids(["--since", "2000", "--state", "dead"])).toEqual([q]);
    const json = await run(h, ["--json", "export"]);
    expect(records(json.out).map((x) => x.batch.id)).toEqual([a, b, q]);
  });

  test("a bad --state or --since is a usage error (exit 2) with nothing on stdout", async () => {
    const { h } = await seeded();
    const badState = await run(h, ["export", "--state", "stuck"]);
    expect(badState).toMatchObject({ code: 2, out: "" });
    expect(oneErrorLine(badState.err)).toContain(
      "--state must be one of open, sealed, leased, retry, awaiting, delivered, dead, dropped",
    );
    const badSince = await run(h, ["export", "--since", "yesterday"]);
    expect(badSince).toMatchObject({ code: 2, out: "" });
    expect(oneErrorLine(badSince.err)).toContain("--since yesterday");
  });

  test(
    "--limit stops after so many batches and says where --after goes on; the pages join into the " + "whole",
    async () => {
      const { h, a, b, q } = await seeded();
      const first = await run(h, ["export", "--limit", "2"]);
      expect(first.code).toBe(0);
      expect(records(first.out).map((x) => x.batch.id)).toEqual([a, b]);
      expect(first.err.trim().split("\n")).toEqual(["exported 2 batches (3 events)", `more: --after ${b}`]);
      const rest = await run(h, ["export", "--limit", "2", "--after", String(b)]);
      expect(records(rest.out).map((x) => x.batch.id)).toEqual([q]);
      // The last page says nothing more: there is nothing more.
      expect(rest.err.trim()).toBe("exported 1 batch (1 event)");
      // Exactly as many as there are: nothing more either.
      expect((await run(h, ["export", "--limit", "3"])).err.trim()).toBe("exported 3 batches (4 events)");
      for (const bad of [
        ["--limit", "0"],
        ["--limit", "x"],
        ["--after", "-1"],
      ])
        expect({ bad, code: (await run(h, ["export", ...bad])).code }).toEqual({ bad, code: 2 });
    },
  );

  test("an empty export is fine: exit 0, nothing on stdout", async () => {
    const h = await initHome();
    const r = await run(h, ["export"]);
    expect(r).toMatchObject({ code: 0, out: "" });
    expect(r.err.trim()).toBe("exported 0 batches (0 events)");
  });
});
