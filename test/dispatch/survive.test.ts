// The dispatcher and its maintenance keep running when the spool refuses a write (a full disk,
// a read-only file, a stuck lock), on both backends: the failure is counted and logged by class,
// a batch whose mark failed is recovered when its lease expires and delivered again, and one
// spool issue says so until writes have worked for a whole maintenance interval.
import { expect, setDefaultTimeout, test } from "bun:test";
import { parseConfig } from "../../src/config/load.ts";
import { Maintenance } from "../../src/dispatch/maintenance.ts";
import { faultCounts, WRITE_FAILED_ISSUE } from "../../src/obs/faults.ts";
import { createLogger } from "../../src/log.ts";
import { renderStoreMetrics } from "../../src/obs/metrics.ts";
import { describe } from "bun:test";
import { batchIdOf, down, fakeDestination, ok, rigOn } from "../helpers/dispatch.ts";
import { LOG_LINES } from "../helpers/intake.ts";
import { onBothWorlds, type Rows } from "../helpers/world.ts";

setDefaultTimeout(30_000);

const BASE = `[sources.s]\naction = "hermes:a"\n`;

async function issues(rows: Rows, fp: string) {
  return (await rows.all("SELECT fingerprint, kind, state, count FROM issues WHERE fingerprint = ?", fp)) as {
    fingerprint: string;
    kind: string;
    state: string;
    count: number;
  }[];
}

function faults(component: string, klass: string): number {
  return faultCounts().find((f) => f.component === component && f.klass === klass)?.n ?? 0;
}

