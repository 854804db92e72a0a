// Per-field window inheritance: route -> source -> span preset -> [coalesce].
import type { Config, PartialWindow, Window } from "./types.ts";

const FIELDS = ["quiet_s", "max_s", "max_events", "max_bytes"] as const;

/**
 * The window a new batch of `route` (null: the implicit route) for `source` opens with.
 * `pluginSpan` is the span the source plugin names when config does not set one.
 */
export function windowFor(config: Config, sourceName: string, routeName: string | null, pluginSpan?: string): Window {
  const source = config.sources[sourceName];
  const route = routeName === null ? undefined : config.routes.find((r) => r.name === routeName);
  const spanName = source?.span ?? pluginSpan;
  const span: PartialWindow | undefined = spanName ? config.spans[spanName] : undefined;
  const out = { ...config.coalesce };
  for (const f of FIELDS) {
    const v = route?.[f] ?? source?.[f] ?? span?.[f] ?? config.coalesce[f];
    out[f] = v;
  }
  return out;
}

/** Where a copy's quiet window came from: its route, its source, the span preset, or [coalesce]. */
export function windowFrom(
  config: Config,
  sourceName: string,
  routeName: string | null,
  pluginSpan?: string,
): "route" | "source" | "span" | "default" {
  const source = config.sources[sourceName];
  const route = routeName === null ? undefined : config.routes.find((r) => r.name === routeName);
  const spanName = source?.span ?? pluginSpan;
  if (route?.quiet_s !== undefined) return "route";
  if (source?.quiet_s !== undefined) return "source";
  if (spanName && config.spans[spanName]?.quiet_s !== undefined) return "span";
  return "default";
}

/** The window of a span preset over the config's coalesce defaults (a processor's outputs: immediate). */
export function spanWindow(config: Config, spanName: string): Window {
  const span: PartialWindow | undefined = config.spans[spanName];
  const out = { ...config.coalesce };
  for (const f of FIELDS) out[f] = span?.[f] ?? config.coalesce[f];
  return out;
}
