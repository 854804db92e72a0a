// Route resolution: the first matching non-tee route or the implicit route, plus tees.
import { HookspoolError } from "../errors.ts";
import type { ExposeTrace } from "./expose.ts";
import type { Config, RouteConfig, Window } from "./types.ts";
import { windowFor, windowFrom } from "./windows.ts";

/** At most this many tee copies per event. */
export const MAX_TEES = 8;

/**
 * Why a copy went where it went, stored with it (events.trace). It names attributes, never their
 * values, except the event type: `matched` maps each attribute the rule matched on to its
 * value's kind (string, number, boolean), the event type to itself.
 */
export interface RouteTrace {
  stage: "route" | "implicit" | "tee" | "override" | "emit";
  route: string;
  /** The rule's place among [[routes]] (0 first); null for the implicit route and an override. */
  rule_index: number | null;
  matched: Record<string, string>;
  destination: string;
  window: { quiet_s: number; max_s: number; from: "route" | "source" | "span" | "default" };
  /**
   * The route's expose when the event was routed (absent: the whole payload), and what it left
   * out of this payload (filled in by newEvent). Delivery applies this rule, not the config's.
   */
  expose?: ExposeTrace;
  /**
   * The route's stale rule when the event was routed (absent: off): the delivery applies this
   * one, so a reload never changes what an event's batch does with it (docs/receiving.md).
   */
  stale?: "mark" | "skip";
}

/** One place an event goes: the primary copy first, then tees in file order. */
export interface RouteCopy {
  route: string;
  destination: string;
  tee: boolean;
  window: Window;
  trace: RouteTrace;
}

/** The attributes a rule matched on, as the trace keeps them. */
function matchedOf(route: RouteConfig | undefined, attrs: Attrs): Record<string, string> {
  const out: Record<string, string> = {};
  for (const k of Object.keys(route?.match ?? {})) out[k] = k === "event_type" ? String(attrs[k]) : typeof attrs[k];
  return out;
}

export type Attrs = Record<string, unknown>;

/** A route's match table is a subset of the event's attrs (values compared as text). */
export function routeMatches(route: RouteConfig, attrs: Attrs): boolean {
  for (const [k, want] of Object.entries(route.match)) {
    const have = attrs[k];
    if (have === undefined || have === null || typeof have === "object") return false;
    if (String(have) !== String(want)) return false;
  }
  return true;
}

export interface ResolveOptions {
  /** The plugin's default destination; the source's config `action` overrides it. */
  pluginAction?: string | null;
  /** The plugin's span, used when config does not name one. */
  pluginSpan?: string;
  /** Send the primary copy here instead (hookspool enqueue --destination). */
  destinationOverride?: string;
}

/** The route a destination override makes: never one a config can name (see validate.ts). */
export function overrideRoute(route: string, destination: string): string {
  return `${route}->${destination}`;
}

/** A rule of one source as routing uses it: what config gives it, worked out once per config. */
interface CompiledRule {
  rule: RouteConfig;
  /** Its place among [[routes]] (the trace's rule_index). */
  index: number;
  window: Window;
  from: RouteTrace["window"]["from"];
}

/** One source's routing, worked out when its config is first used (config objects do not change). */
interface SourceRouting {
  rules: CompiledRule[];
  /** The implicit route's window, when no rule matches. */
  implicit: Pick<CompiledRule, "window" | "from">;
}

const compiledRouting = new WeakMap<Config, { routes: readonly RouteConfig[]; bySource: Map<string, SourceRouting> }>();

/**
 * The rules of `source` in file order with their windows resolved, once per (config, source,
 * plugin span): a request then only matches its attrs. A config is never changed in place once
 * loaded (a reload makes a new one); a new routes list (a test's) starts afresh.
 */
