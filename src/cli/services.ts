// The long-running services: intake, dispatch, and run (both in one process).
import type { CommandDef } from "citty";
import { HookspoolError } from "../errors.ts";
import { Intake } from "../intake/server.ts";
import { createLogger } from "../obs/log.ts";
import { type Cli, GLOBAL_ARGS, loadFor } from "./context.ts";

/** Resolve when the process is asked to stop (SIGTERM, SIGINT). */
function stopSignal(): Promise<string> {
  return new Promise((resolve) => {
    const on = (sig: string) => () => resolve(sig);
    process.once("SIGTERM", on("SIGTERM"));
    process.once("SIGINT", on("SIGINT"));
  });
}

function intakeCommand(cli: Cli): CommandDef {
  return {
    meta: { name: "intake", description: "take webhooks on intake.listen (loopback) and spool them; never migrates" },
    args: { ...GLOBAL_ARGS },
    async run() {
      const loaded = loadFor(cli);
      const log = createLogger("intake", { clock: cli.clock });
      const intake = new Intake({ loaded, loadOptions: { home: cli.globals.home, config: cli.globals.config, env: cli.io.env, cwd: cli.io.cwd }, clock: cli.clock, log, env: cli.io.env });
      await intake.start();
      const sig = await stopSignal();
      log.info("stopping", { reason: sig });
      await intake.stop();
      return 0;
    },
  };
}

function notBuilt(what: string): CommandDef {
  return {
    meta: { name: what, description: `the ${what} service` },
    args: { ...GLOBAL_ARGS },
    run() {
      throw new HookspoolError("E_NOTHING", `the ${what} service is not in this build yet`, {
        hint: "intake, init, migrate, enqueue, list, show and status work now",
      });
    },
  };
}

export function serviceCommands(cli: Cli): Record<string, CommandDef> {
  return { intake: intakeCommand(cli), dispatch: notBuilt("dispatch"), run: notBuilt("run") };
}
