// hookspool status: the health document, its summary for people, and its exit code.
import { describe, expect, test } from "bun:test";
import { closeSync, openSync, statSync, writeSync } from "node:fs";
import { claimBatch } from "../../src/store/sqlite/claim.ts";
import { markDead } from "../../src/store/sqlite/marks.ts";
import { quarantine } from "../../src/store/sqlite/enqueue.ts";
import { writeHeartbeat } from "../../src/store/sqlite/meta.ts";
import { EXTRA_CONFIG, type Home, enqueueJson, initHome, inHome, withSpool } from "./home.ts";
import { LATEST_SCHEMA } from "../../src/store/sqlite/migrate.ts";
import { reportError } from "../../src/cli/report.ts";
import type { Io } from "../../src/cli/context.ts";

/** The top-level fields of the health document this build reports (polls come with poll sources). */
const FIELDS = [
  "ok",
  "degraded",
  "schema",
  "dispatcher",
  "spool",
  "batches",
  "oldest_pending_age_s",
  "destinations",
  "sources",
  "issues_open",
  "spool_bytes",
  "disk_free_bytes",
];

/** A spool with one batch in each interesting state: open, sealed, dead, quarantined. */
async function busyHome(): Promise<Home> {
  const h = await initHome();
  await enqueueJson(h, "demo", "a", {}); // 1 open
  await enqueueJson(h, "once", "a", {}); // 2 sealed
  const dead = await enqueueJson(h, "once", "b", {}); // 3 -> dead
  withSpool(h.db, (spool) => {
    const now = spool.clock.now();
    const c = claimBatch(spool, {
      batchId: dead,
      destination: "script:demo-log",
      now,
      leaseUntil: now + 60,
      host: "t",
      pid: 1,
    });
    if (!c) throw new Error("not claimable");
    markDead(spool, {
      batchId: dead,
      attemptId: c.attemptId,
      owner: c.owner,
      now,
      attempt: { klass: "permanent", status: 1, error: "no", durationMs: 1, counted: true },
    });
    const request = {
      source: "demo",
      raw: new TextEncoder().encode("{"),
      headers: {},
      authHeaders: [] as string[],
      url: null,
      reason: "plugin_error:SyntaxError",
    };
    quarantine(spool, request);
  });
  return h;
}

/** `status --json`: the document, printed whatever it says; exit 1 exactly when it is not ok. */
async function statusDoc(h: Home) {
  const r = await inHome(h, ["status", "--json"]);
  expect(r.err).toBe("");
  const doc = JSON.parse(r.out);
  expect({ ok: doc.ok, code: r.code }).toEqual({ ok: doc.ok, code: doc.ok ? 0 : 1 });
  return doc;
}

describe("status", () => {
  test("--json has every top-level field", async () => {
    const h = await initHome();
    const doc = await statusDoc(h);
    expect(Object.keys(doc)).toEqual(expect.arrayContaining(FIELDS));
    expect(doc.schema).toBe(LATEST_SCHEMA);
    expect(doc.batches).toEqual({
      open: 0,
      sealed: 0,
      leased: 0,
      retry: 0,
      awaiting: 0,
      delivered: 0,
      dead: 0,
      dropped: 0,
      quarantined: 0,
    });
    expect(doc.oldest_pending_age_s).toBeNull();
    expect(doc.spool).toEqual({
      last_enqueue_age_s: null,
      writable_checked_age_s: null,
      integrity_checked_age_s: null,
    });
    expect(doc.issues_open).toBe(0);
    expect(doc.spool_bytes).toBeGreaterThan(0);
    expect(doc.disk_free_bytes).toBeGreaterThan(0);
    expect(Object.keys(doc.sources)).toEqual(["demo", "small", "once"]);
    expect(doc.sources.demo).toEqual({ last_event_age_s: null });
  });

  test("counts batches by state, quarantine apart from dead, and says what is degraded", async () => {
    const h = await busyHome();
    const doc = await statusDoc(h);
    expect(doc.batches).toEqual({
      open: 1,
      sealed: 1,
      leased: 0,
      retry: 0,
      awaiting: 0,
      delivered: 0,
      dead: 1,
      dropped: 0,
      quarantined: 1,
    });
    expect(doc.ok).toBe(false);
    expect(doc.degraded).toEqual(
      expect.arrayContaining([
        "dispatcher: no heartbeat yet",
        "batches: 1 dead (1 rejected)",
        "batches: 1 quarantined",
      ]),
    );
    expect(doc.issues_open).toBe(1);
    expect(doc.oldest_pending_age_s).toBeGreaterThanOrEqual(0);
    expect(Object.keys(doc.destinations)).toEqual(["script:demo-log"]);
    expect(doc.destinations["script:demo-log"]).toMatchObject({ state: "closed" });
    expect(doc.destinations["script:demo-log"].oldest_pending_age_s).toBeGreaterThanOrEqual(0);
    expect(doc.sources.demo.last_event_age_s).toBeGreaterThanOrEqual(0);
    expect(doc.sources.small.last_event_age_s).toBeNull();
    expect(doc.spool.last_enqueue_age_s).toBeGreaterThanOrEqual(0);
  });

  test("exit 1 while it reports problems, 0 once ok; --json prints the document either way", async () => {
    const h = await initHome({ extra: `${EXTRA_CONFIG}\n[limits]\nmin_free_bytes = 1\n` });
    const sick = await inHome(h, ["--json", "status"]);
    expect(sick.code).toBe(1);
    expect(JSON.parse(sick.out)).toMatchObject({ ok: false, degraded: ["dispatcher: no heartbeat yet"] });
    const human = await inHome(h, ["status"]);
    expect(human).toMatchObject({ code: 1, err: "" });
    expect(human.out).toStartWith("hookspool: 1 problem(s)\n  - dispatcher: no heartbeat yet\n");
    withSpool(h.db, (spool) => writeHeartbeat(spool, spool.clock.now(), 4242));
    const well = await inHome(h, ["--json", "status"]);
    expect(well.code).toBe(0);
    expect(JSON.parse(well.out)).toMatchObject({ ok: true, degraded: [] });
    const ok = await inHome(h, ["status"]);
    expect(ok).toMatchObject({ code: 0, err: "" });
    expect(ok.out).toStartWith("hookspool: ok\n");
  });

  test("a fresh heartbeat makes the dispatcher alive", async () => {
    // A nearly full /tmp on a test machine must not make this test about disk space.
    const h = await initHome({ extra: `${EXTRA_CONFIG}\n[limits]\nmin_free_bytes = 1\n` });
    expect((await statusDoc(h)).dispatcher).toEqual({ alive: false, heartbeat_age_s: null, pid: null });
    withSpool(h.db, (spool) => writeHeartbeat(spool, spool.clock.now(), 4242));
    const doc = await statusDoc(h);
    expect(doc.dispatcher).toMatchObject({ alive: true, pid: 4242 });
    expect(doc.ok).toBe(true);
    expect(doc.degraded).toEqual([]);
  });

  test("the human form names the dispatcher and the batch counts", async () => {
    const h = await busyHome();
    const r = await inHome(h, ["status"]);
    expect(r).toMatchObject({ code: 1, err: "" });
    expect(r.out).toStartWith("hookspool: 3 problem(s)\n");
    expect(r.out).toMatch(/^dispatcher\s+not running$/m);
    expect(r.out).toMatch(new RegExp(`^spool\\s+schema ${LATEST_SCHEMA}, `, "m"));
    expect(r.out).toMatch(
      /^batches\s+1 open, 1 sealed, 0 leased, 0 retry, 0 awaiting, 0 delivered, 1 dead, 0 dropped, 1 quarantined$/m,
    );
    expect(r.out).toMatch(/^issues\s+1 open$/m);
    expect(r.out).toMatch(/^script:demo-log\s+closed\s/m);
    expect(r.out).toMatch(/^demo\s+\d+s ago/m);
    expect(() => JSON.parse(r.out)).toThrow();
  });
});

