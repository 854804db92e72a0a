// hookspool check, the rules about where events go: every action and route destination
// resolves, each destination's own check(), the tee rules, window bounds against the receiver's
// cap, header names, and the Hermes gateway's subscriptions file.
import { existsSync } from "node:fs";
import { worstMetaBytes } from "../store/content.ts";
import { MAX_KEY_BYTES } from "../store/enqueue.ts";
import { systemClock } from "../clock.ts";
import { readRoute } from "../destinations/hermes.ts";
import { destinationPace, makeDestination } from "../destinations/registry.ts";
import { HOOKSPOOL_HEADERS, isReservedHeader, usableSecret, validHeaderName } from "../destinations/signing.ts";
import {
  configuredDestinations,
  destinationProblem,
  destinationSettings,
  destinationType,
} from "../config/destinations.ts";
import type { Pace } from "../delivery.ts";
import { type Env, expandPath } from "../config/load.ts";
import { quoteKey } from "../config/parse.ts";
import { MAX_TEES } from "../config/routes.ts";
import type { Config, ConfigProblem, RouteConfig } from "../config/types.ts";
import { windowFor } from "../config/windows.ts";
import type { PluginFacts } from "./plugins.ts";

export interface RouteCheckDeps {
  env: Env;
  cwd: string;
}

/** One way an event reaches a destination: a [[routes]] entry, or a source's implicit route. */
interface Flow {
  source: string;
  route: RouteConfig | null;
  /** routes[i] or sources.<name>: where this route is configured. */
  key: string;
  /** The route name batches carry (the source's name for the implicit route). */
  name: string;
  destination: string | null;
  /** The key that names the destination: routes[i].destination or sources.<name>.action. */
  destinationKey: string;
  /** The destination is the plugin's action, not something config says. */
  fromPlugin: boolean;
}

const problem = (level: ConfigProblem["level"], key: string, message: string, hint?: string): ConfigProblem => ({
  level,
  key,
  message,
  hint,
});
const sourceKey = (name: string) => `sources.${quoteKey(name)}`;
const destinationKey = (name: string) => `destinations.${quoteKey(name)}`;

/** A source's action: config, else the plugin's, else a bobbin instance's "*" output. */
function actionOf(
  config: Config,
  source: string,
  plugins: Map<string, PluginFacts>,
): { action: string | null; fromPlugin: boolean } {
  const configured = Object.hasOwn(config.sources, source) ? config.sources[source].action : undefined;
  if (configured !== undefined) return { action: configured, fromPlugin: false };
  const plugin = plugins.get(source)?.action;
  if (plugin !== undefined) return { action: plugin, fromPlugin: true };
  const bobbin = Object.hasOwn(config.bobbins, source) ? config.bobbins[source].outputs?.["*"] : undefined;
  return { action: bobbin ?? null, fromPlugin: false };
}

