// Bugs are loud: a programming error caught at a loop's top is counted apart from the failures
// hookspool expects, logged with where it happened, and opens an internal issue that carries the
// stack's file:line frames and never a value. The part keeps running. On both backends.
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { parseConfig } from "../../src/config/load.ts";
import { alertText } from "../../src/dispatch/alerts.ts";
import { Maintenance } from "../../src/dispatch/maintenance.ts";
import { createLogger } from "../../src/log.ts";
import { BUG_ISSUE_EVERY_S, faultCounts, isExpected, stackFrames } from "../../src/obs/faults.ts";
import { renderStoreMetrics } from "../../src/obs/metrics.ts";
import { HookspoolError } from "../../src/errors.ts";
import { IntakeMetrics } from "../../src/intake/metrics.ts";
import type { IssueRow } from "../../src/store/issues.ts";
import { fakeDestination, rigOn } from "../helpers/dispatch.ts";
import { LOG_LINES } from "../helpers/intake.ts";
import { waitFor } from "../helpers/proc.ts";
import { onBothWorlds, type Rows } from "../helpers/world.ts";

setDefaultTimeout(30_000);

const SENTINEL = "V4LUE-9c1e";

async function internalIssues(rows: Rows): Promise<IssueRow[]> {
  return (await rows.all("SELECT * FROM issues WHERE kind = 'internal' ORDER BY id")) as unknown as IssueRow[];
}

function bugs(component: string, klass: string): number {
  return faultCounts().find((f) => f.component === component && f.klass === klass && f.bug)?.n ?? 0;
}

function thrower(): never {
  const payload = { secret: SENTINEL };
  throw new TypeError(`cannot read ${payload.secret}`);
}

describe("what counts as a bug", () => {
  test("a refused write and a HookspoolError are expected; a TypeError or a bare throw is a bug", () => {
    expect(isExpected(Object.assign(new Error("disk"), { code: "SQLITE_FULL" }))).toBe(true);
    expect(isExpected(new HookspoolError("E_CONFIG", "bad"))).toBe(true);
    expect(isExpected(new TypeError("x"))).toBe(false);
    expect(isExpected("a string")).toBe(false);
  });

  test("a bug's frames are file:line positions, innermost first, with no message in them", () => {
    let frames: string[] = [];
    try {
      thrower();
    } catch (e) {
      frames = stackFrames(e);
    }
    expect(frames.length).toBeGreaterThan(0);
    expect(frames[0]).toMatch(/^bugs\.test\.ts:\d+$/);
    for (const f of frames) expect(f).toMatch(/^[\w./-]+:\d+$/);
    expect(frames.join(" ")).not.toContain(SENTINEL);
    // Paths under src/ keep their place in the tree.
    const e = new Error("x");
    e.stack =
      "Error: x\n    at tick (/home/u/hookspool/src/dispatch/loop.ts:210:15)\n" +
      "    at /home/u/hookspool/src/service.ts:99:7\n    at processTicksAndRejections (native:7:39)";
    expect(stackFrames(e)).toEqual(["src/dispatch/loop.ts:210", "src/service.ts:99"]);
  });
});

