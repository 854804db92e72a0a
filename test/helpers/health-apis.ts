// Stand-ins on 127.0.0.1 for the provider calls the health probes make, answering as each
// provider's pages say. GitHub's Get a repository webhook (Bearer; the hook with `active` and
// `last_response` {code, status, message}; 404 for a hook that is gone). Stripe's Retrieve a
// webhook endpoint (HTTP Basic with the key as the user name; `status` enabled or disabled; 404
// with an error object for an endpoint that is gone). Shopify's GraphQL Admin API (POST
// /admin/api/<version>/graphql.json with X-Shopify-Access-Token; the webhookSubscription query
// answers null for a subscription Shopify deleted). Each answers 401 to a wrong key and 429 while
// `limited` is set, and records what it saw.
export interface HealthApiState {
  github: Record<
    string,
    { active: boolean; last_response: { code: number | null; status: string; message: string | null } }
  >;
  stripe: Record<string, { status: "enabled" | "disabled"; url: string }>;
  shopify: Record<string, { topic: string; uri: string }>;
  limited: boolean;
}

export interface SeenProbe {
  method: string;
  path: string;
  authorized: boolean;
  /** Every header value as sent (to check where the key went). */
  headers: string[];
  body: string;
}

export interface HealthApi {
  url: string;
  state: HealthApiState;
  seen: SeenProbe[];
  stop(): void;
}

const json = (status: number, body: unknown, headers: Record<string, string> = {}) =>
  new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json", ...headers } });

export function startHealthApi(key: string): HealthApi {
  const state: HealthApiState = { github: {}, stripe: {}, shopify: {}, limited: false };
  const seen: SeenProbe[] = [];
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    async fetch(req) {
      const u = new URL(req.url);
      const body = req.method === "POST" ? await req.text() : "";
      const auth = req.headers.get("authorization") ?? "";
      const basic = `Basic ${Buffer.from(`${key}:`).toString("base64")}`;
      const shopifyPath = /^\/admin\/api\/\d{4}-\d{2}\/graphql\.json$/.test(u.pathname);
      const authorized = shopifyPath
        ? req.headers.get("x-shopify-access-token") === key
        : u.pathname.startsWith("/v1/")
          ? auth === basic
          : auth === `Bearer ${key}`;
      seen.push({ method: req.method, path: u.pathname, authorized, headers: [...req.headers.values()], body });
      if (state.limited) return json(429, { message: "rate limited" }, { "retry-after": "30" });
      if (!authorized) return json(401, { message: "Bad credentials" });
      const gh = /^\/repos\/([^/]+\/[^/]+)\/hooks\/(\d+)$/.exec(u.pathname);
      if (gh && req.method === "GET") {
        const hook = state.github[`${decodeURIComponent(gh[1])}#${gh[2]}`];
        if (!hook) return json(404, { message: "Not Found" });
        return json(200, { type: "Repository", id: Number(gh[2]), name: "web", ...hook, events: ["push"] });
      }
      const we = /^\/v1\/webhook_endpoints\/([A-Za-z0-9_]+)$/.exec(u.pathname);
      if (we && req.method === "GET") {
        const ep = state.stripe[we[1]];
        if (!ep)
          return json(404, {
            error: {
              code: "resource_missing",
              message: `No such webhook endpoint: '${we[1]}'`,
              type: "invalid_request_error",
            },
          });
        return json(200, { id: we[1], object: "webhook_endpoint", enabled_events: ["*"], livemode: false, ...ep });
      }
      if (shopifyPath && req.method === "POST") {
        const q = JSON.parse(body) as { query: string; variables: { id: string } };
        if (!q.query.includes("webhookSubscription(id: $id)"))
          return json(200, { errors: [{ message: "unexpected query" }] });
        const sub = state.shopify[q.variables.id];
        return json(200, { data: { webhookSubscription: sub ? { id: q.variables.id, ...sub } : null } });
      }
      return json(404, { message: "Not Found" });
    },
  });
  return { url: `http://127.0.0.1:${server.port}`, state, seen, stop: () => server.stop(true) };
}
