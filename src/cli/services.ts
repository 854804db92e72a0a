// The long-running services: intake, dispatch, and run (both in one process, one connection),
// each opening its store through openStores, the same code on either backend.
import { join } from "node:path";
import { Dashboard } from "../dashboard/server.ts";
import type { DashboardStore } from "../store/api.ts";
import { openStores, type Stores } from "../store/open.ts";
import type { CommandDef } from "citty";
import { systemRng } from "../clock.ts";
import type { LoadedConfig } from "../config/types.ts";
import { makeDestination } from "../destinations/registry.ts";
import { Dispatcher } from "../dispatch/loop.ts";
import { Maintenance } from "../dispatch/maintenance.ts";
import { HookspoolError } from "../errors.ts";
import { Intake } from "../intake/server.ts";
import { bodiesDir } from "../bodies.ts";
import { createLogger, type Logger } from "../log.ts";
import type { DispatchStore } from "../store/api.ts";
import { hostname } from "node:os";
import { type Service, startAll, stopAll } from "../service.ts";
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
  if (errors > 0)
    throw new HookspoolError(
      "E_CONFIG",
      `not starting: ${errors} error${errors === 1 ? "" : "s"} in the config (hookspool check lists the same)`,
      { file: report.file ?? undefined, problems: report.problems },
    );
  const loaded = loadFor(cli);
  // check printed the load warnings already; not again when the service stops.
  cli.warnings.length = 0;
  return loaded;
}

function makeDispatcher(
  cli: Cli,
  loaded: LoadedConfig,
  store: DispatchStore,
  bodyUrlBase?: () => string | null,
): Dispatcher {
  const log = createLogger("dispatch", { clock: cli.clock });
  const inst = store.instanceId;
  return new Dispatcher({
    store,
    loaded,
    loadOptions: loadOptions(cli),
    clock: cli.clock,
    rng: systemRng,
    log,
    env: cli.io.env,
    destinations: (config, name) =>
      makeDestination(config, name, { env: cli.io.env, clock: cli.clock, instanceId: inst }),
    bodyUrlBase,
  });
}

/**
 * The dispatcher's companion: liveness, alerts, the spool limit and hourly retention, run while
 * this dispatcher leads (SQLite: always; PostgreSQL: while it holds the maintenance lock).
 */
function makeMaintenance(cli: Cli, stores: Stores, store: DispatchStore, dispatcher: Dispatcher): Maintenance {
  return new Maintenance({
    store: stores.maintenance(),
    leader: store,
    config: () => dispatcher.currentConfig(),
    clock: cli.clock,
    log: createLogger("maintenance", { clock: cli.clock }),
    env: cli.io.env,
    plugins: () => dispatcher.sourcePlugins(),
    bodies: bodiesDir(dispatcher.home),
  });
}

/**
 * Start the services in order, wait for SIGTERM or SIGINT, then stop them in reverse order (the
 * intake stops taking requests before the dispatcher lets its in-flight attempts finish).
 * `close` runs last, whatever happened.
 */
async function serve(
  log: Logger,
  services: Service[],
  close: () => void | Promise<void> = () => {},
  started: () => void = () => {},
): Promise<number> {
  try {
    await startAll(services);
    started();
    log.info("stopping; letting in-flight work finish", { reason: await stopSignal() });
    await stopAll(services);
  } finally {
    await close();
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
      return serve(log, [
        new Intake({ loaded, loadOptions: loadOptions(cli), clock: cli.clock, log, env: cli.io.env }),
      ]);
    },
  };
}

function dispatchCommand(cli: Cli): CommandDef {
  return {
    meta: {
      name: "dispatch",
      description: "deliver batches: seal, lease, retry, breaker (one per home: dispatch.lock)",
    },
    args: { ...GLOBAL_ARGS },
    async run() {
      const loaded = await preflight(cli, true);
      const stores = await openStores(loaded.config, {
        mode: "dispatch",
        paths: loaded.paths,
        env: cli.io.env,
        clock: cli.clock,
      });
      return serveStores(cli, loaded, stores, false);
    },
  };
}

function runCommand(cli: Cli): CommandDef {
  return {
    meta: { name: "run", description: "intake and dispatcher in one process (small hosts, development, tests)" },
    args: { ...GLOBAL_ARGS },
    async run() {
      return runHome(cli);
    },
  };
}

/**
 * `run` on the home `cli` names: intake and dispatcher on one connection (a pool on
 * PostgreSQL), with `extra` services beside them (what `hookspool pull` prints).
 */
export async function runHome(cli: Cli, extra: (stores: Stores) => Service[] = () => []): Promise<number> {
  const loaded = await preflight(cli, true);
  // The intake's busy timeout (10 s, then 503) is the one a sender waits on, so it is the
  // connection's; a dispatcher write that times out sooner is retried on the next tick.
  const stores = await openStores(loaded.config, {
    mode: "dispatch",
    paths: loaded.paths,
    env: cli.io.env,
    clock: cli.clock,
    busyTimeoutS: loaded.config.intake.busy_timeout_s,
  });
  return serveStores(cli, loaded, stores, true, extra(stores));
}