onBothWorlds((open, backend) => {
  describe("a bug in the dispatcher's tick", () => {
    test("is counted, logged with where, and opens one internal issue; the dispatcher keeps ticking", async () => {
      const a = fakeDestination("hermes:a");
      const r = await rigOn(open, `[sources.s]\naction = "hermes:a"\n`, [a]);
      try {
        await r.put("A", "hermes:a");
        // A bug in the loop itself: reading the destination's bound throws.
        Object.defineProperty(a, "maxInflight", { get: () => thrower() });
        const before = bugs("dispatcher", "TypeError");
        const from = LOG_LINES.length;
        await r.step();
        expect(bugs("dispatcher", "TypeError")).toBe(before + 1);
        const line = LOG_LINES.slice(from).find((l) => l.includes("tick failed: a bug in hookspool"));
        expect(line).toMatch(/reason="?TypeError at bugs\.test\.ts:\d+/);
        expect(line).not.toContain(SENTINEL);

        // The issue is written after the tick, not in it (the loop does not wait for it): waited for.
        const [issue] = await waitFor("the internal issue", async () => {
          const rows = await internalIssues(r.world.rows);
          return rows.length ? rows : null;
        });
        expect(issue).toMatchObject({ kind: "internal", state: "open", count: 1 });
        expect(issue.fingerprint).toMatch(/^internal:dispatcher:tick:TypeError@bugs\.test\.ts:\d+$/);
        expect(issue.last_error).toMatch(
          /^tick failed: TypeError at bugs\.test\.ts:\d+ < .*src\/dispatch\/loop\.ts:\d+/,
        );
        expect(issue.last_error).not.toContain(SENTINEL);
        expect(alertText(issue, r.clock.now())).toContain("a bug in hookspool");

        // It repeats every tick: counted every time, the issue written again at most once a minute.
        await r.step();
        expect(bugs("dispatcher", "TypeError")).toBe(before + 2);
        expect((await internalIssues(r.world.rows))[0].count).toBe(1);
        r.clock.advance(BUG_ISSUE_EVERY_S);
        await r.step();
        expect(
          await waitFor("the issue written again", async () => (await internalIssues(r.world.rows))[0].count === 2),
        ).toBe(true);

        // Fixed (the getter gone), the same dispatcher delivers: it never stopped.
        Object.defineProperty(a, "maxInflight", { value: 1 });
        await r.step();
        expect(a.calls).toHaveLength(1);

        // /metrics says how many were bugs, apart from the failures hookspool expects.
        expect(new IntakeMetrics().render()).toMatch(
          /^hookspool_bugs_total\{component="dispatcher",class="TypeError"\} [1-9]\d*$/m,
        );
      } finally {
        await r.close();
      }
    });

    test("the dispatcher's bug count reaches /metrics of another process through the heartbeat", async () => {
      const t = await open();
      try {
        // Another process's dispatcher (pid 1) beat with the failures it caught.
        await (await t.dispatch()).writeHeartbeat(
          t.clock.now(),
          "otherhost",
          1,
          JSON.stringify([
            { component: "dispatcher", klass: "SQLITE_FULL", n: 4, bug: false },
            { component: "dispatcher", klass: "TypeError", n: 2, bug: true },
          ]),
        );
        const { config } = parseConfig("", "t.toml");
        const text = await renderStoreMetrics(t.status, config, t.spool?.path ?? "", { now: t.clock.now() });
        expect(text).toMatch(
          /^hookspool_dispatcher_caught_errors_total\{component="dispatcher",class="SQLITE_FULL"\} 4$/m,
        );
        expect(text).toMatch(/^hookspool_dispatcher_bugs_total\{component="dispatcher",class="TypeError"\} 2$/m);
        expect(text).not.toMatch(/^hookspool_dispatcher_bugs_total\{[^}]*SQLITE_FULL/m);
      } finally {
        await t.close();
      }
    });
  });

  describe("a bug in a maintenance chore", () => {
    // The bug is planted in the free-disk read, which PostgreSQL never makes (the server keeps its own disk).
    test.skipIf(backend === "postgres")(
      "opens an internal issue named for the chore; the other chores still run",
      async () => {
        const t = await open();
        try {
          const { config } = parseConfig(`[sources.s]\naction = "hermes:a"\nexpect_every_s = 60\n`, "t.toml");
          let calls = 0;
          const m = new Maintenance({
            store: t.maintenance,
            leader: await t.dispatch(),
            config: () => config,
            clock: t.clock,
            log: createLogger("maintenance", { clock: t.clock }),
            env: {},
            // The spool-limits chore reads free space through this: a bug there.
            diskFree: () => {
              calls++;
              return thrower();
            },
          });
          await m.tick();
          expect(calls).toBe(1);
          const [issue] = await internalIssues(t.rows);
          expect(issue.fingerprint).toMatch(/^internal:maintenance:spool limits:TypeError@bugs\.test\.ts:\d+$/);
          // Retention ran after it all the same.
          expect(await t.maintenance.metaNumber("last_retention_at")).toBe(t.clock.now());
        } finally {
          await t.close();
        }
      },
    );
  });
});
