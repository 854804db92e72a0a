// Alerts and maintenance: alert once, again only after a reopen, one per
// rate_limit_s per kind, alerted_at only on exit 0, dry mode; source_silent, stale polls, the
// spool limit, and the hourly retention pass.
import { describe, expect, test } from "bun:test";
import { chmodSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseConfig } from "../../src/config/load.ts";
import type { Config } from "../../src/config/types.ts";
import { alertText, runAlerts } from "../../src/dispatch/alerts.ts";
import { Maintenance } from "../../src/dispatch/maintenance.ts";
import { loadSources } from "../../src/config/sources.ts";
import { storeStatus } from "../../src/obs/store-status.ts";
import { sqliteStatusStore } from "../../src/store/sqlite/store.ts";
import { createLogger } from "../../src/log.ts";
import { enqueue } from "../../src/store/sqlite/enqueue.ts";
import { raiseIssue, resolveIssue } from "../../src/store/sqlite/issues.ts";
import { getMetaNumber } from "../../src/store/sqlite/meta.ts";
import "../helpers/intake.ts"; // log lines are captured, not printed
import { copy, ev, freshSpool, T0 } from "../helpers/spool.ts";
import { tempDir } from "../helpers/tmp.ts";
import { sqliteAlertStore } from "../../src/store/sqlite/store.ts";
import { sqliteDispatchStore, sqliteMaintenanceStore } from "../../src/store/sqlite/store.ts";

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

function issue(t: ReturnType<typeof freshSpool>, fp: string) {
  return t.spool.db.query("SELECT * FROM issues WHERE fingerprint = ?").get(fp) as {
    id: number;
    state: string;
    alerted_at: number | null;
    count: number;
  };
}

