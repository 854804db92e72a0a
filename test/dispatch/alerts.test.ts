// Alerts and maintenance, on both backends: alert once, again only after a reopen, one per
// rate_limit_s per kind, alerted_at only on exit 0, dry mode; source_silent, stale polls, the
// spool limit, and the hourly retention pass.
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { chmodSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseConfig } from "../../src/config/load.ts";
import type { Config } from "../../src/config/types.ts";
import { alertText, runAlerts } from "../../src/dispatch/alerts.ts";
import { Maintenance } from "../../src/dispatch/maintenance.ts";
import { loadSources } from "../../src/config/sources.ts";
import { storeStatus } from "../../src/obs/store-status.ts";
import { createLogger } from "../../src/log.ts";
import "../helpers/intake.ts"; // log lines are captured, not printed
import { copy, ev, T0 } from "../helpers/spool.ts";
import { tempDir } from "../helpers/tmp.ts";
import { onBothWorlds, type World } from "../helpers/world.ts";

setDefaultTimeout(30_000);

const log = createLogger("maintenance");

/** A config whose alert command appends its last argument to a file and exits with `code`. */
function alertConfig(extra = "", code = 0): { config: Config; file: string; script: string } {
  const dir = tempDir();
  const file = join(dir, "alerts.txt");
  const script = join(dir, "alert.sh");
  writeFileSync(script, `#!/bin/sh\nfor last; do :; done\nprintf '%s\\n' "$last" >> "${file}"\nexit ${code}\n`);
  chmodSync(script, 0o755);
  const { config } = parseConfig(
    `[alerts]\nargv = ["${script}"]\n${extra}\n[sources.s]\naction = "hermes:a"\nexpect_every_s = 600\n`,
    "test.toml",
  );
  return { config, file, script };
}

function sentLines(file: string): string[] {
  try {
    return readFileSync(file, "utf8").trim().split("\n").filter(Boolean);
  } catch {
    return [];
  }
}

async function issue(t: World, fp: string) {
  return (await t.rows.get("SELECT * FROM issues WHERE fingerprint = ?", fp)) as {
    id: number;
    state: string;
    alerted_at: number | null;
    count: number;
  };
}

test("alert texts name what broke and the command to run next", () => {
  const base = { id: 4, state: "open" as const, first_at: T0, last_at: T0, count: 3, alerted_at: null, route: null };
  const dead = alertText(
    {
      ...base,
      fingerprint: "delivery:hermes:ci:permanent",
      kind: "delivery",
      destination: "hermes:ci",
      sample_batch_id: 12,
      last_error: "http 422",
    },
    T0 + 120,
  );
  expect(dead).toContain("hookspool replay 12");
  expect(dead).toContain("hermes:ci");
  expect(dead).toContain("permanent");
  expect(dead).toContain("3 time(s)");
  const silent = alertText(
    {
      ...base,
      fingerprint: "source_silent:gcal",
      kind: "source_silent",
      destination: null,
      sample_batch_id: null,
      last_error: null,
    },
    T0,
  );
  expect(silent).toContain("source gcal");
  expect(
    alertText(
      {
        ...base,
        fingerprint: "config:file",
        kind: "config",
        destination: null,
        sample_batch_id: null,
        last_error: "bad",
      },
      T0,
    ),
  ).toContain("hookspool check");
});

