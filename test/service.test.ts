// One service shape: startAll/stopAll order and roll back, Periodic never overlaps itself and
// stops cleanly, and every long-lived part of hookspool keeps the Service contract.
import { describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseConfig } from "../src/config/load.ts";
import { ConfigWatcher } from "../src/config/watch.ts";
import { Maintenance } from "../src/dispatch/maintenance.ts";
import { createLogger } from "../src/log.ts";
import { Periodic, type Service, startAll, stopAll } from "../src/service.ts";
import { fakeDestination, rig } from "./helpers/dispatch.ts";
import { startIntake } from "./helpers/intake.ts";
import { waitFor } from "./helpers/proc.ts";
import { freshSpool } from "./helpers/spool.ts";
import { sqliteIssues } from "../src/store/sqlite/store.ts";
import { runServiceContract } from "./service.case.ts";
import { sqliteDispatchStore, sqliteMaintenanceStore } from "../src/store/sqlite/store.ts";

function recorder(name: string, log: string[], fail?: "start" | "stop"): Service {
  return {
    name,
    async start() {
      if (fail === "start") throw new Error(`${name} cannot start`);
      log.push(`start ${name}`);
    },
    async stop() {
      log.push(`stop ${name}`);
      if (fail === "stop") throw new Error(`${name} cannot stop`);
    },
  };
}

describe("startAll and stopAll", () => {
  test("start in order, stop in reverse", async () => {
    const log: string[] = [];
    const all = [recorder("a", log), recorder("b", log)];
    await startAll(all);
    await stopAll(all);
    expect(log).toEqual(["start a", "start b", "stop b", "stop a"]);
  });

  test("a failed start stops what already started and never starts the rest", async () => {
    const log: string[] = [];
    await expect(startAll([recorder("a", log), recorder("b", log, "start"), recorder("c", log)])).rejects.toThrow(
      "b cannot start",
    );
    expect(log).toEqual(["start a", "stop a"]);
  });

  test("a failing stop does not keep the others running; the first failure goes on", async () => {
    const log: string[] = [];
    await expect(stopAll([recorder("a", log), recorder("b", log, "stop"), recorder("c", log)])).rejects.toThrow(
      "b cannot stop",
    );
    expect(log).toEqual(["stop c", "stop b", "stop a"]);
  });
});

describe("Periodic", () => {
  test("runs again and again, never two runs at once, and survives a run that throws", async () => {
    let runs = 0;
    let active = 0;
    let most = 0;
    const errors: unknown[] = [];
    const p = new Periodic("t", {
      everyMs: () => 1,
      firstMs: 0,
      run: async () => {
        runs++;
        active++;
        most = Math.max(most, active);
        await Bun.sleep(2);
        active--;
        if (runs % 2 === 0) throw new Error("every other run fails");
      },
      onError: (e) => errors.push(e),
    });
    await p.start();
    await waitFor("five runs", () => runs >= 5);
    await p.stop();
    expect(most).toBe(1);
    expect(errors.length).toBeGreaterThanOrEqual(2);
  });

  test("stop() waits for the run in progress, and nothing runs after it", async () => {
    let release = () => {};
    let runs = 0;
    const p = new Periodic("t", {
      everyMs: () => 1,
      firstMs: 0,
      run: () => {
        runs++;
        return new Promise<void>((r) => {
          release = r;
        });
      },
      onError: () => {},
    });
    await p.start();
    await waitFor("the first run", () => runs === 1);
    let stopped = false;
    const stopping = p.stop().then(() => {
      stopped = true;
    });
    await Promise.resolve();
    expect(stopped).toBe(false);
    release();
    await stopping;
    expect(stopped).toBe(true);
    // A witness on the same timers: once it has run a few times, the stopped one would have too.
    let ticks = 0;
    const witness = new Periodic("w", {
      everyMs: () => 1,
      firstMs: 0,
      run: async () => void ticks++,
      onError: () => {},
    });
    await witness.start();
    await waitFor("the witness to tick", () => ticks >= 5);
    await witness.stop();
    expect(runs).toBe(1);
  });
});

