// The long-running services: intake, dispatch, and run (both in one process).
import type { CommandDef } from "citty";
import { HookspoolError } from "../errors.ts";
import { type Cli, GLOBAL_ARGS } from "./context.ts";

function notBuilt(what: string): CommandDef {
  return {
    meta: { name: what, description: `the ${what} service` },
    args: { ...GLOBAL_ARGS },
    run() {
      throw new HookspoolError("E_NOTHING", `the ${what} service is not in this build yet`, {
        hint: "init, migrate, enqueue, list, show and status work now",
      });
    },
  };
}

export function serviceCommands(_cli: Cli): Record<string, CommandDef> {
  return { intake: notBuilt("intake"), dispatch: notBuilt("dispatch"), run: notBuilt("run") };
}