describe("alerts", () => {
  test("each open issue alerts once, with the text as the command's last argument", async () => {
    const t = freshSpool();
    const { config, file } = alertConfig();
    raiseIssue(t.spool, {
      fingerprint: "delivery:hermes:a:unreachable",
      kind: "delivery",
      destination: "hermes:a",
      batchId: 7,
      error: "breaker open after connection refused",
      now: T0,
    });
    expect(await runAlerts({ store: sqliteAlertStore(t.spool), config, env: {}, log, now: T0 })).toHaveLength(1);
    expect(await runAlerts({ store: sqliteAlertStore(t.spool), config, env: {}, log, now: T0 + 3600 })).toHaveLength(0);
    const lines = sentLines(file);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain("hermes:a");
    expect(lines[0]).toContain("unreachable");
    expect(lines[0]).toContain("1 time(s)");
    expect(lines[0]).toContain("Next: hookspool status");
    expect(issue(t, "delivery:hermes:a:unreachable").alerted_at).toBe(T0);
  });

  test("a resolved issue that reopens alerts again; an ignored one never does", async () => {
    const t = freshSpool();
    const { config, file } = alertConfig("rate_limit_s = 0");
    raiseIssue(t.spool, { fingerprint: "config:delivery:x", kind: "config", now: T0 });
    await runAlerts({ store: sqliteAlertStore(t.spool), config, env: {}, log, now: T0 });
    resolveIssue(t.spool, "config:delivery:x", T0 + 10);
    raiseIssue(t.spool, { fingerprint: "config:delivery:x", kind: "config", now: T0 + 20 });
    expect(issue(t, "config:delivery:x")).toMatchObject({ state: "open", alerted_at: null, count: 2 });
    await runAlerts({ store: sqliteAlertStore(t.spool), config, env: {}, log, now: T0 + 20 });
    expect(sentLines(file)).toHaveLength(2);
    t.spool.db.run("UPDATE issues SET state = 'ignored'");
    raiseIssue(t.spool, { fingerprint: "config:delivery:x", kind: "config", now: T0 + 30 });
    expect(issue(t, "config:delivery:x").state).toBe("ignored");
    await runAlerts({ store: sqliteAlertStore(t.spool), config, env: {}, log, now: T0 + 30 });
    expect(sentLines(file)).toHaveLength(2);
  });

  test("at most one alert per rate_limit_s per kind; the held-back one goes out later, not lost", async () => {
    const t = freshSpool();
    const { config, file } = alertConfig();
    raiseIssue(t.spool, { fingerprint: "delivery:a:timeout", kind: "delivery", destination: "a", now: T0 });
    raiseIssue(t.spool, { fingerprint: "delivery:b:timeout", kind: "delivery", destination: "b", now: T0 });
    raiseIssue(t.spool, { fingerprint: "config:file", kind: "config", now: T0 });
    // one delivery, one config
    expect((await runAlerts({ store: sqliteAlertStore(t.spool), config, env: {}, log, now: T0 })).length).toBe(2);
    expect(await runAlerts({ store: sqliteAlertStore(t.spool), config, env: {}, log, now: T0 + 1799 })).toHaveLength(0);
    expect(
      (t.spool.db.query("SELECT suppressed FROM alerts WHERE kind = 'delivery'").get() as { suppressed: number })
        .suppressed,
    ).toBeGreaterThan(0);
    expect(await runAlerts({ store: sqliteAlertStore(t.spool), config, env: {}, log, now: T0 + 1800 })).toHaveLength(1);
    expect(sentLines(file)).toHaveLength(3);
  });

  test("alerted_at is set only when the command exits 0", async () => {
    const t = freshSpool();
    const failing = alertConfig("", 1);
    raiseIssue(t.spool, { fingerprint: "spool:min_free_bytes", kind: "spool", now: T0 });
    expect(
      await runAlerts({ store: sqliteAlertStore(t.spool), config: failing.config, env: {}, log, now: T0 }),
    ).toHaveLength(0);
    expect(issue(t, "spool:min_free_bytes").alerted_at).toBeNull();
    expect(sentLines(failing.file)).toHaveLength(1); // it ran, and said no
    const working = alertConfig("", 0);
    expect(
      await runAlerts({ store: sqliteAlertStore(t.spool), config: working.config, env: {}, log, now: T0 + 1 }),
    ).toHaveLength(1);
    expect(issue(t, "spool:min_free_bytes").alerted_at).toBe(T0 + 1);
    const missing = parseConfig('[alerts]\nargv = ["/nonexistent/alert-sender"]\n', "t.toml").config;
    raiseIssue(t.spool, { fingerprint: "config:file", kind: "config", now: T0 });
    expect(
      await runAlerts({ store: sqliteAlertStore(t.spool), config: missing, env: {}, log, now: T0 + 2 }),
    ).toHaveLength(0);
  });

  test("a hanging alert command is killed at alerts.timeout_s and does not count as sent", async () => {
    const t = freshSpool();
    const { config } = parseConfig('[alerts]\nargv = ["/bin/sleep", "30"]\ntimeout_s = 0.3\n', "t.toml");
    raiseIssue(t.spool, { fingerprint: "config:file", kind: "config", now: T0 });
    const started = performance.now();
    expect(
      await runAlerts({ store: sqliteAlertStore(t.spool), config, env: { PATH: process.env.PATH }, log, now: T0 }),
    ).toHaveLength(0);
    expect(performance.now() - started).toBeLessThan(3000);
    expect(issue(t, "config:file").alerted_at).toBeNull();
  });

  test("dry mode (alerts.dry or HOOKSPOOL_ALERT_DRY=1) records the alert without running anything", async () => {
    const t = freshSpool();
    const { config, file } = alertConfig();
    raiseIssue(t.spool, { fingerprint: "config:file", kind: "config", now: T0 });
    expect(
      await runAlerts({ store: sqliteAlertStore(t.spool), config, env: { HOOKSPOOL_ALERT_DRY: "1" }, log, now: T0 }),
    ).toHaveLength(1);
    expect(sentLines(file)).toHaveLength(0);
    expect(issue(t, "config:file").alerted_at).toBe(T0);
  });

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
});

