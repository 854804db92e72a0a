// The long-running services: intake, dispatch, and run (both in one process, one connection).
import type { CommandDef } from "citty";
import { systemRng } from "../clock.ts";
import type { LoadedConfig } from "../config/types.ts";
import { makeDestination } from "../destinations/registry.ts";
import { Dispatcher } from "../dispatch/loop.ts";
import { Maintenance } from "../dispatch/maintenance.ts";
import { HookspoolError } from "../errors.ts";
import { Intake } from "../intake/server.ts";
import { createLogger, type Logger } from "../log.ts";
import { openSpool, quickCheck, type Spool } from "../store/db.ts";
import { acquireLock, type FileLock } from "../store/lock.ts";
import { effectiveNow, instanceId } from "../store/meta.ts";
import { migrate } from "../store/migrate.ts";
import { checkConfigFile } from "../check/check.ts";
import { problemLine } from "./check.ts";
import { type Cli, GLOBAL_ARGS, loadFor } from "./context.ts";
import { visible } from "./format.ts";

/** Resolve when the process is asked to stop (SIGTERM, SIGINT). */
function stopSignal(): Promise<string> {
  return new Promise((resolve) => {
    const on = (sig: string) => () => resolve(sig);
    process.once("SIGTERM", on("SIGTERM"));
    process.once("SIGINT", on("SIGINT"));
  });
}

function loadOptions(cli: Cli) {
  return { home: cli.globals.home, config: cli.globals.config, env: cli.io.env, cwd: cli.io.cwd };
}

/**
 * What `hookspool check` says about this config, before anything starts: its warnings on
 * stderr, and its errors too, which stop the start (exit 2). Under systemd check is also the
 * ExecStartPre, but `make run` or a shell has none, and a service must not start silently on a
 * config check refuses. The dispatcher checks the database itself (quick_check, exit 2).
 */
async function preflight(cli: Cli, skipDatabase: boolean): Promise<LoadedConfig> {
  const report = await checkConfigFile({ ...loadOptions(cli), skipDatabase });
  for (const p of report.problems) cli.io.err(`hookspool: ${visible(problemLine(p))}`);
  const errors = report.problems.filter((p) => p.level === "error").length;
  if (errors > 0) throw new HookspoolError("E_CONFIG", `not starting: ${errors} error${errors === 1 ? "" : "s"} in the config (hookspool check lists the same)`, { file: report.file ?? undefined });
  const loaded = loadFor(cli);
  // check printed the load warnings already; not again when the service stops.
  cli.warnings.length = 0;
  return loaded;
}

/**
 * What the dispatcher does before its first tick (spec 2, 6.2, 12, 17): take dispatch.lock
 * (held: exit 3), refuse a corrupt database (exit 2, never "move aside"), apply migrations.
 */
function openForDispatch(cli: Cli, loaded: LoadedConfig, busyTimeoutS = 30): { spool: Spool; lock: FileLock } {
  const lock = acquireLock(loaded.paths.lock, "another dispatcher (or hookspool migrate)");
  const corrupt = (what: string) =>
    new HookspoolError("E_CORRUPT", `${loaded.paths.db} is corrupt: ${what}`, {
      hint: "hookspool export what is readable and restore from backup; nothing is moved aside automatically",
    });
  try {
    let spool: Spool;
    try {
      spool = openSpool(loaded.paths.db, { create: true, busyTimeoutS, clock: cli.clock });
    } catch (e) {
      const code = (e as { code?: string }).code ?? "";
      if (code.startsWith("SQLITE_CORRUPT") || code === "SQLITE_NOTADB") throw corrupt(code);
      throw e;
    }
    try {
      let problems: string[];
      try {
        problems = quickCheck(spool);
      } catch (e) {
        const code = (e as { code?: string }).code ?? "";
        if (code.startsWith("SQLITE_CORRUPT") || code === "SQLITE_NOTADB") throw corrupt(code);
        throw e;
      }
      if (problems.length) throw corrupt(`quick_check: ${problems[0].slice(0, 200)}`);
      migrate(spool);
      return { spool, lock };
    } catch (e) {
      spool.close();
      throw e;
    }
  } catch (e) {
    lock.release();
    throw e;
  }
}