function sourceRouting(config: Config, source: string, pluginSpan: string | undefined): SourceRouting {
  let cache = compiledRouting.get(config);
  if (!cache || cache.routes !== config.routes) {
    cache = { routes: config.routes, bySource: new Map() };
    compiledRouting.set(config, cache);
  }
  const key = `${source}\u0000${pluginSpan ?? ""}`;
  let routing = cache.bySource.get(key);
  if (!routing) {
    const rules: CompiledRule[] = [];
    config.routes.forEach((rule, index) => {
      if (rule.source !== source) return;
      rules.push({
        rule,
        index,
        window: windowFor(config, source, rule.name, pluginSpan),
        from: windowFrom(config, source, rule.name, pluginSpan),
      });
    });
    routing = {
      rules,
      implicit: {
        window: windowFor(config, source, null, pluginSpan),
        from: windowFrom(config, source, null, pluginSpan),
      },
    };
    cache.bySource.set(key, routing);
  }
  return routing;
}

/** Where an event of `source` with these attrs goes, primary first. Throws when nowhere. */
export function resolveCopies(config: Config, source: string, attrs: Attrs, opts: ResolveOptions = {}): RouteCopy[] {
  const { rules, implicit } = sourceRouting(config, source, opts.pluginSpan);
  const action = config.sources[source]?.action ?? opts.pluginAction ?? null;
  const chosen = rules.find((c) => !c.rule.tee && routeMatches(c.rule, attrs));
  const route = chosen?.rule.name ?? source;
  const routed = chosen ? (chosen.rule.destination ?? action) : action;
  const window = { ...(chosen ?? implicit).window };
  const trace = (
    stage: RouteTrace["stage"],
    c: CompiledRule | undefined,
    name: string,
    destination: string,
    w: Window,
  ): RouteTrace => {
    // A rule's own expose; the implicit route's is its source's (a bobbin output's, expanded).
    const expose = c ? c.rule.expose : config.sources[source]?.expose;
    // A rule's own stale rule, else its source's (a bobbin instance's, expanded).
    const stale = c?.rule.stale ?? config.sources[source]?.stale;
    return {
      stage,
      route: name,
      rule_index: c ? c.index : null,
      matched: matchedOf(c?.rule, attrs),
      destination,
      window: { quiet_s: w.quiet_s, max_s: w.max_s, from: (c ?? implicit).from },
      ...(expose ? { expose: { paths: [...expose] } } : {}),
      ...(stale === "mark" || stale === "skip" ? { stale } : {}),
    };
  };
  let primary: RouteCopy;
  const override = opts.destinationOverride;
  if (override !== undefined && override !== routed) {
    // An override is a group of its own, with the route's window: joining the route's open
    // batch would deliver the event to the route's destination instead.
    const name = overrideRoute(route, override);
    primary = {
      route: name,
      destination: override,
      tee: false,
      window,
      trace: trace("override", chosen, name, override, window),
    };
  } else {
    if (!routed) throw noDestination(source, route);
    primary = {
      route,
      destination: routed,
      tee: false,
      window,
      trace: trace(chosen ? "route" : "implicit", chosen, route, routed, window),
    };
  }
  const copies = [primary];
  const used = new Set([primary.destination]);
  for (const c of rules) {
    const r = c.rule;
    if (!r.tee || !r.destination || !routeMatches(r, attrs)) continue;
    if (copies.length - 1 >= MAX_TEES) break;
    // Never two copies of one event to one destination.
    if (used.has(r.destination)) continue;
    used.add(r.destination);
    const w = { ...c.window };
    copies.push({
      route: r.name,
      destination: r.destination,
      tee: true,
      window: w,
      trace: trace("tee", c, r.name, r.destination, w),
    });
  }
  return copies;
}

function noDestination(source: string, route: string): HookspoolError {
  return new HookspoolError("E_CONFIG", `route ${route} of source ${source} has no destination`, {
    key: `sources.${source}.action`,
    hint: "set the source's action or the route's destination",
  });
}
