// hookspool route test: what the routing of this config (give a candidate with --config) would
// do with the requests stored in the spool, against what each became, with nothing written.
import { readFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import type { CommandDef } from "citty";
import { parseHttpCapture } from "../bobbin/captures.ts";
import { CHANGE_KINDS, type CopyView, exposedView, type RouteChange, routeTest } from "../check/route-test.ts";
import { exposeSummary, tracedExpose } from "../config/expose.ts";
import { loadSources } from "../config/sources.ts";
import { HookspoolError } from "../errors.ts";
import { afterVerify } from "../intake/evaluate.ts";
import { hookRequest } from "../plugin/hook-request.ts";
import type { StoredRequestRow } from "../store/requests.ts";
import type { LoadedConfig } from "../config/types.ts";
import type { NewEvent } from "../store/enqueue.ts";
import { type Cli, GLOBAL_ARGS, loadFor, notInConfig, openOperatorStore, positiveInt } from "./context.ts";
import { table, visible } from "./format.ts";
import { parseSince } from "../time.ts";
import { REQUEST_WHERE_ARG, whereOf } from "./filters.ts";
import type { StoredRequestsQuery } from "../store/requests.ts";

const copies = (list: CopyView[]) =>
  list.map((c, i) => `${i ? "tee " : ""}${c.route} -> ${c.destination}`).join(", ") || "-";
const afterText = (a: RouteChange["after"]) =>
  "ignored" in a ? `ignored (${a.ignored})` : "error" in a ? a.error : copies(a);

function testCommand(cli: Cli): CommandDef {
  return {
    meta: {
      name: "test",
      description:
        "stored requests (or one capture) through this config's routing (a candidate: " +
        "--config FILE), against what each became; nothing is written",
    },
    args: {
      ...GLOBAL_ARGS,
      since: {
        type: "string",
        description: "requests that arrived since T (Unix seconds, ISO date, or an age: 24h, 7d); default 24h",
        valueHint: "T",
      },
      source: {
        type: "string",
        description: "only this source's requests (with --request: the source the capture is for)",
        valueHint: "S",
      },
      request: {
        type: "string",
        description: "route one captured .http request instead (needs --source); verification is skipped",
        valueHint: "file",
      },
      where: REQUEST_WHERE_ARG,
      limit: { type: "string", description: "read at most this many stored events", default: "10000", valueHint: "n" },
    },
    async run({ args, rawArgs }) {
      const where = whereOf(rawArgs);
      const loaded = loadFor(cli);
      const config = loaded.config;
      const sources = await loadSources(config, {
        configDir: dirname(loaded.paths.config ?? loaded.paths.home),
        env: cli.io.env,
        file: loaded.paths.config ?? "config.toml",
      });
      if (args.request !== undefined) {
        const source = args.source as string | undefined;
        if (!source) throw new HookspoolError("E_USAGE", "--request needs --source: the source the capture is for");
        if (where) throw new HookspoolError("E_USAGE", "--where reads stored requests; --request routes one capture");
        const src = sources.get(source);
        if (!src)
          throw notInConfig(loaded, new HookspoolError("E_NOT_FOUND", `no source "${source}" that takes requests`));
        let capture: ReturnType<typeof parseHttpCapture>;
        try {
          capture = parseHttpCapture(readFileSync(resolve(cli.io.cwd, String(args.request)), "utf8"));
        } catch (e) {
          throw new HookspoolError("E_INPUT", `cannot read the capture: ${(e as Error).message}`, {
            file: String(args.request),
          });
        }
        const ev = await afterVerify(
          config,
          src,
          hookRequest({ ...capture, peer: "route-test", now: cli.clock.now() }),
        );
        // Each copy as delivered: with expose, the event narrowed to its route's paths.
        const views = (e: NewEvent) =>
          e.copies.map((c) => ({
            route: c.route,
            destination: c.destination,
            tee: c.tee,
            window: c.window,
            ...exposedView(tracedExpose(c.trace) ?? undefined, e.payload),
          }));
        const doc =
          ev.kind === "classified"
            ? {
                outcome: "queued",
                events: ev.events.map((e) => ({ key: e.key, event_type: e.eventType, copies: views(e) })),
              }
            : { outcome: ev.kind, ...(ev.kind === "ignored" ? { reason: ev.reason } : {}) };
        if (cli.globals.json) cli.io.out(JSON.stringify(doc));
        else if (ev.kind === "classified") {
          for (const e of ev.events) {
            cli.io.out(visible(`${e.eventType || "(no type)"} key ${e.key}: ${copies(e.copies)}`));
            for (const [i, v] of views(e).entries()) {
              if (v.delivered === undefined) continue;
              const summary = exposeSummary((e.copies[i].trace as { expose?: unknown } | undefined)?.expose);
              cli.io.out(visible(`  ${v.route} -> ${v.destination} delivers (${summary}): ${v.delivered}`));
            }
          }
        } else cli.io.out(visible(`${ev.kind}${ev.kind === "ignored" ? `: ${ev.reason}` : ""}`));
        return 0;
      }
      const now = cli.clock.now();
      const since = parseSince(String(args.since ?? "24h"), now);
      const requests = await readStoredRequests(cli, loaded, {
        since,
        source: args.source as string | undefined,
        limit: positiveInt(args.limit, "--limit"),
        where,
      });
      const report = routeTest(config, sources, requests);
      if (cli.globals.json) {
        cli.io.out(JSON.stringify(report));
        return 0;
      }
      for (const c of report.changes)
        cli.io.out(
          visible(
            `event ${c.event} ${c.source} ${c.eventType || "-"}: ` +
              `${copies(c.before)}  =>  ${afterText(c.after)}  [${c.kinds.join(", ")}]`,
          ),
        );
      if (report.changes.length) cli.io.out("");
      cli.io.out(
        table(
          ["REQUESTS", "COUNT"],
          [
            ["read", report.requests],
            ["unchanged", report.unchanged],
            ...CHANGE_KINDS.filter((k) => report.counts[k] > 0).map((k) => [k.replace("_", " "), report.counts[k]]),
          ],
        ),
      );
      return 0;
    },
  };
}

/**
 * The stored requests route test reads, from the config's store; on SQLite the connection refuses any write meanwhile.
 */
async function readStoredRequests(cli: Cli, loaded: LoadedConfig, o: StoredRequestsQuery): Promise<StoredRequestRow[]> {
  const store = await openOperatorStore(cli, loaded);
  try {
    return await store.storedRequests(o);
  } finally {
    await store.close();
  }
}

export function routeCommand(cli: Cli): CommandDef {
  return {
    meta: { name: "route", description: "the routing of a config tried on stored requests: route test" },
    subCommands: { test: testCommand(cli) },
  };
}
