// The operator's verbs over batches and destinations: replay, retry, split, exclude, drop,
// pause, resume. Every one is a named store transition; nothing here writes SQL.
import { dirname } from "node:path";
import { userInfo } from "node:os";
import type { CommandDef } from "citty";
import { budgetPolicy, configuredDestinations } from "../config/destinations.ts";
import type { Config } from "../config/types.ts";
import { HookspoolError } from "../errors.ts";
import { loadSources } from "../config/sources.ts";
import { reclassify, StillQuarantined } from "../intake/reclassify.ts";
import type { OperatorStore } from "../store/api.ts";
import type { Reclassify } from "../store/replay.ts";
import { type Cli, GLOBAL_ARGS, loadFor, openOperatorStore, positiveInt } from "./context.ts";
import type { HelpMeta } from "./help.ts";
import { deadReasonArg } from "./dead-reasons.ts";
import { parseSince } from "../time.ts";
import { printReplayPlan } from "./replay-plan.ts";

/** Positional words after the verb (citty keeps them in `_`). */
function words(args: { _: string[] }): string[] {
  return args._.map(String);
}

function say(cli: Cli, json: unknown, text: string): void {
  cli.io.out(cli.globals.json ? JSON.stringify(json) : text);
}

/** Run `fn` with the config's store (SQLite never migrated here, or PostgreSQL) and the loaded config. */
async function withStore<T>(
  cli: Cli,
  fn: (store: OperatorStore, config: Config, configFile: string | null) => T | Promise<T>,
): Promise<T> {
  const loaded = loadFor(cli);
  const store = await openOperatorStore(cli, loaded);
  try {
    return await fn(store, loaded.config, loaded.paths.config);
  } finally {
    await store.close();
  }
}

/**
 * Classify a quarantine batch's requests again through the source's (fixed) plugin, before the
 * replay's transaction: each goes through the steps after verify as the intake would take it.
 */
async function reclassifier(
  cli: Cli,
  store: OperatorStore,
  config: Config,
  configFile: string | null,
  batchId: number,
  source: string,
): Promise<Reclassify> {
  const sources = await loadSources(config, {
    configDir: dirname(configFile ?? cli.io.cwd),
    env: cli.io.env,
    file: configFile ?? "config.toml",
  });
  const src = sources.get(source);
  if (!src)
    throw new HookspoolError("E_CONFIG", `source ${source} has no plugin to classify its quarantined requests with`, {
      key: `sources.${source}`,
    });
  const events = await reclassify(config, src, await store.quarantinedRequests(batchId));
  return (req) => {
    const ev = events.get(req.eventId);
    if (ev === undefined)
      throw new HookspoolError("E_NOTHING", `batch ${batchId} changed while it was replayed; nothing changed`);
    return ev;
  };
}

/** replay --delivered: delivered -> retry, due now, each under a new delivery id. */
async function resend(
  cli: Cli,
  ids: number[],
  args: { dead?: boolean; destination?: string; source?: string; since?: string; reason?: string },
): Promise<number> {
  if (args.dead) throw new HookspoolError("E_USAGE", "--dead and --delivered do not go together");
  if (args.reason) throw new HookspoolError("E_USAGE", "--reason goes with --dead");
  if (ids.length && (args.destination || args.source || args.since))
    throw new HookspoolError("E_USAGE", "give batch ids or --destination/--source/--since, not both");
  if (!ids.length && !args.destination && !args.source && !args.since)
    throw new HookspoolError(
      "E_USAGE",
      "give batch ids, or narrow --delivered with --destination, --source or --since",
    );
  return withStore(cli, async (store) => {
    const now = cli.clock.now();
    const targets = ids.length
      ? ids
      : await store.deliveredBatchIds({
          destination: args.destination,
          source: args.source,
          since: args.since ? parseSince(String(args.since), now) : undefined,
        });
    if (targets.length === 0) {
      say(cli, { resent: [] }, "no delivered batches match");
      return 1;
    }
    const resent: number[] = [];
    let code = 0;
    for (const id of targets) {
      try {
        await store.resendDelivered(id, now);
        resent.push(id);
        if (!cli.globals.json) cli.io.out(`batch ${id}: delivered -> retry, due now`);
      } catch (e) {
        code = Math.max(code, e instanceof HookspoolError ? e.exitCode : 1);
        if (!cli.globals.json)
          cli.io.err(`hookspool: ${aboutBatch(id, e instanceof HookspoolError ? e.describe() : String(e))}`);
      }
    }
    if (cli.globals.json) cli.io.out(JSON.stringify({ resent }));
    else if (resent.length) {
      cli.io.out(
        "note: each goes out under a new delivery id (its old id with _r1, _r2, ... after it), so a receiver that drops the ids it has seen takes it again; the earlier delivery stays in show --attempts",
      );
    }
    return code;
  });
}