onBothWorlds((open, backend) => {
  describe("a refused mark write", () => {
    test(
      "does not end the dispatcher: the lease expires, the batch" + " is delivered again, one spool issue opens",
      async () => {
        const a = fakeDestination("hermes:a");
        const r = await rigOn(open, BASE, [a]);
        try {
          const w = r.world;
          const id = batchIdOf(await r.put("A", "hermes:a"));
          const before = faults("dispatcher", w.readOnlyClass);
          // The receiver accepts it; then the spool refuses every write, so the mark fails.
          a.answer = async () => {
            await w.refuseWrites(true);
            return ok();
          };
          const from = LOG_LINES.length;
          await r.step();
          expect(a.calls).toHaveLength(1);
          expect((await r.batch(id)).state).toBe("leased");
          expect(faults("dispatcher", w.readOnlyClass)).toBe(before + 1);
          expect(
            LOG_LINES.slice(from).some(
              (l) =>
                l.includes("delivery failed: the spool refused the write") && l.includes(`reason=${w.readOnlyClass}`),
            ),
          ).toBe(true);
          // A tick while the spool still refuses writes fails too, and is survived the same way.
          await r.step();
          expect((await r.batch(id)).state).toBe("leased");

          // The disk is back. Past the lease, the tick recovers the batch and delivers it again.
          await w.refuseWrites(false);
          a.answer = () => ok();
          r.clock.advance(30 + 60 + 1);
          await r.step();
          expect((await r.batch(id)).state).toBe("delivered");
          expect(a.calls).toHaveLength(2);
          const attempts = await r.attempts(id);
          expect(attempts.map((x) => [x.outcome, x.error])).toEqual([
            ["retry", "lease expired"],
            ["ok", null],
          ]);
          const open = await issues(w.rows, WRITE_FAILED_ISSUE);
          expect(open).toHaveLength(1);
          expect(open[0]).toMatchObject({ kind: "spool", state: "open" });
          // A refused write is expected of a host: it is no bug, and opens no internal issue.
          expect(await w.rows.get("SELECT COUNT(*) AS n FROM issues WHERE kind = 'internal'")).toEqual({ n: 0 });
          // The heartbeat carries the count to /metrics, served by another process (the intake).
          const metrics = await renderStoreMetrics(w.status, r.config, w.spool?.path ?? "", { now: r.clock.now() });
          expect(metrics).toMatch(
            new RegExp(
              '^hookspool_dispatcher_caught_errors_total\\{component="dispatcher",' +
                `class="${w.readOnlyClass}"\\} [1-9]\\d*$`,
              "m",
            ),
          );
        } finally {
          await r.close();
        }
      },
    );
  });

  describe("maintenance chores", () => {
    test("each chore's failure is caught on its own; the spool issue resolves after a quiet interval", async () => {
      const t = await open();
      try {
        const { config } = parseConfig(`[sources.s]\naction = "hermes:a"\nexpect_every_s = 600\n`, "test.toml");
        const m = new Maintenance({
          store: t.maintenance,
          leader: await t.dispatch(),
          config: () => config,
          clock: t.clock,
          log: createLogger("maintenance", { clock: t.clock }),
          env: {},
          diskFree: () => 1e12,
        });
        const from = LOG_LINES.length;
        await t.refuseWrites(true);
        await m.tick();
        const lines = LOG_LINES.slice(from);
        // liveness (writes expected_since) and retention both wrote; both were refused and survived.
        for (const chore of ["liveness", "retention"])
          expect(lines.some((l) => l.includes(`${chore} failed: the spool refused the write`))).toBe(true);
        await t.refuseWrites(false);

        t.clock.advance(60);
        await m.tick(); // the held-back issue is written now
        expect(await issues(t.rows, WRITE_FAILED_ISSUE)).toMatchObject([{ state: "open" }]);
        t.clock.advance(30);
        await m.tick(); // not yet a whole interval since the last refusal was reported
        expect(await issues(t.rows, WRITE_FAILED_ISSUE)).toMatchObject([{ state: "open" }]);
        t.clock.advance(60);
        await m.tick();
        expect(await issues(t.rows, WRITE_FAILED_ISSUE)).toMatchObject([{ state: "resolved" }]);
        // And a pass that went through wrote what it should (the retention clock).
        expect(await t.rows.get("SELECT value FROM meta WHERE key = 'last_retention_at'")).toEqual({
          value: String(t.t0 + 60),
        });
      } finally {
        await t.close();
      }
    });
  });

  describe("a batch gone after its claim", () => {
    test("the attempt is closed at once (discarded), not left open until its lease", async () => {
      const a = fakeDestination("hermes:a");
      const r = await rigOn(open, BASE, [a]);
      try {
        const id = batchIdOf(await r.put("A", "hermes:a"));
        // Something outside the dispatcher removes the batch the moment it is leased.
        if (backend === "sqlite")
          await r.world.rows.run(`CREATE TRIGGER vanish AFTER UPDATE OF state ON batches WHEN NEW.state = 'leased'
            BEGIN DELETE FROM events WHERE batch_id = NEW.id; DELETE FROM batches WHERE id = NEW.id; END`);
        else {
          await r.world.rows.run(`CREATE FUNCTION vanish() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN DELETE FROM events WHERE batch_id = NEW.id; DELETE FROM batches WHERE id = NEW.id;
            RETURN NULL; END $$`);
          await r.world.rows.run(`CREATE TRIGGER vanish AFTER UPDATE OF state ON batches FOR EACH ROW
            WHEN (NEW.state = 'leased') EXECUTE FUNCTION vanish()`);
        }
        await r.step();
        expect(a.calls).toHaveLength(0);
        expect(await r.attempts(id)).toEqual([
          expect.objectContaining({
            outcome: "discarded",
            error: "batch missing after claim",
            counted: 0,
            finished_at: r.t0,
          }),
        ]);
      } finally {
        await r.close();
      }
    });
  });

  describe("breaker state changes", () => {
    test("one log line each: open, half-open, closed", async () => {
      const a = fakeDestination("hermes:a");
      a.answer = () => down();
      const r = await rigOn(open, `${BASE}[dispatch.breaker]\ntrip_after = 1\n`, [a]);
      try {
        const id = batchIdOf(await r.put("A", "hermes:a"));
        const from = LOG_LINES.length;
        await r.step();
        a.answer = () => ok();
        r.clock.set(
          Math.max(
            (await r.batch(id)).next_attempt_at as number,
            ((await r.dest("hermes:a")).opened_at as number) + 30,
          ),
        );
        await r.step();
        const lines = LOG_LINES.slice(from).filter((l) => l.includes("breaker"));
        expect(lines.map((l) => /breaker [a-z-]+/.exec(l)?.[0])).toEqual([
          "breaker open",
          "breaker half-open",
          "breaker closed",
        ]);
        for (const l of lines) expect(l).toContain("destination=hermes:a");
      } finally {
        await r.close();
      }
    });
  });
});