describe("status on a damaged spool", () => {
  /** Fill the spool with payload pages, then overwrite some in the middle of the file. */
  async function damaged(): Promise<Home> {
    const h = await initHome();
    for (let i = 0; i < 60; i++) await enqueueJson(h, "once", `k${i}`, { n: i, text: "y".repeat(2000) });
    withSpool(h.db, (spool) => spool.db.run("PRAGMA wal_checkpoint(TRUNCATE)"));
    const size = statSync(h.db).size;
    const fd = openSync(h.db, "r+");
    writeSync(fd, Buffer.alloc(16384, 0xa5), 0, 16384, Math.floor(size / 2 / 4096) * 4096);
    closeSync(fd);
    return h;
  }

  test("--deep reads the file through: a damaged one is exit 2 with check's words, never a stack", async () => {
    const h = await damaged();
    const deep = await inHome(h, ["status", "--deep"]);
    expect(deep.code).toBe(2);
    expect(deep.err).toMatch(
      /^hookspool: .* is corrupt: .*\(hookspool export what is readable and restore from backup/m,
    );
    expect(deep.err).not.toContain("internal error");
    expect(deep.err).not.toMatch(/\n\s+at /);
    const json = await inHome(h, ["--json", "status", "--deep"]);
    expect(json.code).toBe(2);
    expect(JSON.parse(json.out)).toMatchObject({ code: "E_CORRUPT" });
  });

  test(
    "an error that says the file is damaged, met by any read, is exit 2 with check's words, never " + "a bug's stack",
    () => {
      for (const e of [
        Object.assign(new Error("database disk image is malformed"), { code: "SQLITE_CORRUPT" }),
        Object.assign(new Error("file is not a database"), { code: "SQLITE_NOTADB" }),
      ]) {
        const err: string[] = [];
        const out: string[] = [];
        const code = reportError(
          { out: (t: string) => out.push(t), err: (t: string) => err.push(t) } as unknown as Io,
          e,
          false,
        );
        expect(code).toBe(2);
        expect(err.join("\n")).toMatch(/^hookspool: the spool is corrupt: .*restore from backup/);
        expect(err.join("\n")).not.toContain("internal error");
      }
    },
  );

  test("a sound spool says when its integrity was last checked", async () => {
    const sound = await initHome();
    expect((await inHome(sound, ["status"])).out).toMatch(/integrity checked never \(status --deep checks it\)/);
    expect((await inHome(sound, ["status", "--deep"])).code).toBe(1);
    expect((await inHome(sound, ["status"])).out).toMatch(/integrity checked \d+s ago/);
    expect(
      JSON.parse((await inHome(sound, ["--json", "status"])).out).spool.integrity_checked_age_s,
    ).toBeGreaterThanOrEqual(0);
  });
});
