// A stand-in for the Hermes Agent gateway's webhook adapter, answering as the upstream handler
// does (NousResearch/hermes-agent, gateway/platforms/webhook.py), in its order: the route and
// profile (404 unknown, 403 disabled), the body cap (413), the signature (401), the per-route
// rate limit (a rolling window that records only the requests it lets through; 429 with no
// Retry-After), the body (400 when it does not parse, 500 when it is not an object, where the
// upstream handler fails reading a field of it), the events filter and a route filter (200
// ignored), the delivery id (X-GitHub-Delivery, svix-id, webhook-id, X-Request-ID) seen within
// an hour (200 duplicate), then 200 delivered for a deliver_only route or 202 accepted. The
// subscriptions file it serves is written beside it, in the gateway's format, for hookspool to read.
import { createHmac, timingSafeEqual } from "node:crypto";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { tempDir } from "./tmp.ts";

export interface GatewayRoute {
  secret: string;
  profile?: string;
  enabled?: boolean;
  events?: string[];
  deliver_only?: boolean;
  rate_limit?: number;
  /** The route filter (upstream: filters in the route's config); false answers ignored, reason filter. */
  filter?: (payload: Record<string, unknown>) => boolean;
  /** In the file, but skipped by the gateway (upstream skips a dynamic route it finds invalid): 404. */
  skipped?: boolean;
  /** deliver_only: the delivery to the target fails for request n (502, after the id was recorded). */
  deliverFails?: (n: number) => boolean;
}

export interface GatewayOptions {
  routes: Record<string, GatewayRoute>;
  /** The gateway's rate_limit: requests per route per window (30). */
  rateLimit?: number;
  /** The window (60 s upstream; a benchmark may shorten it). */
  windowS?: number;
  /** Profiles served under /p/<profile>/ (none: a prefix is 404, as without multiplexing). */
  profiles?: string[];
  maxBodyBytes?: number;
  /** Wait this long before answering request n (from 1), to let a sender's deadline pass. */
  delayMs?: (n: number) => number;
  /** Answer request n with this status before the gateway sees it (a proxy in front of a restarting gateway). */
  failBefore?: (n: number) => number | undefined;
  /** Seconds, for the window and the idempotency cache. */
  now?: () => number;
  /**
   * The route's completion_script, as the upstream proposal runs it: once the agent's run of an
   * accepted request ends, the script (run with bash, as the gateway runs a .sh) gets a JSON
   * envelope on stdin with the run's terminal status and the request's delivery id.
   */
  completion?: { script: string; env: Record<string, string>; status: (run: number) => "success" | "failure" };
}

/** One completion script run: the envelope it got and how it exited. */
export interface CompletionRun {
  deliveryId: string;
  status: "success" | "failure";
  exit: number;
  stderr: string;
}

/** One request as the gateway answered it. */
export interface GatewayHit {
  route: string;
  status: number;
  /** The JSON status of a 2xx (accepted, ignored, ...) or the error of a 4xx/5xx. */
  answer: string;
  deliveryId: string | null;
  /** When the rate limiter counted it (null: not counted). */
  countedAt: number | null;
  body: string;
  headers: Record<string, string>;
}

const IDEMPOTENCY_TTL_S = 3600;

export class HermesGateway {
  readonly hits: GatewayHit[] = [];
  /** Completion script runs, in the order they ended. */
  readonly completions: CompletionRun[] = [];
  private runs = 0;
  readonly subscriptionsPath: string;
  private readonly server: ReturnType<typeof Bun.serve>;
  private readonly windows = new Map<string, number[]>();
  private readonly seen = new Map<string, number>();
  private n = 0;

  constructor(private readonly o: GatewayOptions) {
    this.subscriptionsPath = join(tempDir(), "webhook_subscriptions.json");
    this.writeSubscriptions();
    this.server = Bun.serve({ hostname: "127.0.0.1", port: 0, idleTimeout: 60, fetch: (req) => this.handle(req) });
  }