onBothWorlds((open, backend) => {
  describe("alerts", () => {
    test("each open issue alerts once, with the text as the command's last argument", async () => {
      const t = await open();
      try {
        const { config, file } = alertConfig();
        await t.maintenance.raiseIssue({
          fingerprint: "delivery:hermes:a:unreachable",
          kind: "delivery",
          destination: "hermes:a",
          batchId: 7,
          error: "breaker open after connection refused",
          now: t.t0,
        });
        expect(await runAlerts({ store: t.maintenance, config, env: {}, log, now: t.t0 })).toHaveLength(1);
        expect(await runAlerts({ store: t.maintenance, config, env: {}, log, now: t.t0 + 3600 })).toHaveLength(0);
        const lines = sentLines(file);
        expect(lines).toHaveLength(1);
        expect(lines[0]).toContain("hermes:a");
        expect(lines[0]).toContain("unreachable");
        expect(lines[0]).toContain("1 time(s)");
        expect(lines[0]).toContain("Next: hookspool status");
        expect((await issue(t, "delivery:hermes:a:unreachable")).alerted_at).toBe(t.t0);
      } finally {
        await t.close();
      }
    });

    test("a resolved issue that reopens alerts again; an ignored one never does", async () => {
      const t = await open();
      try {
        const { config, file } = alertConfig("rate_limit_s = 0");
        await t.maintenance.raiseIssue({ fingerprint: "config:delivery:x", kind: "config", now: t.t0 });
        await runAlerts({ store: t.maintenance, config, env: {}, log, now: t.t0 });
        await t.maintenance.resolveIssue("config:delivery:x", t.t0 + 10);
        await t.maintenance.raiseIssue({ fingerprint: "config:delivery:x", kind: "config", now: t.t0 + 20 });
        expect(await issue(t, "config:delivery:x")).toMatchObject({ state: "open", alerted_at: null, count: 2 });
        await runAlerts({ store: t.maintenance, config, env: {}, log, now: t.t0 + 20 });
        expect(sentLines(file)).toHaveLength(2);
        await t.rows.run("UPDATE issues SET state = 'ignored'");
        await t.maintenance.raiseIssue({ fingerprint: "config:delivery:x", kind: "config", now: t.t0 + 30 });
        expect((await issue(t, "config:delivery:x")).state).toBe("ignored");
        await runAlerts({ store: t.maintenance, config, env: {}, log, now: t.t0 + 30 });
        expect(sentLines(file)).toHaveLength(2);
      } finally {
        await t.close();
      }
    });

    test("at most one alert per rate_limit_s per kind; the held-back one goes out later, not lost", async () => {
      const t = await open();
      try {
        const { config, file } = alertConfig();
        await t.maintenance.raiseIssue({
          fingerprint: "delivery:a:timeout",
          kind: "delivery",
          destination: "a",
          now: t.t0,
        });
        await t.maintenance.raiseIssue({
          fingerprint: "delivery:b:timeout",
          kind: "delivery",
          destination: "b",
          now: t.t0,
        });
        await t.maintenance.raiseIssue({ fingerprint: "config:file", kind: "config", now: t.t0 });
        // one delivery, one config
        expect((await runAlerts({ store: t.maintenance, config, env: {}, log, now: t.t0 })).length).toBe(2);
        expect(await runAlerts({ store: t.maintenance, config, env: {}, log, now: t.t0 + 1799 })).toHaveLength(0);
        expect(
          ((await t.rows.get("SELECT suppressed FROM alerts WHERE kind = 'delivery'")) as { suppressed: number })
            .suppressed,
        ).toBeGreaterThan(0);
        expect(await runAlerts({ store: t.maintenance, config, env: {}, log, now: t.t0 + 1800 })).toHaveLength(1);
        expect(sentLines(file)).toHaveLength(3);
      } finally {
        await t.close();
      }
    });

    test("alerted_at is set only when the command exits 0", async () => {
      const t = await open();
      try {
        const failing = alertConfig("", 1);
        await t.maintenance.raiseIssue({ fingerprint: "spool:min_free_bytes", kind: "spool", now: t.t0 });
        expect(await runAlerts({ store: t.maintenance, config: failing.config, env: {}, log, now: t.t0 })).toHaveLength(
          0,
        );
        expect((await issue(t, "spool:min_free_bytes")).alerted_at).toBeNull();
        expect(sentLines(failing.file)).toHaveLength(1); // it ran, and said no
        const working = alertConfig("", 0);
        expect(
          await runAlerts({ store: t.maintenance, config: working.config, env: {}, log, now: t.t0 + 1 }),
        ).toHaveLength(1);
        expect((await issue(t, "spool:min_free_bytes")).alerted_at).toBe(t.t0 + 1);
        const missing = parseConfig('[alerts]\nargv = ["/nonexistent/alert-sender"]\n', "t.toml").config;
        await t.maintenance.raiseIssue({ fingerprint: "config:file", kind: "config", now: t.t0 });
        expect(await runAlerts({ store: t.maintenance, config: missing, env: {}, log, now: t.t0 + 2 })).toHaveLength(0);
      } finally {
        await t.close();
      }
    });

    test("a hanging alert command is killed at alerts.timeout_s and does not count as sent", async () => {
      const t = await open();
      try {
        const { config } = parseConfig('[alerts]\nargv = ["/bin/sleep", "30"]\ntimeout_s = 0.3\n', "t.toml");
        await t.maintenance.raiseIssue({ fingerprint: "config:file", kind: "config", now: t.t0 });
        const started = performance.now();
        expect(
          await runAlerts({ store: t.maintenance, config, env: { PATH: process.env.PATH }, log, now: t.t0 }),
        ).toHaveLength(0);
        expect(performance.now() - started).toBeLessThan(3000);
        expect((await issue(t, "config:file")).alerted_at).toBeNull();
      } finally {
        await t.close();
      }
    });

    test("dry mode (alerts.dry or HOOKSPOOL_ALERT_DRY=1) records the alert without running anything", async () => {
      const t = await open();
      try {
        const { config, file } = alertConfig();
        await t.maintenance.raiseIssue({ fingerprint: "config:file", kind: "config", now: t.t0 });
        expect(
          await runAlerts({ store: t.maintenance, config, env: { HOOKSPOOL_ALERT_DRY: "1" }, log, now: t.t0 }),
        ).toHaveLength(1);
        expect(sentLines(file)).toHaveLength(0);
        expect((await issue(t, "config:file")).alerted_at).toBe(t.t0);
      } finally {
        await t.close();
      }
    });
  });

  describe("maintenance", () => {
    async function maintenance(t: World, config: Config, free: () => number | null = () => 10 ** 12) {
      return new Maintenance({
        store: t.maintenance,
        leader: await t.dispatch(),
        config: () => config,
        clock: t.clock,
        log,
        env: { HOOKSPOOL_ALERT_DRY: "1" },
        diskFree: free,
      });
    }

    test("a source silent for longer than expect_every_s opens source_silent; its next event resolves it", async () => {
      const t = await open();
      try {
        const { config } = alertConfig();
        const m = await maintenance(t, config);
        await m.tick();
        t.clock.advance(599);
        await m.tick();
        expect(await issue(t, "source_silent:s")).toBeNull();
        t.clock.advance(2);
        await m.tick();
        expect(await issue(t, "source_silent:s")).toMatchObject({ state: "open", count: 1 });
        t.clock.advance(60);
        await m.tick();
        expect((await issue(t, "source_silent:s")).count).toBe(1); // a persisting silence is one occurrence
        await t.enqueue(ev({ source: "s", copies: [copy("s", "hermes:a")] }), t.clock.now());
        await m.tick();
        expect((await issue(t, "source_silent:s")).state).toBe("resolved");
      } finally {
        await t.close();
      }
    });

    test(
      "a code source's own expectation counts when config sets none; " + "config's 0 turns it off; status agrees",
      async () => {
        const t = await open();
        try {
          const module = join(import.meta.dir, "..", "fixtures", "routed.ts"); // expectEverySec = 600
          const { config } = parseConfig(
            `[sources.plug]\nmodule = "${module}"\n[sources.off]\nmodule = "${module}"\nexpect_every_s = 0\n`,
            "t.toml",
          );
          const plugins = await loadSources(config, { configDir: "/", env: {}, file: "t.toml" });
          const m = new Maintenance({
            store: t.maintenance,
            leader: await t.dispatch(),
            config: () => config,
            clock: t.clock,
            log,
            env: {},
            diskFree: () => 10 ** 12,
            plugins: () => plugins,
          });
          const silent = async () =>
            (await storeStatus(t.status, config, t.spool?.path ?? "", { now: t.clock.now(), plugins, hard: [] })).doc
              .sources;
          // Never seen by maintenance: no clock has started, so status says nothing is silent.
          expect((await silent()).plug).toEqual({ last_event_age_s: null, expected_every_s: 600, silent: false });
          await m.tick();
          t.clock.advance(601);
          await m.tick();
          // The source never sent anything: maintenance opens the issue, and status says silent too.
          expect(await issue(t, "source_silent:plug")).toMatchObject({ state: "open" });
          expect((await silent()).plug).toMatchObject({ expected_every_s: 600, silent: true });
          expect(await issue(t, "source_silent:off")).toBeNull();
          expect((await silent()).off).toEqual({ last_event_age_s: null });
        } finally {
          await t.close();
        }
      },
    );

    test("a poll with no delivered tick for 3 x every_s is stale", async () => {
      const t = await open();
      try {
        const { config } = parseConfig(
          '[sources.tasks]\nkind = "poll"\nevery_s = 900\naction = "script:tasks"\n' +
            '[destinations."script:tasks"]\nargv = ["/bin/true"]\n',
          "t.toml",
        );
        await t.rows.run(`INSERT INTO polls (instance, next_at, created_at) VALUES ('tasks', ${t.t0 + 900}, ${t.t0})`);
        const m = await maintenance(t, config);
        t.clock.set(t.t0 + 2700);
        await m.tick();
        expect(await issue(t, "poll:tasks:stale")).toBeNull();
        t.clock.set(t.t0 + 2701);
        await m.tick();
        expect(await issue(t, "poll:tasks:stale")).toMatchObject({ state: "open" });
        await t.rows.run(`UPDATE polls SET delivered_at = ${t.t0 + 2750}`);
        t.clock.set(t.t0 + 2760);
        await m.tick();
        expect((await issue(t, "poll:tasks:stale")).state).toBe("resolved");
      } finally {
        await t.close();
      }
    });

    // PostgreSQL keeps its own disk: the chore reads no file there (maintenance.test.ts shows it does not).
    test.skipIf(backend === "postgres")(
      "free disk under limits.min_free_bytes opens spool:min_free_bytes; it resolves when the limit clears",
      async () => {
        const t = await open();
        try {
          const { config } = alertConfig();
          let free = 1000;
          const m = await maintenance(t, config, () => free);
          await m.tick();
          expect(await issue(t, "spool:min_free_bytes")).toMatchObject({ state: "open" });
          free = 10 ** 12;
          await m.tick();
          expect((await issue(t, "spool:min_free_bytes")).state).toBe("resolved");
        } finally {
          await t.close();
        }
      },
    );

    test("retention runs on the first tick and then once an hour", async () => {
      const t = await open();
      try {
        const { config } = alertConfig();
        const m = await maintenance(t, config);
        await m.tick();
        expect(await t.maintenance.metaNumber("last_retention_at")).toBe(t.t0);
        t.clock.advance(3599);
        await m.tick();
        expect(await t.maintenance.metaNumber("last_retention_at")).toBe(t.t0);
        t.clock.advance(1);
        await m.tick();
        expect(await t.maintenance.metaNumber("last_retention_at")).toBe(t.t0 + 3600);
      } finally {
        await t.close();
      }
    });
  });
});