function makeDispatcher(cli: Cli, loaded: LoadedConfig, spool: Spool): Dispatcher {
  const log = createLogger("dispatch", { clock: cli.clock });
  const inst = instanceId(spool);
  return new Dispatcher({
    spool,
    loaded,
    loadOptions: loadOptions(cli),
    clock: cli.clock,
    rng: systemRng,
    log,
    env: cli.io.env,
    destinations: (config, name) => makeDestination(config, name, { env: cli.io.env, clock: cli.clock, instanceId: inst }),
  });
}

/** The dispatcher's companion: liveness, alerts, the spool limit and hourly retention. */
function makeMaintenance(cli: Cli, loaded: LoadedConfig, spool: Spool, dispatcher: Dispatcher): Maintenance {
  return new Maintenance({
    spool,
    dbPath: loaded.paths.db,
    config: () => dispatcher.currentConfig(),
    now: () => effectiveNow(spool),
    clock: cli.clock,
    log: createLogger("maintenance", { clock: cli.clock }),
    env: cli.io.env,
    plugins: () => dispatcher.sourcePlugins(),
  });
}

/** A long-running part (STYLE.md rule 8): start() and stop(), stop safe before start. */
interface Part {
  start(): void | Promise<void>;
  stop(): Promise<void>;
}

/**
 * Start the parts in order, wait for SIGTERM or SIGINT, then stop them in reverse order (the
 * intake stops taking requests before the dispatcher lets its in-flight attempts finish).
 * `close` runs last, whatever happened.
 */
async function serve(log: Logger, parts: Part[], close: () => void = () => {}): Promise<number> {
  try {
    for (const p of parts) await p.start();
    log.info("stopping; letting in-flight work finish", { reason: await stopSignal() });
  } finally {
    for (const p of [...parts].reverse()) await p.stop();
    close();
  }
  return 0;
}

function intakeCommand(cli: Cli): CommandDef {
  return {
    meta: { name: "intake", description: "take webhooks on intake.listen (loopback) and spool them; never migrates" },
    args: { ...GLOBAL_ARGS },
    async run() {
      const loaded = await preflight(cli, false);
      const log = createLogger("intake", { clock: cli.clock });
      return serve(log, [new Intake({ loaded, loadOptions: loadOptions(cli), clock: cli.clock, log, env: cli.io.env })]);
    },
  };
}

function dispatchCommand(cli: Cli): CommandDef {
  return {
    meta: { name: "dispatch", description: "deliver batches: seal, lease, retry, breaker (one per home: dispatch.lock)" },
    args: { ...GLOBAL_ARGS },
    async run() {
      const loaded = await preflight(cli, true);
      const { spool, lock } = openForDispatch(cli, loaded);
      const dispatcher = makeDispatcher(cli, loaded, spool);
      return serve(createLogger("dispatch", { clock: cli.clock }), [dispatcher, makeMaintenance(cli, loaded, spool, dispatcher)], () => {
        spool.close();
        lock.release();
      });
    },
  };
}

function runCommand(cli: Cli): CommandDef {
  return {
    meta: { name: "run", description: "intake and dispatcher in one process (small hosts, development, tests)" },
    args: { ...GLOBAL_ARGS },
    async run() {
      const loaded = await preflight(cli, true);
      // One connection for both parts: the intake's busy timeout (10 s, then 503) is the one a
      // sender waits on, so it is the connection's; a dispatcher write that times out sooner is
      // retried on the next tick.
      const { spool, lock } = openForDispatch(cli, loaded, loaded.config.intake.busy_timeout_s);
      const dispatcher = makeDispatcher(cli, loaded, spool);
      const log = createLogger("intake", { clock: cli.clock });
      const intake = new Intake({ loaded, loadOptions: loadOptions(cli), clock: cli.clock, log, env: cli.io.env, spool });
      return serve(log, [dispatcher, makeMaintenance(cli, loaded, spool, dispatcher), intake], () => {
        spool.close();
        lock.release();
      });
    },
  };
}

export function serviceCommands(cli: Cli): Record<string, CommandDef> {
  return { intake: intakeCommand(cli), dispatch: dispatchCommand(cli), run: runCommand(cli) };
}
