// The stripe-events sweep's list: Stripe's List Events with delivery_success=false, the events
// of the last days that are still pending or that failed every attempt to one of the account's
// webhook endpoints, newest first, 100 a page through starting_after and has_more. Stripe keeps
// events for 30 days. With --endpoint it keeps only the types that endpoint is subscribed to
// (its enabled_events), since the list covers every endpoint of the account.
import type { EventsApiSection } from "../bobbin/manifest.ts";
import { HookspoolError } from "../errors.ts";
import { type Http, tryJson } from "../net/http.ts";
import type { Pacer } from "../net/pace.ts";
import { authHeader, listEventsApi, type ListReport, RateLimited, rateLimitText } from "./events-api.ts";
import type { ListedEvent } from "./land.ts";

/** Stripe returns the events of the last 30 days, and no older ones. */
export const STRIPE_KEEPS_S = 30 * 86400;

/**
 * The List Events call as an events-api list: HTTP Basic with the key as the user name,
 * `created[gte]` in Unix seconds, `data` and `has_more`, the page's last id as `starting_after`.
 */
export const STRIPE_EVENTS: EventsApiSection = {
  url: "https://api.stripe.com",
  path: "/v1/events",
  query: { delivery_success: "false", limit: "100" },
  args: {},
  auth: "basic",
  items: "data",
  payload: "",
  id: "id",
  headers: {},
  since_param: "created[gte]",
  since_format: "unix",
  time: "created",
  cursor_param: "starting_after",
  cursor_value: "last:id",
  more: "has_more",
  // Stripe allows 25 requests a second to one endpoint in a sandbox (100 in live mode, across
  // the account): 5 leaves the account's own traffic nearly all of it.
  per_s: 5,
  keeps_s: STRIPE_KEEPS_S,
};

export interface StripeListOptions {
  http: Http;
  apiUrl: string;
  key: string;
  since: number;
  /** A webhook endpoint (we_...): keep only the event types it is subscribed to. */
  endpoint?: string;
  now: () => number;
  pacer?: Pacer;
  maxPages?: number;
}

export interface StripeListReport extends ListReport {
  /** Event ids of types the endpoint is not subscribed to (with --endpoint). */
  notForEndpoint: string[];
}

const KEY_HINT =
  "the instance's secrets.api_key needs a Stripe secret key, or a restricted key with read access to Events " +
  "(and to Webhook Endpoints for --endpoint)";

/** The event types an endpoint is subscribed to; null for every type ("*"). */
async function enabledEvents(o: StripeListOptions): Promise<Set<string> | null> {
  const [name, value] = authHeader("basic", o.key);
  const url = `${o.apiUrl.replace(/\/+$/, "")}/v1/webhook_endpoints/${encodeURIComponent(o.endpoint ?? "")}`;
  await o.pacer?.wait();
  const r = await o.http.request("GET", url, {
    headers: { accept: "application/json", [name]: value, "user-agent": "hookspool-sweep" },
    timeoutS: 30,
  });
  if (r.status === 429) throw new RateLimited(rateLimitText("Stripe", r, o.now()));
  if (r.status === 401 || r.status === 403)
    throw new HookspoolError("E_CONFIG", `Stripe refused the sweep's key (http ${r.status})`, { hint: KEY_HINT });
  if (r.status === 404)
    throw new HookspoolError("E_NOT_FOUND", `Stripe knows no webhook endpoint ${o.endpoint} (http 404)`, {
      hint: "--endpoint is the we_... id on the endpoint's page in Workbench",
    });
  const body = tryJson(r.text) as { enabled_events?: unknown } | undefined;
  if (r.status < 200 || r.status > 299 || !Array.isArray(body?.enabled_events))
    throw new Error(`Stripe: reading the webhook endpoint: http ${r.status}`);
  const types = body.enabled_events.filter((t): t is string => typeof t === "string");
  return types.includes("*") ? null : new Set(types);
}

export async function listStripeEvents(o: StripeListOptions): Promise<StripeListReport> {
  let types: Set<string> | null = null;
  try {
    if (o.endpoint) types = await enabledEvents(o);
  } catch (e) {
    if (!(e instanceof RateLimited)) throw e;
    return { events: [], pages: 0, stopped: e.message, notForEndpoint: [] };
  }
  const listed = await listEventsApi({
    http: o.http,
    apiUrl: o.apiUrl,
    spec: STRIPE_EVENTS,
    args: {},
    key: o.key,
    since: o.since,
    vendor: "Stripe",
    keyHint: KEY_HINT,
    now: o.now,
    pacer: o.pacer,
    maxPages: o.maxPages,
  });
  if (types === null) return { ...listed, notForEndpoint: [] };
  const kept: ListedEvent[] = [];
  const notForEndpoint: string[] = [];
  for (const e of listed.events) {
    const type = (e.payload as { type?: unknown } | null)?.type;
    if (typeof type === "string" && types.has(type)) kept.push(e);
    else notForEndpoint.push(e.id ?? "(no id)");
  }
  return { ...listed, events: kept, notForEndpoint };
}
