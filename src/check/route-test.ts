// `hookspool route test`: stored requests through the routing of a config (the current one or a
// candidate), compared with what each request became when it arrived. Nothing is written: the
// authoring loop for routes is change the file, see the effect on last week's deliveries, then
// reload.
import { jsonText } from "../store/content.ts";
import { compileExpose, exposePayload } from "../config/expose.ts";
import { eventCopies, type IntakeSource } from "../config/sources.ts";
import type { Config } from "../config/types.ts";
import { isHookspoolError } from "../errors.ts";
import { hookRequest } from "../plugin/hook-request.ts";
import type { StoredRequestRow } from "../store/requests.ts";

export const CHANGE_KINDS = [
  "route",
  "destination",
  "tees",
  "window",
  "ignored",
  "no_destination",
  "source_gone",
] as const;
export type ChangeKind = (typeof CHANGE_KINDS)[number];

export interface CopyView {
  route: string;
  destination: string;
  window: { quiet_s: number; max_s: number; max_events: number; max_bytes: number };
  /** The copy's route exposes only these paths (routed under the config tested). */
  expose?: string[];
  /** With expose: the event as it would be delivered, JSON text. */
  delivered?: string;
}

/** The event a copy delivers when its route sets expose: the payload narrowed to those paths. */
export function exposedView(
  paths: readonly string[] | undefined,
  payload: string,
): Pick<CopyView, "expose" | "delivered"> {
  return paths ? { expose: [...paths], delivered: exposePayload(payload, compileExpose(paths)).text } : {};
}

export interface RouteChange {
  /** The first event row of the request. */
  event: number;
  source: string;
  eventType: string;
  kinds: ChangeKind[];
  before: CopyView[];
  /** The copies under the config tested, or why there are none. */
  after: CopyView[] | { ignored: string } | { error: string };
}

export interface RouteTestReport {
  requests: number;
  unchanged: number;
  counts: Record<ChangeKind, number>;
  changes: RouteChange[];
}

const sameWindow = (a: CopyView["window"], b: CopyView["window"]) =>
  a.quiet_s === b.quiet_s && a.max_s === b.max_s && a.max_events === b.max_events && a.max_bytes === b.max_bytes;
const pair = (c: CopyView) => `${c.route}\u0000${c.destination}`;

/** What one request becomes under `config`: its copies, or why none. */
function route(
  config: Config,
  sources: ReadonlyMap<string, IntakeSource>,
  r: StoredRequestRow,
): CopyView[] | { ignored: string } | { error: string } | "source_gone" {
  const src = sources.get(r.source);
  if (!src && !config.sources[r.source]) return "source_gone";
  const body = r.raw && r.raw.length > 0 ? r.raw : new TextEncoder().encode(r.payload);
  const req = hookRequest({
    method: "POST",
    url: `/hooks/${encodeURIComponent(r.source)}`,
    headers: Object.entries(r.headers),
    body,
    peer: "route-test",
    now: r.receivedAt,
  });
  let payload: unknown;
  try {
    payload = JSON.parse(jsonText(r.payload));
  } catch {
    payload = {};
  }
  try {
    const ignored = src?.plugin.ignore?.(req);
    if (ignored) return { ignored: String(ignored) };
    return eventCopies(config, r.source, src, { payload, req, eventType: r.eventType }).copies.map((c) => ({
      route: c.route,
      destination: c.destination,
      window: { ...c.window },
      ...exposedView(c.trace.expose?.paths, r.payload),
    }));
  } catch (e) {
    if (isHookspoolError(e, "E_CONFIG")) return { error: "no destination" };
    return { error: `plugin error (${e instanceof Error ? e.name : typeof e})` };
  }
}

/** Every stored request through `config`'s routing, against what it became. */
export function routeTest(
  config: Config,
  sources: ReadonlyMap<string, IntakeSource>,
  requests: readonly StoredRequestRow[],
): RouteTestReport {
  const counts = Object.fromEntries(CHANGE_KINDS.map((k) => [k, 0])) as Record<ChangeKind, number>;
  const changes: RouteChange[] = [];
  for (const r of requests) {
    const before: CopyView[] = r.copies.map((c) => ({ route: c.route, destination: c.destination, window: c.window }));
    const result = route(config, sources, r);
    const kinds: ChangeKind[] = [];
    let after: RouteChange["after"];
    if (result === "source_gone") {
      kinds.push("source_gone");
      after = { error: "no such source" };
    } else if ("ignored" in result) {
      kinds.push("ignored");
      after = result;
    } else if ("error" in result) {
      kinds.push("no_destination");
      after = result;
    } else {
      after = result;
      const [was, now] = [before[0], result[0]];
      if (was && now && was.route !== now.route) kinds.push("route");
      if (was && now && was.destination !== now.destination) kinds.push("destination");
      const tees = (list: CopyView[]) => new Set(list.slice(1).map(pair));
      const [t0, t1] = [tees(before), tees(result)];
      if (t0.size !== t1.size || [...t0].some((t) => !t1.has(t))) kinds.push("tees");
      // A window changed for a copy that went the same way.
      const windows = new Map(result.map((c) => [pair(c), c.window]));
      if (before.some((c) => windows.has(pair(c)) && !sameWindow(c.window, windows.get(pair(c)) as CopyView["window"])))
        kinds.push("window");
    }
    for (const k of kinds) counts[k]++;
    if (kinds.length)
      changes.push({ event: r.copies[0].eventId, source: r.source, eventType: r.eventType, kinds, before, after });
  }
  return { requests: requests.length, unchanged: requests.length - changes.length, counts, changes };
}
