// hookspool issues [list|ack|resolve|ignore <id>]: the grouped failures an operator works through.
import type { CommandDef } from "citty";
import { HookspoolError } from "../errors.ts";
import type { IssueRow, IssueState } from "../store/issues.ts";
import { humanAge, table } from "./format.ts";
import { type Cli, GLOBAL_ARGS, loadFor, openOperatorStore, positiveInt } from "./context.ts";

const STATES = ["open", "acked", "resolved", "ignored", "all"] as const;

function listRun(cli: Cli) {
  return async ({ args }: { args: Record<string, unknown> }) => {
    const state = args.state as IssueState | "all" | undefined;
    if (state !== undefined && !(STATES as readonly string[]).includes(state))
      throw new HookspoolError("E_USAGE", `--state must be one of ${STATES.join(", ")}`);
    const store = await openOperatorStore(cli, loadFor(cli));
    try {
      const rows = await store.listIssues({ state });
      if (cli.globals.json) {
        cli.io.out(JSON.stringify(rows));
        return 0;
      }
      if (rows.length === 0) {
        cli.io.out(state ? `no ${state === "all" ? "" : `${state} `}issues` : "no open issues");
        return 0;
      }
      const now = cli.clock.now();
      cli.io.out(
        table(
          ["ID", "STATE", "KIND", "FINGERPRINT", "COUNT", "FIRST", "LAST", "ALERTED", "BATCH", "LAST ERROR"],
          rows.map((i: IssueRow) => [
            i.id,
            i.state,
            i.kind,
            i.fingerprint,
            i.count,
            humanAge(now - i.first_at),
            humanAge(now - i.last_at),
            i.alerted_at ? "yes" : "",
            i.sample_batch_id ?? "",
            (i.last_error ?? "").slice(0, 120),
          ]),
        ),
      );
      return 0;
    } finally {
      await store.close();
    }
  };
}

function stateVerb(cli: Cli, verb: "ack" | "resolve" | "ignore", description: string): CommandDef {
  return {
    meta: { name: verb, description },
    args: { ...GLOBAL_ARGS, id: { type: "positional", description: "issue id", required: true } },
    async run({ args }) {
      const id = positiveInt(args.id, "issue id");
      const store = await openOperatorStore(cli, loadFor(cli));
      try {
        const r = await store.setIssueState(id, verb, cli.clock.now());
        if (r === "missing") throw new HookspoolError("E_NOT_FOUND", `no issue ${id}`);
        if (r === "nothing")
          throw new HookspoolError(
            "E_NOTHING",
            `issue ${id} cannot be ${verb === "ack" ? "acked" : `${verb}d`} from its current state`,
          );
        cli.io.out(cli.globals.json ? JSON.stringify(r) : `issue ${id}: ${r.state}`);
        return 0;
      } finally {
        await store.close();
      }
    },
  };
}

export function issuesCommand(cli: Cli): CommandDef {
  const listArgs = {
    ...GLOBAL_ARGS,
    state: { type: "string", description: `${STATES.join(", ")} (default: open and acked)` },
  } as const;
  return {
    meta: { name: "issues", description: "grouped failures: list (the default), ack, resolve, ignore" },
    args: listArgs,
    subCommands: {
      list: {
        meta: { name: "list", description: "issues that need attention (--state to see others)" },
        args: listArgs,
        run: listRun(cli),
      },
      ack: stateVerb(cli, "ack", "acknowledge an open issue (it stops alerting; it still resolves by itself)"),
      resolve: stateVerb(cli, "resolve", "mark an issue resolved (it alerts again if it reopens)"),
      ignore: stateVerb(cli, "ignore", "ignore an issue for good: it never alerts or reopens (use sparingly)"),
    },
    run: listRun(cli),
  };
}