  get url(): string {
    return `http://127.0.0.1:${this.server.port}`;
  }

  /** Answers of each kind so far: { accepted: 12, "Rate limit exceeded": 3, ... }. */
  counts(): Record<string, number> {
    const out: Record<string, number> = {};
    for (const h of this.hits) out[h.answer] = (out[h.answer] ?? 0) + 1;
    return out;
  }

  /** The routes' entries as the gateway's file holds them (functions left out). */
  writeSubscriptions(): void {
    const file = Object.fromEntries(
      Object.entries(this.o.routes).map(([name, { filter: _f, skipped: _s, deliverFails: _d, ...entry }]) => [
        name,
        entry,
      ]),
    );
    writeFileSync(this.subscriptionsPath, JSON.stringify(file, null, 2));
  }

  stop(): void {
    this.server.stop(true);
  }

  private now(): number {
    return this.o.now ? this.o.now() : Date.now() / 1000;
  }

  private async handle(req: Request): Promise<Response> {
    const n = ++this.n;
    const path = new URL(req.url).pathname;
    const m = /^(?:\/p\/([^/]+))?\/webhooks\/([^/]+)$/.exec(path);
    const body = await req.text();
    const headers = Object.fromEntries(req.headers);
    const record = (route: string, status: number, answer: string, extra: Partial<GatewayHit> = {}) => {
      this.hits.push({ route, status, answer, deliveryId: null, countedAt: null, body, headers, ...extra });
    };
    const delay = this.o.delayMs?.(n) ?? 0;
    if (delay > 0) await Bun.sleep(delay);
    const early = this.o.failBefore?.(n);
    if (early !== undefined) {
      record("", early, "proxy");
      return new Response("upstream unavailable", { status: early });
    }
    if (!m || req.method !== "POST") {
      record("", 404, "Not found");
      return Response.json({ error: "Not found" }, { status: 404 });
    }
    const [, profile, routeName] = m;
    const route = Object.hasOwn(this.o.routes, routeName) ? this.o.routes[routeName] : undefined;
    const error = (status: number, message: string, extra: Partial<GatewayHit> = {}) => {
      record(routeName, status, message, extra);
      return Response.json({ error: message }, { status });
    };
    if (profile !== undefined && !(this.o.profiles ?? []).includes(profile))
      return error(404, "Unknown or unconfigured profile");
    if (!route || route.skipped) return error(404, `Unknown route: ${routeName}`);
    if ((route.profile ?? "default") !== (profile ?? "default")) return error(404, `Unknown route: ${routeName}`);
    if (route.enabled === false) return error(403, `Route disabled: ${routeName}`);
    if (Buffer.byteLength(body) > (this.o.maxBodyBytes ?? 1_048_576)) return error(413, "Payload too large");
    if (!route.secret) return error(403, "Webhook route is missing an HMAC secret");
    if (!this.verified(req.headers, body, route.secret)) return error(401, "Invalid signature");
    // Rate limiting, after auth: only a request it lets through is recorded in the window.
    const now = this.now();
    const window = this.windows.get(routeName) ?? [];
    this.windows.set(routeName, window);
    const cutoff = now - (this.o.windowS ?? 60);
    while (window.length && window[0] < cutoff) window.shift();
    if (window.length >= (route.rate_limit ?? this.o.rateLimit ?? 30)) return error(429, "Rate limit exceeded");
    window.push(now);
    const counted = { countedAt: now };
    let payload: unknown;
    try {
      payload = JSON.parse(body);
    } catch {
      return error(400, "Cannot parse body", counted);
    }
    // Upstream reads payload.get("event_type"): anything but an object fails there.
    if (payload === null || typeof payload !== "object" || Array.isArray(payload))
      return error(500, "Internal Server Error", counted);
    const p = payload as Record<string, unknown>;
    const eventType =
      req.headers.get("x-github-event") ||
      req.headers.get("x-gitlab-event") ||
      (p.event_type as string) ||
      (p.type as string) ||
      "unknown";
    if (route.events?.length && !route.events.includes(eventType)) {
      record(routeName, 200, "ignored", counted);
      return Response.json({ status: "ignored", event: eventType });
    }
    if (route.filter && !route.filter(p)) {
      record(routeName, 200, "ignored", counted);
      return Response.json({ status: "ignored", reason: "filter", route: routeName });
    }
    const deliveryId =
      req.headers.get("x-github-delivery") ??
      req.headers.get("svix-id") ??
      req.headers.get("webhook-id") ??
      req.headers.get("x-request-id") ??
      String(Math.floor(now * 1000));
    const seenAt = this.seen.get(deliveryId);
    if (seenAt !== undefined && now - seenAt < IDEMPOTENCY_TTL_S) {
      record(routeName, 200, "duplicate", { ...counted, deliveryId });
      return Response.json({ status: "duplicate", delivery_id: deliveryId });
    }
    this.seen.set(deliveryId, now);
    if (route.deliver_only) {
      if (route.deliverFails?.(n)) {
        record(routeName, 502, "error", { ...counted, deliveryId });
        return Response.json({ status: "error", error: "Delivery failed", delivery_id: deliveryId }, { status: 502 });
      }
      record(routeName, 200, "delivered", { ...counted, deliveryId });
      return Response.json({ status: "delivered", route: routeName, target: "log", delivery_id: deliveryId });
    }
    record(routeName, 202, "accepted", { ...counted, deliveryId });
    if (this.o.completion) void this.complete(this.o.completion, routeName, deliveryId, ++this.runs);
    return Response.json(
      { status: "accepted", route: routeName, event: eventType, delivery_id: deliveryId },
      { status: 202 },
    );
  }

