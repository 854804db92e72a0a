// The dispatcher and its maintenance keep running when the spool refuses a write (a full disk,
// a read-only file, a stuck lock): the failure is counted and logged by class, a batch whose
// mark failed is recovered when its lease expires and delivered again, and one spool issue says
// so until writes have worked for a whole maintenance interval.
import { describe, expect, test } from "bun:test";
import { parseConfig } from "../../src/config/load.ts";
import { Maintenance } from "../../src/dispatch/maintenance.ts";
import { faultCounts, WRITE_FAILED_ISSUE } from "../../src/obs/faults.ts";
import { createLogger } from "../../src/log.ts";
import { renderStoreMetrics } from "../../src/obs/metrics.ts";
import { sqliteStatusStore } from "../../src/store/sqlite/store.ts";
import { join } from "node:path";
import { batchIdOf, down, fakeDestination, ok, rig } from "../helpers/dispatch.ts";
import { LOG_LINES } from "../helpers/intake.ts";
import { freshSpool, T0 } from "../helpers/spool.ts";
import { sqliteDispatchStore, sqliteMaintenanceStore } from "../../src/store/sqlite/store.ts";

const BASE = `[sources.s]\naction = "hermes:a"\n`;

function issues(db: { query: (sql: string) => { all: () => unknown[] } }, fp: string) {
  return db.query(`SELECT fingerprint, kind, state, count FROM issues WHERE fingerprint = '${fp}'`).all() as {
    fingerprint: string;
    kind: string;
    state: string;
    count: number;
  }[];
}

function faults(component: string, klass: string): number {
  return faultCounts().find((f) => f.component === component && f.klass === klass)?.n ?? 0;
}

describe("a refused mark write", () => {
  test("does not end the dispatcher: the lease expires, the batch is delivered again, one spool issue opens", async () => {
    const a = fakeDestination("hermes:a");
    const r = rig(BASE, [a]);
    const id = batchIdOf(r.put("A", "hermes:a"));
    const before = faults("dispatcher", "SQLITE_READONLY");
    // The receiver accepts it; then the connection refuses every write, so the mark fails.
    a.answer = () => {
      r.spool.db.run("PRAGMA query_only = ON");
      return ok();
    };
    const from = LOG_LINES.length;
    await r.step();
    expect(a.calls).toHaveLength(1);
    expect(r.batch(id).state).toBe("leased");
    expect(faults("dispatcher", "SQLITE_READONLY")).toBe(before + 1);
    expect(
      LOG_LINES.slice(from).some(
        (l) => l.includes("delivery failed: the spool refused the write") && l.includes("reason=SQLITE_READONLY"),
      ),
    ).toBe(true);
    // A tick while the spool still refuses writes fails too, and is survived the same way.
    await r.step();
    expect(r.batch(id).state).toBe("leased");

    // The disk is back. Past the lease, the tick recovers the batch and delivers it again.
    r.spool.db.run("PRAGMA query_only = OFF");
    a.answer = () => ok();
    r.clock.advance(30 + 60 + 1);
    await r.step();
    expect(r.batch(id).state).toBe("delivered");
    expect(a.calls).toHaveLength(2);
    const attempts = r.attempts(id);
    expect(attempts.map((x) => [x.outcome, x.error])).toEqual([
      ["retry", "lease expired"],
      ["ok", null],
    ]);
    const open = issues(r.spool.db, WRITE_FAILED_ISSUE);
    expect(open).toHaveLength(1);
    expect(open[0]).toMatchObject({ kind: "spool", state: "open" });
    // A refused write is expected of a host: it is no bug, and opens no internal issue.
    expect(r.spool.db.query("SELECT COUNT(*) AS n FROM issues WHERE kind = 'internal'").get()).toEqual({ n: 0 });
    // The heartbeat carries the count to /metrics, served by another process (the intake).
    const metrics = await renderStoreMetrics(sqliteStatusStore(r.spool), r.config, join(r.home, "spool.db"), {
      now: r.clock.now(),
    });
    expect(metrics).toMatch(
      /^hookspool_dispatcher_caught_errors_total\{component="dispatcher",class="SQLITE_READONLY"\} [1-9]\d*$/m,
    );
  });
});