/**
 * dispatch (and run, with an intake beside it) over the stores opened for it: the dispatcher,
 * its maintenance, under run the intake (which tells the dispatcher when each batch it queued
 * may be ready, so none waits for a tick), and with [dashboard] listen set the dashboard, all on
 * the one connection or pool; the stores close last, whatever happened.
 */
async function serveStores(
  cli: Cli,
  loaded: LoadedConfig,
  stores: Stores,
  withIntake: boolean,
  extra: Service[] = [],
): Promise<number> {
  try {
    const store = await stores.dispatch(`${hostname()}:${process.pid}`);
    let intake: Intake | null = null;
    // Under run, body_url names the port the intake bound (intake.listen may say 0).
    const base = () => {
      const at = intake?.address;
      return at && !at.startsWith("unix:") ? `http://${at}` : null;
    };
    const dispatcher = makeDispatcher(cli, loaded, store, withIntake ? base : undefined);
    const log = createLogger(withIntake ? "intake" : "dispatch", { clock: cli.clock });
    intake = withIntake
      ? new Intake({
          loaded,
          loadOptions: loadOptions(cli),
          clock: cli.clock,
          log,
          env: cli.io.env,
          stores,
          wake: (at) => dispatcher.wake(at),
        })
      : null;
    const listen = loaded.config.dashboard.listen;
    const dash = listen
      ? [
          makeDashboard(
            cli,
            loaded,
            stores.dashboard(),
            listen,
            () => dispatcher.currentConfig(),
            intake ? () => intake.address : undefined,
          ),
        ]
      : [];
    const services: Service[] = [
      dispatcher,
      makeMaintenance(cli, stores, store, dispatcher),
      ...(intake ? [intake] : []),
      ...dash,
      ...extra,
    ];
    return await serve(log, services, undefined, () => dash.forEach((d) => announce(cli, d, loaded.paths.home)));
  } finally {
    await stores.close();
  }
}

/** The dashboard's default address when `hookspool dashboard` runs on its own. */
export const DASHBOARD_LISTEN = "127.0.0.1:8651";

function makeDashboard(
  cli: Cli,
  loaded: LoadedConfig,
  store: DashboardStore,
  listen: string,
  config: () => LoadedConfig["config"] = () => loaded.config,
  intakeAddress?: () => string | null,
): Dashboard {
  const log = createLogger("dashboard", { clock: cli.clock });
  return new Dashboard({
    listen,
    store,
    config,
    home: loaded.paths.home,
    dbPath: loaded.paths.spoolFile,
    now: () => cli.clock.now(),
    log,
    intakeAddress,
  });
}

/** Say where the dashboard is: with its token the first time (the URL is printed once). */
function announce(cli: Cli, d: Dashboard, home: string): void {
  if (d.firstUrl)
    cli.io.out(`dashboard: ${d.firstUrl}  (printed once; the token is in ${join(home, "dashboard.token")})`);
  else
    cli.io.out(
      `dashboard: http://127.0.0.1:${d.port}/ (open it with ?token=<the token in ${join(home, "dashboard.token")}>)`,
    );
}

function dashboardCommand(cli: Cli): CommandDef {
  return {
    meta: {
      name: "dashboard",
      description:
        "the dashboard on its own loopback listener (default 127.0.0.1:8651), " +
        "behind the token in <home>/dashboard.token",
    },
    args: {
      ...GLOBAL_ARGS,
      listen: {
        type: "string",
        description: "host:port to bind (default: dashboard.listen, else 127.0.0.1:8651)",
        valueHint: "ADDR",
      },
    },
    async run({ args }) {
      const loaded = loadFor(cli);
      const stores = await openStores(loaded.config, {
        mode: "operator",
        paths: loaded.paths,
        env: cli.io.env,
        clock: cli.clock,
      });
      const d = makeDashboard(
        cli,
        loaded,
        stores.dashboard(),
        (args.listen as string | undefined) || loaded.config.dashboard.listen || DASHBOARD_LISTEN,
      );
      const log = createLogger("dashboard", { clock: cli.clock });
      try {
        await d.start();
        announce(cli, d, loaded.paths.home);
        log.info("stopping", { reason: await stopSignal() });
        await d.stop();
      } finally {
        await stores.close();
      }
      return 0;
    },
  };
}

export function serviceCommands(cli: Cli): Record<string, CommandDef> {
  return {
    intake: intakeCommand(cli),
    dispatch: dispatchCommand(cli),
    run: runCommand(cli),
    dashboard: dashboardCommand(cli),
  };
}