function flowsOf(config: Config, plugins: Map<string, PluginFacts>): Flow[] {
  const flows: Flow[] = [];
  for (const name of Object.keys(config.sources)) {
    const { action, fromPlugin } = actionOf(config, name, plugins);
    flows.push({
      source: name,
      route: null,
      key: sourceKey(name),
      name,
      destination: action,
      destinationKey: `${sourceKey(name)}.action`,
      fromPlugin,
    });
  }
  config.routes.forEach((route, i) => {
    const { action, fromPlugin } = actionOf(config, route.source, plugins);
    const own = route.destination !== undefined;
    flows.push({
      source: route.source,
      route,
      key: `routes[${i}]`,
      name: route.name,
      destination: own ? (route.destination as string) : action,
      destinationKey: own ? `routes[${i}].destination` : `${sourceKey(route.source)}.action`,
      fromPlugin: !own && fromPlugin,
    });
  });
  return flows;
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
            `tee destination "${dest}" is also the destination of tee route ${earlier.name}, and one event can match both`,
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

/** Where a window field's value comes from: the key an operator edits to change it. */
function windowKey(config: Config, f: Flow, field: "max_bytes" | "quiet_s" | "max_s"): string {
  if (f.route?.[field] !== undefined) return `${f.key}.${field}`;
  const src = Object.hasOwn(config.sources, f.source) ? config.sources[f.source] : undefined;
  if (src?.[field] !== undefined) return `${sourceKey(f.source)}.${field}`;
  return `coalesce.${field}`;
}

/** What a batch document's head (its ids, key, counts and summary) may take beside its events. */
const DOCUMENT_HEAD_BYTES = 4096 + 2 * MAX_KEY_BYTES;

/**
 * quiet_s <= max_s (warning), max_bytes <= 0.75 x the receiver's max_body_bytes, and no single
 * event larger than max_bytes; with unwrap, every event within the destination's cap and no
 * coalescing (warning); dedup window vs retention (warning).
 */
function windowRules(config: Config, flows: Flow[], plugins: Map<string, PluginFacts>): ConfigProblem[] {
  const out: ConfigProblem[] = [];
  for (const [name, src] of Object.entries(config.sources)) {
    const span = src.span ?? plugins.get(name)?.span;
    const w = windowFor(config, name, null, span);
    // The same words as validate.ts, so a warning both find is printed once.
    if (w.quiet_s > w.max_s)
      out.push(
        problem(
          "warning",
          sourceKey(name),
          `quiet_s (${w.quiet_s}) > max_s (${w.max_s}): the quiet window can never fire`,
        ),
      );
    if (src.dedup_window_s > config.retention.delivered_days * 86400) {
      out.push(
        problem(
          "warning",
          `${sourceKey(name)}.dedup_window_s`,
          "the dedup window is longer than retention.delivered_days",
          "an id may outlive the event it points at; that is allowed but check says so",
        ),
      );
    }
  }
  for (const f of flows) {
    const span = Object.hasOwn(config.sources, f.source)
      ? (config.sources[f.source].span ?? plugins.get(f.source)?.span)
      : undefined;
    const w = windowFor(config, f.source, f.route?.name ?? null, span);
    if (f.route && (f.route.quiet_s !== undefined || f.route.max_s !== undefined) && w.quiet_s > w.max_s) {
      out.push(
        problem("warning", f.key, `quiet_s (${w.quiet_s}) > max_s (${w.max_s}): the quiet window can never fire`),
      );
    }
    const s = f.destination === null ? null : destinationSettings(config, f.destination);
    if (s === null) continue;
    const cap = s.max_body_bytes;
    const unwrap = (s.type === "hermes" || s.type === "http") && (s.table?.unwrap ?? false);
    const src = Object.hasOwn(config.sources, f.source) ? config.sources[f.source] : undefined;
    const bobbin = Object.hasOwn(config.bobbins, f.source) ? config.bobbins[f.source] : undefined;
    const bodyCap = src?.max_body_bytes ?? bobbin?.max_body_bytes ?? config.intake.max_body_bytes;
    const bodyKey =
      src?.max_body_bytes !== undefined
        ? `${sourceKey(f.source)}.max_body_bytes`
        : bobbin?.max_body_bytes !== undefined
          ? `bobbins.${quoteKey(f.source)}.max_body_bytes`
          : "intake.max_body_bytes";
    const to = `route ${f.name} -> ${s.name}`;
    if (unwrap) {
      // Unwrap: the receiver gets each stored payload on its own, so the cap is per event.
      if (Number.isFinite(cap) && bodyCap > cap) {
        out.push(
          problem(
            "error",
            bodyKey,
            `${to}: source ${f.source} accepts bodies up to ${bodyCap} bytes, more than the destination's max_body_bytes (${cap}); it unwraps, so each event must fit`,
            `lower ${bodyKey} to <= ${cap} or raise ${destinationKey(s.name)}.max_body_bytes`,
          ),
        );
      }
      if (w.quiet_s > 0 || w.max_s > 0) {
        out.push(
          problem(
            "warning",
            f.key,
            `${to}: the destination unwraps (one request per event) but the route coalesces (quiet_s ${w.quiet_s}, max_s ${w.max_s}); the receiver gets each batch as a burst`,
            'use span = "immediate", quiet_s = max_s = 0, for a route to an unwrap destination',
          ),
        );
      }
      continue;
    }
    // A script has no receiver cap (Infinity): no document can be refused for its size.
    if (!Number.isFinite(cap)) continue;
    const limit = Math.floor(cap * 0.75);
    if (w.max_bytes > limit) {
      const key = windowKey(config, f, "max_bytes");
      out.push(
        problem(
          "error",
          key,
          `${to}: max_bytes ${w.max_bytes} is over 3/4 of the destination's max_body_bytes (${cap}); a batch document could be refused`,
          `set max_bytes <= ${limit} or raise ${destinationKey(s.name)}.max_body_bytes`,
        ),
      );
    }
    // A batch of one event carries its body and its event_meta (kept headers and all) under the head.
    const worst =
      bodyCap +
      worstMetaBytes(plugins.get(f.source)?.keepHeaders ?? src?.keep_headers?.length ?? 0) +
      DOCUMENT_HEAD_BYTES;
    if (worst > cap) {
      out.push(
        problem(
          "error",
          bodyKey,
          `${to}: one event of source ${f.source} can make a document of ${worst} bytes (a body of ${bodyCap}, its event_meta at its largest, the document's head), more than the destination's max_body_bytes (${cap})`,
          `lower ${bodyKey}, keep fewer headers, or raise ${destinationKey(s.name)}.max_body_bytes`,
        ),
      );
    }
    if (bodyCap > w.max_bytes) {
      out.push(
        problem(
          "error",
          bodyKey,
          `${to}: source ${f.source} accepts bodies up to ${bodyCap} bytes, more than the route's max_bytes (${w.max_bytes}); one event could overflow the document`,
          `set ${sourceKey(f.source)}.max_body_bytes <= ${w.max_bytes}, or raise the route's max_bytes and the destination's cap with it`,
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

/** Whether a gateway route's events filter or coalesce option is on (as hermes.ts reads it). */
function isSet(v: unknown): boolean {
  if (v === undefined || v === null || v === false || v === 0 || v === "") return false;
  if (Array.isArray(v)) return v.length > 0;
  return true;
}

/**
 * Every hermes:<route> destination something feeds must be a route of the
 * gateway's subscriptions file, with its own events filter and coalescing off unless the
 * destination unwraps. The file is read only when some hermes destination is in use.
 */
function hermesRules(config: Config, flows: Flow[], deps: RouteCheckDeps): ConfigProblem[] {
  const fed = new Set<string>();
  for (const f of flows)
    if (f.destination !== null && destinationType(config, f.destination) === "hermes") fed.add(f.destination);
  if (fed.size === 0) return [];
  const out: ConfigProblem[] = [];
  let base: URL | null = null;
  try {
    base = new URL(config.hermes.base_url);
  } catch {
    // reported below
  }
  if (base === null || (base.protocol !== "http:" && base.protocol !== "https:"))
    out.push(problem("error", "hermes.base_url", `"${config.hermes.base_url}" is not an http(s) URL`));
  const path = expandPath(config.hermes.subscriptions_path, deps.cwd, deps.env);
  const routes = [...fed].map((name) => name.slice("hermes:".length));
  if (!existsSync(path)) {
    // Hermes not set up yet (or not on this host yet): what is spooled waits for it, retried.
    out.push(
      problem(
        "warning",
        "hermes.subscriptions_path",
        `no file at ${path} yet: the gateway writes it when its first webhook route is made`,
        `on the gateway's host: ${routes.map((r) => `hermes webhook subscribe ${r}`).join("; ")} (until then deliveries to ${routes.length === 1 ? "it" : "them"} wait and are retried)`,
      ),
    );
    return out;
  }
  for (const name of fed) {
    const route = name.slice("hermes:".length);
    // A hermes:<route> needs no table: a problem with it is said where the operator named it.
    const key = Object.hasOwn(config.destinations, name)
      ? destinationKey(name)
      : (flows.find((f) => f.destination === name)?.destinationKey ?? destinationKey(name));
    const r = readRoute(path, route);
    if ("kind" in r) {
      // A file-wide problem is reported once, at the key that names the file.
      const fileWide = r.detail.startsWith("hermes.subscriptions_path");
      out.push(
        fileWide
          ? problem(
              "error",
              "hermes.subscriptions_path",
              r.detail.replace(/^hermes\.subscriptions_path /, ""),
              "point it at the gateway's webhook_subscriptions.json",
            )
          : problem(
              "error",
              key,
              r.detail,
              `on the gateway's host: hermes webhook subscribe ${route}; or fix the destination name`,
            ),
      );
      continue;
    }
    if (!usableSecret(r.secret))
      out.push(problem("error", key, `route "${route}" in ${path}: the secret is not valid whsec_ base64`));
    if (config.destinations[name]?.unwrap) continue;
    for (const field of ["events", "coalesce"] as const) {
      if (isSet(r[field])) {
        out.push(
          problem(
            "error",
            key,
            `route "${route}" sets ${field} in ${path}; hookspool already filters and coalesces what it sends`,
            `remove ${field} from the gateway route, or set unwrap = true on [destinations."${name}"]`,
          ),
        );
      }
    }
  }
  return out;
}

/** Every rule of this file, over a config whose plugins are already loaded. */
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
