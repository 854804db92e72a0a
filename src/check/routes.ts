// hookspool check, the rules about where events go: every action and route destination
// resolves, each destination's own check(), the tee rules and header names; with window-rules.ts
// (the window's bounds against the receiver's cap) and hermes-rules.ts (the Hermes gateway's
// subscriptions file), over flows.ts's route listing.
import { systemClock } from "../clock.ts";
import { configuredDestinations, destinationProblem, destinationType } from "../config/destinations.ts";
import type { Env } from "../config/load.ts";
import { MAX_TEES } from "../config/routes.ts";
import type { Config, ConfigProblem, RouteConfig } from "../config/types.ts";
import type { Pace } from "../delivery.ts";
import { destinationPace, makeDestination } from "../destinations/registry.ts";
import { HOOKSPOOL_HEADERS, isReservedHeader, validHeaderName } from "../destinations/signing.ts";
import { actionOf, destinationKey, type Flow, flowsOf, sourceKey } from "./flows.ts";
import { hermesRules } from "./hermes-rules.ts";
import type { PluginFacts } from "./plugins.ts";
import { problem } from "./problem.ts";
import { windowRules } from "./window-rules.ts";

export interface RouteCheckDeps {
  env: Env;
  cwd: string;
}

/** Two match tables can both hold for one event unless some key demands two different values. */
function matchesOverlap(a: RouteConfig["match"], b: RouteConfig["match"]): boolean {
  for (const [k, v] of Object.entries(a)) {
    if (Object.hasOwn(b, k) && String(b[k]) !== String(v)) return false;
  }
  return true;
}

/** Every action and route destination resolves; a source no route fully claims has an action. */
function destinationRules(
  config: Config,
  flows: Flow[],
  plugins: Map<string, PluginFacts>,
  deps: RouteCheckDeps,
): ConfigProblem[] {
  const out: ConfigProblem[] = [];
  for (const f of flows) {
    if (f.destination === null) {
      if (plugins.get(f.source)?.dynamicAction) continue;
      if (f.route !== null) {
        out.push(
          problem(
            "error",
            `${f.key}.destination`,
            `route ${f.name} has no destination and source ${f.source} has no action`,
            "set the route's destination or the source's action",
          ),
        );
        continue;
      }
      // The implicit route is reached only when no non-tee route claims the event.
      const catchAll = config.routes.some((r) => r.source === f.source && !r.tee && Object.keys(r.match).length === 0);
      if (catchAll) continue;
      const src = config.sources[f.source];
      const takesRequests = Boolean(src.module || src.template) && src.kind !== "poll";
      if (takesRequests)
        out.push(
          problem(
            "error",
            f.destinationKey,
            "events no route claims have nowhere to go",
            "set action, or add a route with no match and a destination",
          ),
        );
      else
        out.push(
          problem(
            "warning",
            f.destinationKey,
            "no action: hookspool enqueue needs --destination for this source",
            "set action",
          ),
        );
      continue;
    }
    const why = destinationProblem(config, f.destination);
    if (why)
      out.push(
        problem(
          "error",
          f.destinationKey,
          `${f.fromPlugin ? "the plugin's action " : ""}destination "${f.destination}": ${why}`,
        ),
      );
  }
  const names = new Set<string>(Object.keys(config.destinations));
  for (const f of flows)
    if (f.destination !== null && destinationType(config, f.destination) !== null) names.add(f.destination);
  for (const name of names) {
    const type = destinationType(config, name);
    if (type === "module") {
      out.push(
        problem(
          "error",
          `${destinationKey(name)}.module`,
          "module destinations are not in this build",
          'use type = "http", hermes:<route> or script:<name>',
        ),
      );
      continue;
    }
    // Hermes destinations are checked by hermesRules, which reads the gateway's file once and
    // reports a file problem once rather than per destination.
    if (type === null || type === "hermes") continue;
    const d = makeDestination(config, name, { env: deps.env, clock: systemClock, instanceId: "check" });
    for (const msg of d?.check() ?? []) {
      // event_header / dedup_header are reported by headerRules at their own keys.
      if (/^(event_header|dedup_header) /.test(msg)) continue;
      out.push(problem("error", destinationKey(name), msg));
    }
  }
  return out;
}