describe("every long-lived part is a Service", () => {
  runServiceContract("intake", async () => {
    const t = await startIntake("");
    await t.intake.stop();
    const listening = async () => {
      try {
        return typeof t.intake.url === "string";
      } catch {
        return false;
      }
    };
    return { service: t.intake, running: listening, cleanup: () => t.db.close() };
  });

  runServiceContract("dispatcher", () => {
    const a = fakeDestination("hermes:a");
    const r = rig(`[sources.s]\naction = "hermes:a"\n`, [a]);
    r.put("k", "hermes:a");
    return { service: r.d, running: () => r.d.active, cleanup: () => r.spool.close() };
  });

  test("a started dispatcher ticks at once: a batch put before the start is delivered", async () => {
    const a = fakeDestination("hermes:a");
    const r = rig(`[sources.s]\naction = "hermes:a"\n`, [a]);
    r.put("k", "hermes:a");
    await r.d.start();
    await waitFor("the first tick's delivery", () => a.calls.length > 0);
    await r.d.stop();
    expect(a.calls).toHaveLength(1);
    r.spool.close();
  });

  const maintenanceOf = () => {
    const t = freshSpool();
    const { config } = parseConfig(`[sources.s]\naction = "hermes:a"\n`, "t.toml");
    const m = new Maintenance({
      store: sqliteMaintenanceStore(t.spool),
      leader: sqliteDispatchStore(t.spool),
      config: () => config,
      clock: t.clock,
      log: createLogger("maintenance", { clock: t.clock }),
      env: {},
      diskFree: () => 1e12,
    });
    return { t, m };
  };

  runServiceContract("maintenance", () => {
    const { t, m } = maintenanceOf();
    return { service: m, running: () => m.active, cleanup: () => t.spool.close() };
  });

  const CHORES = ["liveness", "polls", "probes", "spool limits", "alerts", "retention"];
  test("maintenance is these chores, in this order", () => {
    const { t, m } = maintenanceOf();
    expect(m.chores.map((c) => c.name)).toEqual(CHORES);
    t.spool.close();
  });
  for (const name of CHORES) {
    runServiceContract(`maintenance chore ${name}`, () => {
      const { t, m } = maintenanceOf();
      const chore = m.chores.find((c) => c.name === name);
      if (!chore) throw new Error(`no chore ${name}`);
      return { service: chore, running: () => chore.active, cleanup: () => t.spool.close() };
    });
  }

  runServiceContract("config watcher", () => {
    const t = freshSpool();
    const file = join(t.dir, "config.toml");
    writeFileSync(file, "");
    const w = new ConfigWatcher({
      file,
      mtimeMs: 0,
      loadOptions: { config: file, env: {}, cwd: t.dir },
      issues: sqliteIssues(t.spool),
      log: createLogger("config"),
      now: () => t.clock.now(),
      apply: () => {},
      onError: () => {},
    });
    return { service: w, running: () => w.active, cleanup: () => t.spool.close() };
  });

  test("a started config watcher reloads on its own timer", async () => {
    const t = freshSpool();
    const file = join(t.dir, "config.toml");
    writeFileSync(file, "");
    let applied = 0;
    // mtime 0 differs from the file's, so the first poll applies it.
    const w = new ConfigWatcher({
      file,
      mtimeMs: 0,
      loadOptions: { config: file, env: {}, cwd: t.dir },
      issues: sqliteIssues(t.spool),
      log: createLogger("config"),
      now: () => t.clock.now(),
      everyS: 0.001,
      apply: () => void applied++,
      onError: () => {},
    });
    await w.start();
    await waitFor("the watcher's reload", () => applied === 1);
    await w.stop();
    t.spool.close();
  });
});
