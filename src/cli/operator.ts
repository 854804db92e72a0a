// The operator's verbs over batches and destinations: replay (replay.ts), retry, split, exclude,
// drop, pause, resume. Every one is a named store transition; nothing here writes SQL.
import { userInfo } from "node:os";
import type { CommandDef } from "citty";
import { budgetPolicy, configuredDestinations } from "../config/destinations.ts";
import type { Config } from "../config/types.ts";
import { HookspoolError } from "../errors.ts";
import type { OperatorStore } from "../store/api.ts";
import { type Cli, GLOBAL_ARGS, positiveInt } from "./context.ts";
import type { HelpMeta } from "./help.ts";
import { say, withStore, words } from "./operator-store.ts";
import { replayCommand } from "./replay.ts";

function retryCommand(cli: Cli): CommandDef {
  return {
    meta: { name: "retry", description: "a batch in retry becomes due now (skip the backoff)" },
    args: { ...GLOBAL_ARGS, batch: { type: "positional", description: "batch id", required: true } },
    run({ args }) {
      const id = positiveInt(args.batch, "batch");
      return withStore(cli, async (store) => {
        await store.retryNow(id, cli.clock.now());
        say(cli, { batch: id, due: "now" }, `batch ${id}: due now`);
        return 0;
      });
    },
  };
}

function splitCommand(cli: Cli): CommandDef {
  return {
    meta: {
      name: "split",
      description: "cut a sealed, retry or dead batch into consecutive pieces; the original is dropped (result split)",
    },
    args: {
      ...GLOBAL_ARGS,
      batch: { type: "positional", description: "batch id", required: true },
      "max-events": { type: "string", description: "at most N events per piece" },
      "max-bytes": {
        type: "string",
        description: "at most B bytes per piece (an event larger than B gets a piece of its own)",
      },
      at: { type: "string", description: "the second piece starts at this event id" },
    },
    run({ args }) {
      const id = positiveInt(args.batch, "batch");
      const opt = (k: string) => (args[k] === undefined ? undefined : positiveInt(args[k], `--${k}`));
      return withStore(cli, async (store) => {
        const pieces = await store.splitBatch(
          id,
          { maxEvents: opt("max-events"), maxBytes: opt("max-bytes"), at: opt("at") },
          cli.clock.now(),
        );
        say(
          cli,
          { batch: id, pieces },
          `batch ${id}: split into ${pieces.map((p) => `#${p}`).join(", ")} (sealed, due now); ` +
            `batch ${id} is dropped with result split`,
        );
        return 0;
      });
    },
  };
}

function requireYes(args: { yes?: boolean }, what: string): void {
  if (!args.yes) throw new HookspoolError("E_USAGE", `${what} changes what will be delivered; pass --yes to confirm`);
}

function excludeCommand(cli: Cli): CommandDef {
  return {
    meta: {
      name: "exclude",
      description: "leave events out of a batch's document (they stay stored and listed); content_hash is recomputed",
      usage: "<batch> <event>... --yes",
      variadic: true,
    } as HelpMeta,
    args: {
      ...GLOBAL_ARGS,
      batch: { type: "positional", description: "batch id", required: true },
      event: {
        type: "positional",
        description: "the event ids to leave out (hookspool show <batch> --events lists them)",
        required: false,
      },
      yes: { type: "boolean", description: "confirm" },
    },
    run({ args }) {
      const id = positiveInt(args.batch, "batch");
      const events = words(args as { _: string[] })
        .slice(1)
        .map((w) => positiveInt(w, "event id"));
      if (events.length === 0)
        throw new HookspoolError(
          "E_USAGE",
          "give the event ids to exclude (hookspool show <batch> --events lists them)",
        );
      requireYes(args as { yes?: boolean }, "exclude");
      return withStore(cli, async (store) => {
        await store.excludeEvents(id, events, cli.clock.now());
        const b = await store.getBatch(id);
        say(
          cli,
          { batch: id, excluded: events, content_hash: b?.content_hash },
          `batch ${id}: excluded event(s) ${events.join(", ")}; content_hash ${b?.content_hash ?? "-"}`,
        );
        return 0;
      });
    },
  };
}

