// hookspool check, the route listing the route rules walk: every way an event reaches a
// destination (each [[routes]] entry and each source's implicit route), and a source's action.
import { quoteKey } from "../config/parse.ts";
import type { Config, RouteConfig } from "../config/types.ts";
import type { PluginFacts } from "./plugins.ts";

/** One way an event reaches a destination: a [[routes]] entry, or a source's implicit route. */
export interface Flow {
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

export const sourceKey = (name: string) => `sources.${quoteKey(name)}`;
export const destinationKey = (name: string) => `destinations.${quoteKey(name)}`;

/** A source's action: config, else the plugin's, else a bobbin instance's "*" output. */
export function actionOf(
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

export function flowsOf(config: Config, plugins: Map<string, PluginFacts>): Flow[] {
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