describe("maintenance chores", () => {
  test("each chore's failure is caught on its own; the spool issue resolves after a quiet interval", async () => {
    const t = freshSpool();
    const { config } = parseConfig(`[sources.s]\naction = "hermes:a"\nexpect_every_s = 600\n`, "test.toml");
    const m = new Maintenance({
      store: sqliteMaintenanceStore(t.spool),
      leader: sqliteDispatchStore(t.spool),
      config: () => config,
      clock: t.clock,
      log: createLogger("maintenance", { clock: t.clock }),
      env: {},
      diskFree: () => 1e12,
    });
    const from = LOG_LINES.length;
    t.spool.db.run("PRAGMA query_only = ON");
    await m.tick();
    const lines = LOG_LINES.slice(from);
    // liveness (writes expected_since) and retention both wrote; both were refused and survived.
    for (const chore of ["liveness", "retention"])
      expect(lines.some((l) => l.includes(`${chore} failed: the spool refused the write`))).toBe(true);
    t.spool.db.run("PRAGMA query_only = OFF");

    t.clock.advance(60);
    await m.tick(); // the held-back issue is written now
    expect(issues(t.spool.db, WRITE_FAILED_ISSUE)).toMatchObject([{ state: "open" }]);
    t.clock.advance(30);
    await m.tick(); // not yet a whole interval since the last refusal was reported
    expect(issues(t.spool.db, WRITE_FAILED_ISSUE)).toMatchObject([{ state: "open" }]);
    t.clock.advance(60);
    await m.tick();
    expect(issues(t.spool.db, WRITE_FAILED_ISSUE)).toMatchObject([{ state: "resolved" }]);
    // And a pass that went through wrote what it should (the retention clock).
    expect(t.spool.db.query("SELECT value FROM meta WHERE key = 'last_retention_at'").get()).toEqual({
      value: String(T0 + 60),
    });
  });
});

describe("a batch gone after its claim", () => {
  test("the attempt is closed at once (discarded), not left open until its lease", async () => {
    const a = fakeDestination("hermes:a");
    const r = rig(BASE, [a]);
    const id = batchIdOf(r.put("A", "hermes:a"));
    // Something outside the dispatcher removes the batch the moment it is leased.
    r.spool.db.run(`CREATE TRIGGER vanish AFTER UPDATE OF state ON batches WHEN NEW.state = 'leased'
      BEGIN DELETE FROM events WHERE batch_id = NEW.id; DELETE FROM batches WHERE id = NEW.id; END`);
    await r.step();
    expect(a.calls).toHaveLength(0);
    expect(r.attempts(id)).toEqual([
      expect.objectContaining({
        outcome: "discarded",
        error: "batch missing after claim",
        counted: 0,
        finished_at: T0,
      }),
    ]);
  });
});

describe("breaker state changes", () => {
  test("one log line each: open, half-open, closed", async () => {
    const a = fakeDestination("hermes:a");
    a.answer = () => down();
    const r = rig(`${BASE}[dispatch.breaker]\ntrip_after = 1\n`, [a]);
    const id = batchIdOf(r.put("A", "hermes:a"));
    const from = LOG_LINES.length;
    await r.step();
    a.answer = () => ok();
    r.clock.set(Math.max(r.batch(id).next_attempt_at as number, (r.dest("hermes:a").opened_at as number) + 30));
    await r.step();
    const lines = LOG_LINES.slice(from).filter((l) => l.includes("breaker"));
    expect(lines.map((l) => /breaker [a-z-]+/.exec(l)?.[0])).toEqual([
      "breaker open",
      "breaker half-open",
      "breaker closed",
    ]);
    for (const l of lines) expect(l).toContain("destination=hermes:a");
  });
});