function replayCommand(cli: Cli): CommandDef {
  return {
    meta: {
      name: "replay",
      description:
        "dead -> retry, due now, attempts reset; a quarantine batch is classified again through its plugin; --delivered resends delivered batches under a new delivery id",
      usage:
        "<batch>... | --dead [--destination D] [--source S] [--since T] [--reason R] [--plan] | --delivered [<batch>...] [--destination D] [--source S] [--since T]",
      variadic: true,
    } as HelpMeta,
    args: {
      ...GLOBAL_ARGS,
      batch: {
        type: "positional",
        description:
          "the dead batches to replay (or --dead for all of them; with --delivered, delivered ones to resend)",
        required: false,
      },
      dead: { type: "boolean", description: "every dead batch (bulk retry), narrowed by the flags below" },
      delivered: {
        type: "boolean",
        description:
          "resend delivered batches (the ids given, or every one the flags below select) under a new delivery id",
      },
      destination: {
        type: "string",
        description: "with --dead: only this destination (quarantine: quarantined requests)",
      },
      source: { type: "string", description: "with --dead: only this source" },
      since: {
        type: "string",
        description: "with --dead: only batches whose last event is this recent (Unix s, ISO date, or 24h)",
        valueHint: "T",
      },
      reason: {
        type: "string",
        description:
          "with --dead: only batches that died for this reason (rejected, exhausted, poison, processor_permanent, bad_emit, config, quarantined, agent_failed)",
        valueHint: "R",
      },
      plan: {
        type: "boolean",
        description:
          "with --dead: show what would be replayed, by destination, key and reason, and the pace each destination takes it at; change nothing",
      },
    },
    async run({ args }) {
      const ids = words(args as { _: string[] }).map((w) => positiveInt(w, "batch"));
      if (args.delivered)
        return resend(
          cli,
          ids,
          args as { dead?: boolean; destination?: string; source?: string; since?: string; reason?: string },
        );
      if (args.dead && ids.length) throw new HookspoolError("E_USAGE", "give batch ids or --dead, not both");
      if (!args.dead && (args.destination || args.source || args.since || args.reason || args.plan))
        throw new HookspoolError("E_USAGE", "--destination, --source, --since, --reason and --plan go with --dead");
      const reason = deadReasonArg(args.reason);
      if (!args.dead && ids.length === 0) throw new HookspoolError("E_USAGE", "give batch ids, or --dead");
      return withStore(cli, async (store, config, file) => {
        const now = cli.clock.now();
        const targets = args.dead
          ? await store.deadBatchIds({
              destination: args.destination ?? (reason === "quarantined" ? "quarantine" : undefined),
              source: args.source,
              reason,
              since: args.since ? parseSince(String(args.since), now) : undefined,
            })
          : ids;
        if (args.plan) return printReplayPlan(cli, store, config, targets);
        if (targets.length === 0) {
          say(cli, { replayed: [] }, "no dead batches match");
          return 1;
        }
        const results: unknown[] = [];
        let code = 0;
        let replayed = 0;
        for (const id of targets) {
          try {
            const b = await store.getBatch(id);
            const re =
              b?.destination === "quarantine" && b.state === "dead"
                ? await reclassifier(cli, store, config, file, id, b.source)
                : undefined;
            const r = await store.replayBatch(id, now, re);
            results.push(r);
            if (r.kind === "replayed") replayed++;
            if (!cli.globals.json) {
              if (r.kind === "replayed") cli.io.out(`batch ${id}: dead -> retry, due now`);
              else
                cli.io.out(
                  `batch ${id}: quarantined request(s) classified again: ${r.results.length} queued${r.ignored ? `, ${r.ignored} ignored by the plugin` : ""}; the quarantine batch is marked reclassified`,
                );
            }
          } catch (e) {
            // A plugin that still throws on a quarantined request leaves it quarantined (the
            // replay is one transaction); only the exception's class is reported.
            const message =
              e instanceof HookspoolError || e instanceof StillQuarantined
                ? e.message
                : `the source plugin still cannot classify it (${e instanceof Error ? e.name : typeof e}); nothing changed`;
            code = Math.max(code, e instanceof HookspoolError ? e.exitCode : 1);
            results.push({
              batchId: id,
              error: message,
              ...(e instanceof HookspoolError && e.hint ? { hint: e.hint } : {}),
            });
            if (!cli.globals.json)
              cli.io.err(`hookspool: ${aboutBatch(id, e instanceof HookspoolError ? e.describe() : message)}`);
          }
        }
        if (cli.globals.json) cli.io.out(JSON.stringify({ replayed: results }));
        // Only a batch put back into retry can overtake newer batches of its key.
        else if (replayed > 0)
          cli.io.out(
            "note: a replayed batch re-enters its key's queue by its first event, so it delivers out of order",
          );
        return code;
      });
    },
  };
}

/** `message` naming batch `id` once: the store's messages already do ("batch 7 is delivered; ..."). */
function aboutBatch(id: number, message: string): string {
  return new RegExp(`\\bbatch ${id}\\b`).test(message) ? message : `batch ${id}: ${message}`;
}

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
          `batch ${id}: split into ${pieces.map((p) => `#${p}`).join(", ")} (sealed, due now); batch ${id} is dropped with result split`,
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
        "deliver to a paused destination again (closed, counters reset); --budget: let batches its run budget holds go now",
    },
    args: {
      ...GLOBAL_ARGS,
      destination: { type: "positional", description: "destination name", required: true },
      budget: {
        type: "boolean",
        description:
          "start its budget and key_budget windows again now, so the batches they hold go (the destination's pause is left as it is)",
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
