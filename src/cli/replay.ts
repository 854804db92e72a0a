// hookspool replay: dead batches back to retry (a quarantine batch classified again through its
// source's fixed plugin), --dead in bulk or as a --plan, and --delivered batches resent under a
// new delivery id. Every one is a named store transition; nothing here writes SQL.
import { dirname } from "node:path";
import type { CommandDef } from "citty";
import { loadSources } from "../config/sources.ts";
import type { Config } from "../config/types.ts";
import { HookspoolError } from "../errors.ts";
import { reclassify, StillQuarantined } from "../intake/reclassify.ts";
import type { OperatorStore } from "../store/api.ts";
import type { Reclassify } from "../store/replay.ts";
import { parseSince } from "../time.ts";
import { type Cli, GLOBAL_ARGS, positiveInt } from "./context.ts";
import { deadReasonArg } from "./dead-reasons.ts";
import type { HelpMeta } from "./help.ts";
import { say, withStore, words } from "./operator-store.ts";
import { printReplayPlan } from "./replay-plan.ts";
import { FILTER_ARGS, whereOf } from "./filters.ts";
import type { PayloadCondition } from "../store/where.ts";

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
  where: PayloadCondition[] | undefined,
): Promise<number> {
  if (args.dead) throw new HookspoolError("E_USAGE", "--dead and --delivered do not go together");
  if (args.reason) throw new HookspoolError("E_USAGE", "--reason goes with --dead");
  if (ids.length && (args.destination || args.source || args.since || where))
    throw new HookspoolError("E_USAGE", "give batch ids or --destination/--source/--since/--where, not both");
  if (!ids.length && !args.destination && !args.source && !args.since && !where)
    throw new HookspoolError(
      "E_USAGE",
      "give batch ids, or narrow --delivered with --destination, --source, --since or --where",
    );
  return withStore(cli, async (store) => {
    const now = cli.clock.now();
    const targets = ids.length
      ? ids
      : await store.deliveredBatchIds({
          destination: args.destination,
          source: args.source,
          since: args.since ? parseSince(String(args.since), now) : undefined,
          where,
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
        "note: each goes out under a new delivery id (its old id with _r1, _r2, ... after it), " +
          "so a receiver that drops the ids it has seen takes it again; the earlier delivery stays in show --attempts",
      );
    }
    return code;
  });
}

export function replayCommand(cli: Cli): CommandDef {
  return {
    meta: {
      name: "replay",
      description:
        "dead -> retry, due now, attempts reset; a quarantine batch is classified again through its plugin; " +
        "--delivered resends delivered batches under a new delivery id",
      usage:
        "<batch>... | --dead [--destination D] [--source S] [--since T] [--reason R] [--where COND]... [--plan] | " +
        "--delivered [<batch>...] [--destination D] [--source S] [--since T] [--where COND]...",
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
          "with --dead: only batches that died for this reason (rejected, exhausted, poison, processor_permanent, " +
          "bad_emit, config, quarantined, agent_failed)",
        valueHint: "R",
      },
      where: {
        ...FILTER_ARGS.where,
        description: `with --dead or --delivered: ${FILTER_ARGS.where.description}`,
      },
      plan: {
        type: "boolean",
        description:
          "with --dead: show what would be replayed, by destination, key and reason, " +
          "and the pace each destination takes it at; change nothing",
      },
    },
    async run({ args, rawArgs }) {
      const ids = words(args as { _: string[] }).map((w) => positiveInt(w, "batch"));
      const where = whereOf(rawArgs);
      if (args.delivered)
        return resend(
          cli,
          ids,
          args as { dead?: boolean; destination?: string; source?: string; since?: string; reason?: string },
          where,
        );
      if (args.dead && ids.length) throw new HookspoolError("E_USAGE", "give batch ids or --dead, not both");
      if (!args.dead && (args.destination || args.source || args.since || args.reason || args.plan || where))
        throw new HookspoolError(
          "E_USAGE",
          "--destination, --source, --since, --reason, --where and --plan go with --dead",
        );
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
              where,
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
                  `batch ${id}: quarantined request(s) classified again: ${r.results.length} queued` +
                    `${r.ignored ? `, ${r.ignored} ignored by the plugin` : ""}; ` +
                    "the quarantine batch is marked reclassified",
                );
            }
          } catch (e) {
            // A plugin that still throws on a quarantined request leaves it quarantined (the
            // replay is one transaction); only the exception's class is reported.
            const message =
              e instanceof HookspoolError || e instanceof StillQuarantined
                ? e.message
                : `the source plugin still cannot classify it (${e instanceof Error ? e.name : typeof e}); ` +
                  "nothing changed";
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