  /** The agent's run ends (after the 202 is sent): the completion script hears how. */
  private async complete(
    c: NonNullable<GatewayOptions["completion"]>,
    route: string,
    deliveryId: string,
    run: number,
  ): Promise<void> {
    await Bun.sleep(1);
    const status = c.status(run);
    const envelope = JSON.stringify({ version: 1, status, route, delivery_id: deliveryId });
    const p = Bun.spawn(["bash", c.script], {
      stdin: new Blob([envelope]),
      stdout: "ignore",
      stderr: "pipe",
      env: { PATH: process.env.PATH ?? "/usr/bin:/bin", ...c.env },
    });
    const [stderr, exit] = await Promise.all([new Response(p.stderr).text(), p.exited]);
    this.completions.push({ deliveryId, status, exit, stderr });
  }

  /**
   * Standard Webhooks headers (whsec_ secrets base64-decoded, else raw) or X-Hub-Signature-256, as the upstream
   * validator takes them.
   */
  private verified(h: Headers, body: string, secret: string): boolean {
    const sig = h.get("webhook-signature");
    if (sig) {
      const id = h.get("webhook-id") ?? "";
      const ts = h.get("webhook-timestamp") ?? "";
      if (!id || !ts || Math.abs(this.now() - Number(ts)) > 300) return false;
      const key = secret.startsWith("whsec_") ? Buffer.from(secret.slice(6), "base64") : Buffer.from(secret);
      const expected = createHmac("sha256", key).update(`${id}.${ts}.${body}`).digest("base64");
      return sig.split(" ").some((part) => {
        const [v, s] = part.split(",", 2);
        return (
          v === "v1" &&
          s !== undefined &&
          s.length === expected.length &&
          timingSafeEqual(Buffer.from(s), Buffer.from(expected))
        );
      });
    }
    const hub = h.get("x-hub-signature-256");
    if (hub) {
      const expected = `sha256=${createHmac("sha256", secret).update(body).digest("hex")}`;
      return hub.length === expected.length && timingSafeEqual(Buffer.from(hub), Buffer.from(expected));
    }
    return false;
  }
}