describe("maintenance", () => {
  function maintenance(t: ReturnType<typeof freshSpool>, config: Config, free: () => number | null = () => 10 ** 12) {
    return new Maintenance({
      store: sqliteMaintenanceStore(t.spool),
      leader: sqliteDispatchStore(t.spool),
      config: () => config,
      clock: t.clock,
      log,
      env: { HOOKSPOOL_ALERT_DRY: "1" },
      diskFree: free,
    });
  }

  test("a source silent for longer than expect_every_s opens source_silent; its next event resolves it", async () => {
    const t = freshSpool();
    const { config } = alertConfig();
    const m = maintenance(t, config);
    await m.tick();
    t.clock.advance(599);
    await m.tick();
    expect(issue(t, "source_silent:s")).toBeNull();
    t.clock.advance(2);
    await m.tick();
    expect(issue(t, "source_silent:s")).toMatchObject({ state: "open", count: 1 });
    t.clock.advance(60);
    await m.tick();
    expect(issue(t, "source_silent:s").count).toBe(1); // a persisting silence is one occurrence
    enqueue(t.spool, ev({ source: "s", copies: [copy("s", "hermes:a")] }), t.clock.now());
    await m.tick();
    expect(issue(t, "source_silent:s").state).toBe("resolved");
  });

  test("a code source's own expectation counts when config sets none; config's 0 turns it off; status agrees", async () => {
    const t = freshSpool();
    const module = join(import.meta.dir, "..", "fixtures", "routed.ts"); // expectEverySec = 600
    const { config } = parseConfig(
      `[sources.plug]\nmodule = "${module}"\n[sources.off]\nmodule = "${module}"\nexpect_every_s = 0\n`,
      "t.toml",
    );
    const plugins = await loadSources(config, { configDir: "/", env: {}, file: "t.toml" });
    const m = new Maintenance({
      store: sqliteMaintenanceStore(t.spool),
      leader: sqliteDispatchStore(t.spool),
      config: () => config,
      clock: t.clock,
      log,
      env: {},
      diskFree: () => 10 ** 12,
      plugins: () => plugins,
    });
    const silent = async () =>
      (await storeStatus(sqliteStatusStore(t.spool), config, t.path, { now: t.clock.now(), plugins, hard: [] })).doc
        .sources;
    // Never seen by maintenance: no clock has started, so status says nothing is silent.
    expect((await silent()).plug).toEqual({ last_event_age_s: null, expected_every_s: 600, silent: false });
    await m.tick();
    t.clock.advance(601);
    await m.tick();
    // The source never sent anything: maintenance opens the issue, and status says silent too.
    expect(issue(t, "source_silent:plug")).toMatchObject({ state: "open" });
    expect((await silent()).plug).toMatchObject({ expected_every_s: 600, silent: true });
    expect(issue(t, "source_silent:off")).toBeNull();
    expect((await silent()).off).toEqual({ last_event_age_s: null });
  });

  test("a poll with no delivered tick for 3 x every_s is stale", async () => {
    const t = freshSpool();
    const { config } = parseConfig(
      '[sources.tasks]\nkind = "poll"\nevery_s = 900\naction = "script:tasks"\n[destinations."script:tasks"]\nargv = ["/bin/true"]\n',
      "t.toml",
    );
    t.spool.db.run(`INSERT INTO polls (instance, next_at, created_at) VALUES ('tasks', ${T0 + 900}, ${T0})`);
    const m = maintenance(t, config);
    t.clock.set(T0 + 2700);
    await m.tick();
    expect(issue(t, "poll:tasks:stale")).toBeNull();
    t.clock.set(T0 + 2701);
    await m.tick();
    expect(issue(t, "poll:tasks:stale")).toMatchObject({ state: "open" });
    t.spool.db.run(`UPDATE polls SET delivered_at = ${T0 + 2750}`);
    t.clock.set(T0 + 2760);
    await m.tick();
    expect(issue(t, "poll:tasks:stale").state).toBe("resolved");
  });

  test("free disk under limits.min_free_bytes opens spool:min_free_bytes; it resolves when the limit clears", async () => {
    const t = freshSpool();
    const { config } = alertConfig();
    let free = 1000;
    const m = maintenance(t, config, () => free);
    await m.tick();
    expect(issue(t, "spool:min_free_bytes")).toMatchObject({ state: "open" });
    free = 10 ** 12;
    await m.tick();
    expect(issue(t, "spool:min_free_bytes").state).toBe("resolved");
  });

  test("retention runs on the first tick and then once an hour", async () => {
    const t = freshSpool();
    const { config } = alertConfig();
    const m = maintenance(t, config);
    await m.tick();
    expect(getMetaNumber(t.spool, "last_retention_at")).toBe(T0);
    t.clock.advance(3599);
    await m.tick();
    expect(getMetaNumber(t.spool, "last_retention_at")).toBe(T0);
    t.clock.advance(1);
    await m.tick();
    expect(getMetaNumber(t.spool, "last_retention_at")).toBe(T0 + 3600);
  });
});
