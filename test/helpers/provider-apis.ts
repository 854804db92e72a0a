// Stand-ins on 127.0.0.1 for the provider APIs the sweeps read, answering as each provider's
// pages say: Stripe's List Events (HTTP Basic with the key as the user name, `limit` up to 100,
// `starting_after` and `has_more`, `created[gte]`, `delivery_success`; a 429 with no Retry-After,
// since Stripe's rate-limit page names none) and Retrieve a webhook endpoint; Paddle's List
// notifications (Bearer, `per_page` up to 200, `meta.pagination.next` with `after` and
// `has_more`, `status`, `notification_setting_id`, `from`; a 429 with Retry-After and Paddle's
// error body). Each records the requests it saw: path, query and whether the key was right.
import { createHmac } from "node:crypto";

export interface SeenRequest {
  path: string;
  query: URLSearchParams;
  /** The request carried the key the way the provider's page says. */
  authorized: boolean;
  /** The Authorization header as sent (to check that it is the only place the key went). */
  authorization: string;
}

export interface ProviderApi {
  url: string;
  seen: SeenRequest[];
  /** Answer 429 to every request from the n-th one (0: the first) on; null: never. */
  limitFrom: number | null;
  /** Called with each request's place (0: the first) before it is answered. */
  onRequest: ((n: number) => void) | null;
  stop(): void;
}

// ---- Stripe ----

export interface StripeEventOptions {
  /** Seconds before `now` it was created. */
  ago: number;
  type?: string;
  customer?: string | null;
}

/** An event object as Stripe's List Events returns it (api_version 2024-06-20 shapes). */
export function stripeEvent(id: string, now: number, o: StripeEventOptions): Record<string, unknown> {
  const type = o.type ?? "invoice.paid";
  const object = type.split(".")[0] === "customer" ? "customer" : type.split(".")[0];
  const customer = o.customer === undefined ? `cus_${id.slice(-4)}` : o.customer;
  return {
    id,
    object: "event",
    api_version: "2024-06-20",
    created: Math.floor(now - o.ago),
    data: {
      object:
        object === "customer"
          ? { id: customer ?? `cus_${id.slice(-4)}`, object: "customer" }
          : { id: `${object.slice(0, 2)}_${id.slice(-6)}`, object, customer, amount_paid: 1200 },
    },
    livemode: false,
    pending_webhooks: 1,
    request: { id: null, idempotency_key: null },
    type,
  };
}

/** The Stripe-Signature header Stripe would send for `body` at `t`. */
export function stripeSignature(secret: string, body: string, t: number): string {
  return `t=${t},v1=${createHmac("sha256", secret).update(`${t}.${body}`).digest("hex")}`;
}

const stripeError = (status: number, message: string, type = "invalid_request_error") =>
  Response.json({ error: { message, type } }, { status });

/**
 * Stripe's API over `events` (newest first) that failed to reach an endpoint, for `key`; each
 * also listed with delivery_success=true would be another test's business, so that is refused.
 */
export function startStripeApi(
  key: string,
  events: Record<string, unknown>[],
  endpoints: Record<string, string[]> = {},
): ProviderApi {
  const api: ProviderApi = { url: "", seen: [], limitFrom: null, onRequest: null, stop: () => server.stop(true) };
  const basic = `Basic ${Buffer.from(`${key}:`).toString("base64")}`;
  const server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    fetch(req) {
      const url = new URL(req.url);
      const authorization = req.headers.get("authorization") ?? "";
      const authorized = authorization === basic || authorization === `Bearer ${key}`;
      api.seen.push({ path: url.pathname, query: url.searchParams, authorized, authorization });
      api.onRequest?.(api.seen.length - 1);
      if (api.limitFrom !== null && api.seen.length > api.limitFrom)
        return stripeError(429, "Too many requests hit the API too quickly.", "rate_limit_error");
      if (!authorized) return stripeError(401, "Invalid API Key provided.");
      if (req.method !== "GET") return stripeError(405, "Unrecognized request URL.");
      const endpoint = /^\/v1\/webhook_endpoints\/([^/]+)$/.exec(url.pathname);
      if (endpoint) {
        const enabled = endpoints[decodeURIComponent(endpoint[1])];
        if (!enabled) return stripeError(404, `No such webhook endpoint: '${endpoint[1]}'`);
        return Response.json({
          id: endpoint[1],
          object: "webhook_endpoint",
          api_version: null,
          enabled_events: enabled,
          status: "enabled",
          url: "https://hooks.example.com/hooks/stripe",
          livemode: false,
        });
      }
      if (url.pathname !== "/v1/events") return stripeError(404, "Unrecognized request URL.");
      const q = url.searchParams;
      if (q.get("delivery_success") !== "false") return stripeError(400, "this stub lists undelivered events only");
      const limit = Number(q.get("limit") ?? "10");
      if (!Number.isInteger(limit) || limit < 1 || limit > 100)
        return stripeError(400, "Invalid integer: limit must be between 1 and 100");
      const gte = Number(q.get("created[gte]") ?? "0");
      let list = events.filter((e) => (e.created as number) >= gte);
      const after = q.get("starting_after");
      if (after !== null) {
        const i = list.findIndex((e) => e.id === after);
        if (i < 0) return stripeError(400, `No such event: '${after}'`);
        list = list.slice(i + 1);
      }
      return Response.json({
        object: "list",
        url: "/v1/events",
        has_more: list.length > limit,
        data: list.slice(0, limit),
      });
    },
  });
  api.url = `http://127.0.0.1:${server.port}`;
  return api;
}

