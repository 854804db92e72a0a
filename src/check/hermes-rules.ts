// hookspool check, the Hermes gateway: every hermes:<route> destination something feeds is a
// route of the gateway's subscriptions file, with a usable secret, and with its own events filter
// and coalescing off unless the destination unwraps.
import { existsSync } from "node:fs";
import { destinationType } from "../config/destinations.ts";
import { expandPath } from "../config/load.ts";
import type { Config, ConfigProblem } from "../config/types.ts";
import { readRoute } from "../destinations/hermes.ts";
import { usableSecret } from "../destinations/signing.ts";
import { destinationKey, type Flow } from "./flows.ts";
import { problem } from "./problem.ts";
import type { RouteCheckDeps } from "./routes.ts";

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
export function hermesRules(config: Config, flows: Flow[], deps: RouteCheckDeps): ConfigProblem[] {
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
        `on the gateway's host: ${routes.map((r) => `hermes webhook subscribe ${r}`).join("; ")} ` +
          `(until then deliveries to ${routes.length === 1 ? "it" : "them"} wait and are retried)`,
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
