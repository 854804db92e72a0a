// hookspool enqueue: manual or sweep injection, with the intake's validation and routing.
import { readFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import type { CommandDef } from "citty";
import { destinationProblem } from "../config/destinations.ts";
import { injectedCopies, injectedVersion, newEvent } from "../config/events.ts";
import { loadSources } from "../config/sources.ts";
import { userKey } from "../config/provenance.ts";
import { HookspoolError } from "../errors.ts";
import type { EnqueueResult, NewEvent } from "../store/enqueue.ts";
import type { LoadedConfig } from "../config/types.ts";
import { type Cli, GLOBAL_ARGS, loadFor, notInConfig, openOperatorStore } from "./context.ts";
import { visible } from "./format.ts";

const decoder = new TextDecoder("utf-8", { fatal: true });

export function enqueueCommand(cli: Cli): CommandDef {
  return {
    meta: { name: "enqueue", description: "enqueue one JSON event from --file or stdin, as the intake would" },
    args: {
      ...GLOBAL_ARGS,
      source: { type: "string", description: "a configured source", required: true },
      key: { type: "string", description: "coalesce key (at most 512 bytes)", required: true },
      destination: { type: "string", description: "deliver the primary copy here instead of the routed destination" },
      "event-type": { type: "string", description: "event type", default: "" },
      "dedup-id": { type: "string", description: "dedup id (a repeat inside the source's window is a duplicate)" },
      file: { type: "string", description: "read the payload from this file (default: stdin)", valueHint: "path" },
    },
    async run({ args }) {
      const loaded = loadFor(cli);
      const { config, paths } = loaded;
      const source = String(args.source);
      const src = config.sources[source];
      if (!src)
        throw notInConfig(
          loaded,
          new HookspoolError("E_CONFIG", `no source "${source}" in the config`, {
            key: `sources.${source}`,
            hint: "add a [sources.<name>] table with an action",
          }),
        );
      const body = args.file ? readPayloadFile(resolve(cli.io.cwd, String(args.file))) : await cli.io.readStdin();
      const cap = src.max_body_bytes ?? config.intake.max_body_bytes;
      if (body.length > cap)
        throw new HookspoolError(
          "E_INPUT",
          `the payload is ${body.length} bytes; source ${source} accepts at most ${cap}`,
        );
      let text: string;
      try {
        text = decoder.decode(body);
      } catch {
        throw new HookspoolError("E_INPUT", "the payload is not valid UTF-8");
      }
      if (text.trim() === "")
        throw new HookspoolError("E_INPUT", "the payload is empty", {
          hint: "pass a JSON document with --file or on stdin",
        });
      try {
        JSON.parse(text);
      } catch {
        throw new HookspoolError("E_INPUT", "the payload is not valid JSON");
      }
      const eventType = String(args["event-type"] ?? "");
      const override = args.destination ? String(args.destination) : undefined;
      // Routed as the intake routes a request: the source plugin's attrs, action and span count.
      const plugins = await loadSources(
        { ...config, sources: { [source]: src } },
        { configDir: dirname(paths.config ?? paths.home), env: cli.io.env, file: paths.config ?? "config.toml" },
      );
      let copies: NewEvent["copies"];
      try {
        copies = injectedCopies(config, plugins, {
          source,
          payload: text,
          eventType,
          destinationOverride: override,
          peer: "cli",
          now: cli.clock.now(),
        });
      } catch (e) {
        if (e instanceof HookspoolError) throw e;
        // The plugin's attrs or action threw on this payload: the intake would quarantine it.
        throw new HookspoolError(
          "E_INPUT",
          `source ${source}'s plugin cannot route this payload (${e instanceof Error ? e.name : typeof e})`,
        );
      }
      for (const c of copies) {
        const why = destinationProblem(config, c.destination);
        if (!why) continue;
        // The operator typed this one; the config is not at fault.
        if (override !== undefined && !c.tee)
          throw new HookspoolError("E_USAGE", `--destination ${c.destination}: ${why}`);
        // A route without a destination of its own uses the source's action.
        const i = config.routes.findIndex((r) => r.name === c.route && r.destination !== undefined);
        const key = userKey(config, i >= 0 ? `routes[${i}].destination` : `sources.${source}.action`);
        throw new HookspoolError("E_CONFIG", `destination "${c.destination}": ${why}`, {
          file: paths.config ?? undefined,
          key,
        });
      }
      const dedupId = args["dedup-id"] === undefined ? null : String(args["dedup-id"]);
      // The source's version selector read from the payload, as a POST of it would give it.
      const version = injectedVersion(plugins, { source, payload: text, peer: "cli", now: cli.clock.now() });
      const ev = newEvent(
        config,
        { source, key: String(args.key), eventType, dedupId, payload: text, body, version },
        copies,
      );
      const r = await enqueueOn(cli, { config, paths }, ev);
      if (cli.globals.json) {
        cli.io.out(JSON.stringify(r));
      } else if (r.status === "queued") {
        for (const p of r.placed)
          cli.io.out(
            `queued event ${p.eventId} in batch ${p.batchId} (route ${visible(p.route)} -> ` +
              `${visible(p.destination)}${p.tee ? ", tee" : ""}${p.sealed ? ", sealed" : ""})`,
          );
      } else if (r.status === "duplicate") {
        cli.io.out(`duplicate of event ${r.eventId}; nothing enqueued`);
      } else {
        cli.io.out(`duplicate of event ${r.eventId} in dead batch ${r.batchId}: batch replayed`);
      }
      return 0;
    },
  };
}

/** One event into the config's store (SQLite never migrated here, or PostgreSQL at this build's schema). */
async function enqueueOn(
  cli: Cli,
  loaded: Pick<LoadedConfig, "config" | "paths">,
  ev: NewEvent,
): Promise<EnqueueResult> {
  const store = await openOperatorStore(cli, loaded);
  try {
    return await store.enqueue(ev, cli.clock.now());
  } finally {
    await store.close();
  }
}

function readPayloadFile(path: string): Uint8Array {
  try {
    return readFileSync(path);
  } catch (e) {
    throw new HookspoolError("E_NOT_FOUND", `cannot read ${path} (${(e as NodeJS.ErrnoException).code ?? "error"})`);
  }
}