function dropCommand(cli: Cli): CommandDef {
  return {
    meta: {
      name: "drop",
      description: "discard batches deliberately (open, sealed, retry, awaiting or dead); never automatic",
      usage: "<batch>... --yes",
      variadic: true,
    } as HelpMeta,
    args: {
      ...GLOBAL_ARGS,
      batch: { type: "positional", description: "the batches to drop", required: false },
      yes: { type: "boolean", description: "confirm" },
    },
    run({ args }) {
      const ids = words(args as { _: string[] }).map((w) => positiveInt(w, "batch"));
      if (ids.length === 0) throw new HookspoolError("E_USAGE", "give the batch ids to drop");
      requireYes(args as { yes?: boolean }, "drop");
      return withStore(cli, async (store) => {
        await store.dropBatches(ids, cli.clock.now());
        say(cli, { dropped: ids }, `dropped batch(es) ${ids.join(", ")}`);
        return 0;
      });
    },
  };
}

/** A destination the config names, or one the spool has batches or state for (a typo is not). */
async function knownDestination(store: OperatorStore, config: Config, name: string): Promise<boolean> {
  if (name === "quarantine") return false;
  return configuredDestinations(config).has(name) || (await store.destinationNames()).includes(name);
}

function pauseCommand(cli: Cli): CommandDef {
  return {
    meta: { name: "pause", description: "stop delivering to a destination (it keeps spooling) until resume" },
    args: {
      ...GLOBAL_ARGS,
      destination: { type: "positional", description: "destination name", required: true },
      reason: { type: "string", description: "why, for status and the issue" },
    },
    run({ args }) {
      const name = String(args.destination);
      return withStore(cli, async (store, config) => {
        const now = cli.clock.now();
        if (!(await knownDestination(store, config, name)))
          throw new HookspoolError("E_NOT_FOUND", `no destination ${name} in the config or the spool`, {
            hint: "hookspool status lists destinations",
          });
        let user = "operator";
        try {
          user = userInfo().username;
        } catch {
          // no passwd entry: keep the generic name
        }
        const by = args.reason ? `${user}: ${String(args.reason).slice(0, 200)}` : user;
        await store.pauseDestination(name, by, now);
        // A pause opens (or updates) a delivery issue, so it shows in issues and alerts like a failure.
        await store.raiseIssue({
          fingerprint: `delivery:${name}:paused`,
          kind: "delivery",
          destination: name,
          error: `paused by ${by}`,
          now,
        });
        say(
          cli,
          { destination: name, state: "paused" },
          `${name}: paused (spooling continues; hookspool resume ${name} to deliver again)`,
        );
        return 0;
      });
    },
  };
}

function resumeCommand(cli: Cli): CommandDef {
  return {
    meta: {
      name: "resume",
      description:
        "deliver to a paused destination again (closed, counters reset); --budget: " +
        "let batches its run budget holds go now",
    },
    args: {
      ...GLOBAL_ARGS,
      destination: { type: "positional", description: "destination name", required: true },
      budget: {
        type: "boolean",
        description:
          "start its budget and key_budget windows again now, so the batches they hold go " +
          "(the destination's pause is left as it is)",
      },
    },
    run({ args }) {
      const name = String(args.destination);
      return withStore(cli, async (store, config) => {
        if (args.budget) {
          if (!budgetPolicy(config, name)) throw new HookspoolError("E_NOTHING", `${name} has no budget or key_budget`);
          await store.releaseBudget(name, cli.clock.now());
          say(
            cli,
            { destination: name, budget: "released" },
            `${name}: its budgets count from now; the batches they held go`,
          );
          return 0;
        }
        if (!(await store.resumeDestination(name, cli.clock.now())))
          throw new HookspoolError("E_NOTHING", `${name} is not paused`);
        say(cli, { destination: name, state: "closed" }, `${name}: resumed`);
        return 0;
      });
    },
  };
}

export function operatorCommands(cli: Cli): Record<string, CommandDef> {
  return {
    replay: replayCommand(cli),
    retry: retryCommand(cli),
    split: splitCommand(cli),
    exclude: excludeCommand(cli),
    drop: dropCommand(cli),
    pause: pauseCommand(cli),
    resume: resumeCommand(cli),
  };
}
