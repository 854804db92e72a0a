// A new event is built one way wherever it comes from (a request at the intake, the operator's
// hookspool enqueue, a script's emit): the source's dedup window and raw-body setting from
// config, its copies from the routing of sources.ts.
import { versionNumber } from "../plugin/event-version.ts";
import { hookRequest } from "../plugin/hook-request.ts";
import { compileExpose, exposePayload, exposeTrace, tracedExpose } from "./expose.ts";
import type { NewEvent } from "../store/enqueue.ts";
import { eventCopies, type IntakeSource } from "./sources.ts";
import type { RouteCopy } from "./routes.ts";
import type { Config } from "./types.ts";

export interface EventFacts {
  source: string;
  key: string;
  eventType: string;
  dedupId: string | null;
  /** The payload's JSON text, stored byte for byte. */
  payload: string;
  /** The body as it arrived, kept when the source stores raw bodies; null when there is none. */
  body: Uint8Array | null;
  /** The source's keep_headers that the request carried. */
  headers?: Record<string, string>;
  /** The payload was produced by JSON.parse or JSON.stringify here (see NewEvent). */
  payloadParsed?: true;
  /** Its version by the provider's clock, as versionNumber gives it; absent or null: none. */
  version?: number | null;
}

/** The event to enqueue for `facts`, placed as `copies`. */
export function newEvent(config: Config, facts: EventFacts, copies: NewEvent["copies"]): NewEvent {
  const src = config.sources[facts.source];
  // Every caller has found the source already; an unknown one here is a bug.
  if (!src) throw new TypeError(`newEvent: no source ${facts.source}`);
  const storeRaw = src.store_raw ?? config.spool.store_raw;
  return {
    source: facts.source,
    key: facts.key,
    eventType: facts.eventType,
    dedupId: facts.dedupId,
    payload: facts.payload,
    raw: storeRaw && facts.body !== null ? facts.body : null,
    headers: facts.headers ?? {},
    copies: copies.map((c) => withDropped(c, facts.payload)),
    dedupWindowS: src.dedup_window_s,
    ...(facts.version !== undefined && facts.version !== null ? { version: facts.version } : {}),
    ...(facts.payloadParsed ? { payloadParsed: true as const } : {}),
  };
}

/**
 * A copy whose route exposes only some paths, its trace saying which of this payload's it left
 * out: names only, never a value.
 */
function withDropped(copy: NewEvent["copies"][number], payload: string): NewEvent["copies"][number] {
  const paths = tracedExpose(copy.trace);
  if (paths === null) return copy;
  const trace = copy.trace as Record<string, unknown>;
  return { ...copy, trace: { ...trace, expose: exposeTrace(paths, exposePayload(payload, compileExpose(paths))) } };
}

const utf8 = new TextEncoder();

/**
 * Where an event that came without a request goes: routed as the intake routes a POST of its
 * payload to the source's hook, so the plugin's attrs, action and span count. What the plugin
 * or the routes throw goes to the caller, which says it in its own terms.
 */
export function injectedCopies(
  config: Config,
  plugins: ReadonlyMap<string, IntakeSource>,
  o: { source: string; payload: string; eventType: string; destinationOverride?: string; peer: string; now: number },
): RouteCopy[] {
  const req = hookRequest({
    method: "POST",
    url: `/hooks/${o.source}`,
    headers: [["content-type", "application/json"]],
    body: utf8.encode(o.payload),
    peer: o.peer,
    now: o.now,
  });
  return eventCopies(config, o.source, plugins.get(o.source), {
    payload: JSON.parse(o.payload),
    req,
    eventType: o.eventType,
    destinationOverride: o.destinationOverride,
  }).copies;
}

/**
 * The version the source's plugin reads from an event that came without a request (an
 * operator's enqueue, a script's emit): from its payload as a POST of it would carry it, so a
 * header: selector finds nothing. Null when the plugin declares none or it throws.
 */
export function injectedVersion(
  plugins: ReadonlyMap<string, IntakeSource>,
  o: { source: string; payload: string; peer: string; now: number },
): number | null {
  const plugin = plugins.get(o.source)?.plugin;
  if (!plugin?.version) return null;
  const req = hookRequest({
    method: "POST",
    url: `/hooks/${o.source}`,
    headers: [["content-type", "application/json"]],
    body: utf8.encode(o.payload),
    peer: o.peer,
    now: o.now,
  });
  try {
    return versionNumber(plugin.version(JSON.parse(o.payload), req));
  } catch {
    return null;
  }
}

/** What a pull source read of one event from the spool it leased from. */
export interface PulledFacts {
  /** The pull source that leased it (whose routes take it when this config has no source of its name). */
  via: string;
  source: string;
  key: string;
  eventType: string;
  dedupId: string;
  payload: string;
  headers: Record<string, string>;
  /** Its version upstream (event_meta's), kept: this spool orders and judges it by the same number. */
  version?: number | null;
  now: number;
}

/**
 * A pulled event, routed as if its webhook had arrived here: by its own source's routes, window
 * and dedup window when this config has a source of that name, else by the pull source's; its
 * source name, key, event type and dedup id are the ones it had upstream either way.
 */
export function pulledEvent(config: Config, plugins: ReadonlyMap<string, IntakeSource>, f: PulledFacts): NewEvent {
  const routedAs = Object.hasOwn(config.sources, f.source) && !config.sources[f.source].pull ? f.source : f.via;
  const copies = injectedCopies(config, plugins, {
    source: routedAs,
    payload: f.payload,
    eventType: f.eventType,
    peer: "pull",
    now: f.now,
  });
  const ev = newEvent(
    config,
    {
      source: routedAs,
      key: f.key,
      eventType: f.eventType,
      dedupId: f.dedupId,
      payload: f.payload,
      body: null,
      headers: f.headers,
      version: f.version ?? null,
    },
    copies,
  );
  return { ...ev, source: f.source };
}