// ---- Paddle ----

/** A notification as Paddle's List notifications returns it: the webhook's body in `payload`. */
export function paddleNotification(
  n: number,
  now: number,
  o: { ago: number; status?: string; setting?: string; type?: string; customer?: string | null },
): Record<string, unknown> {
  const id = `ntf_01h${String(n).padStart(23, "0")}`;
  const eventId = `evt_01h${String(n).padStart(23, "0")}`;
  const at = new Date((now - o.ago) * 1000).toISOString();
  const type = o.type ?? "transaction.completed";
  return {
    id,
    type,
    status: o.status ?? "failed",
    payload: {
      data: {
        id: `txn_01h${String(n).padStart(23, "0")}`,
        status: "completed",
        customer_id: o.customer === undefined ? `ctm_01h${String(n % 7).padStart(23, "0")}` : o.customer,
        origin: "web",
        subscription_id: null,
      },
      event_id: eventId,
      event_type: type,
      occurred_at: at,
      notification_id: id,
    },
    occurred_at: at,
    delivered_at: null,
    replayed_at: null,
    origin: "event",
    last_attempt_at: at,
    retry_at: null,
    times_attempted: 3,
    notification_setting_id: o.setting ?? "ntfset_01h000000000000000000000aa",
  };
}

/** The Paddle-Signature header Paddle would send for `body` at `ts`. */
export function paddleSignature(secret: string, body: string, ts: number): string {
  return `ts=${ts};h1=${createHmac("sha256", secret).update(`${ts}:${body}`).digest("hex")}`;
}

const paddleError = (status: number, code: string, detail: string, headers: Record<string, string> = {}) =>
  Response.json(
    {
      error: {
        type: "request_error",
        code,
        detail,
        documentation_url: `https://developer.paddle.com/errors/shared/${code}`,
      },
      meta: { request_id: "00000000-0000-0000-0000-000000000000" },
    },
    { status, headers },
  );

/** Paddle's API over `notifications` (newest first, by id), for `key`. */
export function startPaddleApi(key: string, notifications: Record<string, unknown>[]): ProviderApi {
  const api: ProviderApi = { url: "", seen: [], limitFrom: null, onRequest: null, stop: () => server.stop(true) };
  const server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    fetch(req) {
      const url = new URL(req.url);
      const authorization = req.headers.get("authorization") ?? "";
      const authorized = authorization === `Bearer ${key}`;
      api.seen.push({ path: url.pathname, query: url.searchParams, authorized, authorization });
      api.onRequest?.(api.seen.length - 1);
      if (api.limitFrom !== null && api.seen.length > api.limitFrom)
        return Response.json(
          {
            error: {
              type: "api_error",
              code: "too_many_requests",
              detail:
                "IP address exceeded the allowed rate limit. " +
                "Retry after the number of seconds in the Retry-After header.",
              documentation_url: "https://developer.paddle.com/errors/shared/too_many_requests",
            },
            meta: { request_id: "00000000-0000-0000-0000-000000000000" },
          },
          { status: 429, headers: { "Retry-After": "17" } },
        );
      if (!authorized) return paddleError(403, "forbidden", "You aren't permitted to perform this request.");
      if (url.pathname !== "/notifications") return paddleError(404, "not_found", "Entity not found.");
      const q = url.searchParams;
      const perPage = Math.min(200, Number(q.get("per_page") ?? "50"));
      if (q.get("order_by") !== null && q.get("order_by") !== "id[DESC]")
        return paddleError(400, "invalid_field", "this stub orders by id[DESC] only");
      const statuses = q.get("status")?.split(",");
      const setting = q.get("notification_setting_id")?.split(",");
      const from = q.get("from") === null ? null : Date.parse(q.get("from") ?? "");
      let list = notifications.filter(
        (n) =>
          (!statuses || statuses.includes(n.status as string)) &&
          (!setting || setting.includes(n.notification_setting_id as string)) &&
          (from === null || Date.parse(n.occurred_at as string) >= from),
      );
      const after = q.get("after");
      if (after !== null) list = list.slice(list.findIndex((n) => n.id === after) + 1);
      const page = list.slice(0, perPage);
      const next = new URL(url);
      next.searchParams.set("after", String(page[page.length - 1]?.id ?? after ?? ""));
      return Response.json({
        data: page,
        meta: {
          request_id: "00000000-0000-0000-0000-000000000000",
          // As Paddle does, the next URL is there on the last page too; has_more says it is empty.
          pagination: {
            per_page: perPage,
            next: next.toString(),
            has_more: list.length > perPage,
            estimated_total: list.length,
          },
        },
      });
    },
  });
  api.url = `http://127.0.0.1:${server.port}`;
  return api;
}