/** One event never reaches one destination twice, and at most 8 tees per source. */
function teeRules(config: Config, flows: Flow[], plugins: Map<string, PluginFacts>): ConfigProblem[] {
  const out: ConfigProblem[] = [];
  const bySource = new Map<string, Flow[]>();
  for (const f of flows) if (f.route !== null) bySource.set(f.source, [...(bySource.get(f.source) ?? []), f]);
  for (const [source, routes] of bySource) {
    const sourceAction = actionOf(config, source, plugins).action;
    const primaries = new Set(
      routes.filter((f) => !f.route?.tee && f.destination !== null).map((f) => f.destination as string),
    );
    const tees: Flow[] = [];
    for (const f of routes) {
      const route = f.route as RouteConfig;
      if (!route.tee) continue;
      const key = `${f.key}.destination`;
      if (route.destination === undefined) {
        out.push(problem("error", key, "a tee route needs a destination"));
        continue;
      }
      const dest = route.destination;
      if (dest === sourceAction)
        out.push(
          problem(
            "error",
            key,
            `tee destination "${dest}" is source ${source}'s action: an event would reach it twice`,
            "tee to another destination",
          ),
        );
      else if (primaries.has(dest))
        out.push(
          problem(
            "error",
            key,
            `tee destination "${dest}" is also a non-tee route's destination on source ${source}`,
            "tee to another destination",
          ),
        );
      const earlier = tees.find(
        (t) => t.route?.destination === dest && matchesOverlap((t.route as RouteConfig).match, route.match),
      );
      if (earlier)
        out.push(
          problem(
            "error",
            key,
            `tee destination "${dest}" is also the destination of tee route ${earlier.name}, ` +
              "and one event can match both",
            "merge the two tee routes or make their matches exclusive",
          ),
        );
      tees.push(f);
      if (tees.length === MAX_TEES + 1)
        out.push(
          problem(
            "error",
            f.key,
            `source ${source} has more than ${MAX_TEES} tee routes`,
            `at most ${MAX_TEES} copies of one event are made`,
          ),
        );
    }
  }
  return out;
}

function headerProblem(key: string, name: string, from = ""): ConfigProblem | null {
  if (HOOKSPOOL_HEADERS.has(name.toLowerCase()))
    return problem(
      "error",
      key,
      `${from}${name} is a header hookspool sets`,
      "name the sender's own header, e.g. X-GitHub-Event",
    );
  if (isReservedHeader(name))
    return problem("error", key, `${from}${name} is a framing header the HTTP client sets`, "name another header");
  if (!validHeaderName(name)) return problem("error", key, `${from}${name} is not a valid header name`);
  return null;
}

/** event_header and dedup_header may not name a header hookspool sets. */
function headerRules(config: Config, plugins: Map<string, PluginFacts>): ConfigProblem[] {
  const out: (ConfigProblem | null)[] = [];
  for (const [name, src] of Object.entries(config.sources)) {
    const key = `${sourceKey(name)}.event_header`;
    if (src.event_header !== undefined) out.push(headerProblem(key, src.event_header));
    else if (plugins.get(name)?.eventHeader)
      out.push(headerProblem(key, plugins.get(name)?.eventHeader as string, "the plugin's eventHeader "));
  }
  for (const [name, d] of Object.entries(config.destinations)) {
    if (d.event_header !== undefined) out.push(headerProblem(`${destinationKey(name)}.event_header`, d.event_header));
    if (d.dedup_header !== undefined) out.push(headerProblem(`${destinationKey(name)}.dedup_header`, d.dedup_header));
  }
  return out.filter((p): p is ConfigProblem => p !== null);
}

/**
 * A stale rule on a source whose plugin reads no version could judge nothing: an error at the
 * route's (or the source's) own stale key. The loader already refuses one on a template or poll
 * source; this is the code source's, whose plugin says (a version function) once loaded. A pull
 * source's events keep the versions they had upstream.
 */
function staleRules(config: Config, plugins: Map<string, PluginFacts>): ConfigProblem[] {
  const out: ConfigProblem[] = [];
  const unversioned = (source: string) => {
    const src = config.sources[source];
    const facts = plugins.get(source);
    return src !== undefined && src.pull === undefined && facts !== undefined && !facts.versioned;
  };
  const refuse = (key: string, rule: string, source: string) =>
    out.push(
      problem(
        "error",
        `${key}.stale`,
        `stale = "${rule}" needs a version, and source ${source} reads none`,
        "give the source's plugin a version() (the sender's own time for an event), or remove stale",
      ),
    );
  for (const [name, src] of Object.entries(config.sources))
    if ((src.stale === "mark" || src.stale === "skip") && unversioned(name)) refuse(sourceKey(name), src.stale, name);
  config.routes.forEach((r, i) => {
    if (r.instance === undefined && (r.stale === "mark" || r.stale === "skip") && unversioned(r.source))
      refuse(`routes[${i}]`, r.stale, r.source);
  });
  return out;
}

/** Every route rule (this file's, the window's and the gateway's), over a config whose plugins are loaded. */
export function routeProblems(
  config: Config,
  plugins: Map<string, PluginFacts>,
  deps: RouteCheckDeps,
): ConfigProblem[] {
  const flows = flowsOf(config, plugins);
  return [
    ...destinationRules(config, flows, plugins, deps),
    ...teeRules(config, flows, plugins),
    ...windowRules(config, flows, plugins),
    ...headerRules(config, plugins),
    ...staleRules(config, plugins),
    ...hermesRules(config, flows, deps),
  ];
}

/** The pace of every destination the config names (hermes: from the gateway's subscriptions file). */
export function destinationPaces(config: Config, env: Env): Record<string, Pace | null> {
  const out: Record<string, Pace | null> = {};
  for (const name of [...configuredDestinations(config)].sort())
    if (destinationType(config, name) !== null) out[name] = destinationPace(config, name, env);
  return out;
}
