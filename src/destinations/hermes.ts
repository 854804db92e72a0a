// The hermes destination: POST the document (or each event, with unwrap) to the Hermes
// Agent gateway's webhook route, signed with the route's secret from the gateway's own
// subscriptions file, read fresh on every attempt so a rotation needs no restart.
import { destinationDefaults } from "../config/schema.ts";
import { readFileSync } from "node:fs";
import { expandPath } from "../config/load.ts";
import type { Env } from "../config/secrets.ts";
import { type Received, isReceived, post } from "./post.ts";
import { namedHeaderProblems, outboundHeaders, usableSecret } from "./signing.ts";
import { outcomeForStatus, statusLine } from "./status-map.ts";
import { type DeliveryContext, type Destination, type Idempotency, outcome, type Outcome } from "../delivery.ts";
import { deliverBatch, type NamedHeader } from "./unwrap.ts";

export interface HermesDestinationOptions {
  /** "hermes:<route>" */
  name: string;
  /** The gateway route: the name after "hermes:". */
  route: string;
  /** hermes.base_url, e.g. http://127.0.0.1:8644 */
  baseUrl: string;
  /** hermes.subscriptions_path; a leading ~ is the dispatcher's HOME. */
  subscriptionsPath: string;
  /** hermes.legacy_signature: also send X-Hub-Signature-256. */
  legacySignature?: boolean;
  timeoutS?: number;
  maxBodyBytes?: number;
  maxInflight?: number;
  unwrap?: boolean;
  /** The destination's own event_header; without it the source's (ctx.eventHeader) is used. */
  eventHeader?: string;
  /** Unwrap: header carrying each event's dedup id. */
  dedupHeader?: string;
  instanceId: string;
  /** The dispatcher's environment (HOME for ~). */
  env?: Env;
}

/** One route of the gateway's subscriptions file, as far as hookspool reads it. */
export interface HermesRoute {
  secret: string;
  profile: string | null;
  /** The gateway's own filter and coalescing: both must be off unless unwrap. */
  events: unknown;
  coalesce: unknown;
}

const OK_STATUSES = new Set(["delivered", "accepted", "duplicate"]);
const NOTICE_STATUSES = new Set(["ignored", "coalesced"]);

function configOutcome(reason: string, detail: string): Outcome {
  return outcome({ kind: "retry", klass: "config", reason, detail });
}

/**
 * Read one route from the subscriptions file (a JSON object: route name -> {secret, profile?,
 * events?, coalesce?, ...}). Every problem is a config outcome with a pointed reason; the
 * secret itself never appears in it.
 */
export function readRoute(path: string, route: string): HermesRoute | Outcome {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (e) {
    return configOutcome("subscriptions file unreadable", `hermes.subscriptions_path ${path} cannot be read (${(e as NodeJS.ErrnoException).code ?? "error"})`);
  }
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    return configOutcome("subscriptions file invalid", `hermes.subscriptions_path ${path} is not valid JSON`);
  }
  if (doc === null || typeof doc !== "object" || Array.isArray(doc)) return configOutcome("subscriptions file invalid", `hermes.subscriptions_path ${path} is not a JSON object`);
  const entry = Object.hasOwn(doc, route) ? (doc as Record<string, unknown>)[route] : undefined;
  if (entry === undefined) return configOutcome("unknown hermes route", `route "${route}" is not in ${path}`);
  if (entry === null || typeof entry !== "object") return configOutcome("subscriptions file invalid", `route "${route}" in ${path} is not an object`);
  const e = entry as Record<string, unknown>;
  if (typeof e.secret !== "string" || e.secret.length === 0) return configOutcome("hermes route has no secret", `route "${route}" in ${path} has no secret`);
  if (e.profile !== undefined && e.profile !== null && (typeof e.profile !== "string" || e.profile === "")) {
    return configOutcome("hermes route profile invalid", `route "${route}" in ${path} has a profile that is not a name`);
  }
  return { secret: e.secret, profile: (e.profile as string | null | undefined) ?? null, events: e.events, coalesce: e.coalesce };
}

/** Whether a route's events filter or coalesce option is on. */
function isSet(v: unknown): boolean {
  if (v === undefined || v === null || v === false || v === 0 || v === "") return false;
  if (Array.isArray(v)) return v.length > 0;
  return true;
}

/**
 * The outcome of a gateway answer: a 2xx by its JSON status, 401/403/404 as config with the
 * gateway's reason, anything else as for http except that a 3xx is config.
 */
export function hermesOutcome(a: Received, unwrapped: boolean, now: number): Outcome {
  const line = statusLine(a.status);
  if (a.status >= 200 && a.status < 300) {
    const status = answerStatus(a.text);
    if (status !== null && OK_STATUSES.has(status)) return outcome({ kind: "ok", reason: `hermes ${status}`, status: a.status, detail: `${line}; ${status}` });
    if (status !== null && NOTICE_STATUSES.has(status)) {
      // The gateway's own filter or coalescing swallowed the document: fine for original events
      // (unwrap), worth an issue otherwise, since both must be off for routes we feed.
      return outcome({ kind: "ok", reason: `hermes ${status}`, status: a.status, detail: `${line}; ${status}`, notice: unwrapped ? null : `hermes ${status}` });
    }
    return outcome({ kind: "ok", reason: `http ${a.status}`, status: a.status, detail: `${line}; no known hermes status` });
  }
  if (a.status === 401) return { ...configOutcome("bad secret", `${line}: the gateway refused the signature (route secret or clock differs)`), status: 401 };
  if (a.status === 403) return { ...configOutcome("route disabled or missing secret", `${line}: the route is disabled or has no secret on the gateway`), status: 403 };
  if (a.status === 404) return { ...configOutcome("unknown route or profile", `${line}: the gateway has no such route or profile`), status: 404 };
  return outcomeForStatus(a.status, a.headers.get("retry-after"), "hermes", now);
}

/** The JSON "status" of a gateway answer, or null. Nothing else of the body is kept. */
function answerStatus(text: string): string | null {
  try {
    const v: unknown = JSON.parse(text);
    if (v !== null && typeof v === "object" && typeof (v as { status?: unknown }).status === "string") return (v as { status: string }).status;
  } catch {
    // not JSON: a 2xx is still ok
  }
  return null;
}

export class HermesDestination implements Destination {
  readonly type = "hermes" as const;
  readonly name: string;
  readonly timeoutS: number;
  readonly maxBodyBytes: number;
  readonly maxInflight: number;
  readonly idempotency: Idempotency;
  readonly unwrap: boolean;
  private readonly env: Env;

  constructor(private readonly opts: HermesDestinationOptions) {
    this.name = opts.name;
    const d = destinationDefaults("hermes");
    this.timeoutS = opts.timeoutS ?? d.timeout_s;
    this.maxBodyBytes = opts.maxBodyBytes ?? d.max_body_bytes;
    this.maxInflight = opts.maxInflight ?? d.max_inflight;
    this.unwrap = opts.unwrap ?? false;
    // Idempotency per attempt, because Hermes' duplicate only proves admission; per event with unwrap.
    this.idempotency = this.unwrap ? "per-event" : "per-attempt";
    this.env = opts.env ?? process.env;
  }

  private get subscriptionsPath(): string {
    return expandPath(this.opts.subscriptionsPath, process.cwd(), this.env);
  }

  /** The route URL for a profile, or a config outcome for a bad base_url. */
  private url(profile: string | null): string | Outcome {
    let base: URL;
    try {
      base = new URL(this.opts.baseUrl);
    } catch {
      return configOutcome("bad hermes.base_url", "hermes.base_url is not a valid URL");
    }
    if (base.protocol !== "http:" && base.protocol !== "https:") return configOutcome("bad hermes.base_url", "hermes.base_url must be http(s)");
    const path = `${profile === null ? "" : `/p/${encodeURIComponent(profile)}`}/webhooks/${encodeURIComponent(this.opts.route)}`;
    return `${base.origin}${base.pathname.replace(/\/+$/, "")}${path}`;
  }

  async deliver(body: string, ctx: DeliveryContext): Promise<Outcome> {
    // Secret and profile are read fresh on every attempt: rotation without restart.
    const route = readRoute(this.subscriptionsPath, this.opts.route);
    if ("kind" in route) return route;
    const checked = checkWhsec(route.secret);
    if (checked) return checked;
    const url = this.url(route.profile);
    if (typeof url !== "string") return url;
    return deliverBatch(body, ctx, {
      instanceId: this.opts.instanceId,
      maxBodyBytes: this.maxBodyBytes,
      unwrap: this.unwrap,
      // The destination's own header, else the source's (X-GitHub-Event): the batch's event type.
      eventHeader: this.opts.eventHeader ?? ctx.eventHeader,
      dedupHeader: this.opts.dedupHeader,
      send: (bytes, webhookId, named, unwrapped) => this.send(url, route.secret, bytes, webhookId, ctx, unwrapped, named),
    });
  }

  private async send(
    url: string,
    secret: string,
    body: Uint8Array,
    webhookId: string,
    ctx: DeliveryContext,
    unwrapped: boolean,
    named: NamedHeader[],
  ): Promise<Outcome> {
    const headers = outboundHeaders({
      webhookId,
      timestamp: Math.floor(ctx.clock.now()),
      body,
      secrets: [secret],
      hubSecret: this.opts.legacySignature === false ? null : secret,
      batchId: ctx.batchId,
      attempt: ctx.attempt,
      named,
    });
    const r = await post(url, headers, body, ctx.deadline);
    if (!isReceived(r)) return r;
    return hermesOutcome(r, unwrapped, ctx.clock.now());
  }

  check(): string[] {
    const problems: string[] = [];
    const url = this.url(null);
    if (typeof url !== "string") problems.push(url.detail);
    const route = readRoute(this.subscriptionsPath, this.opts.route);
    if ("kind" in route) problems.push(route.detail);
    else {
      const bad = checkWhsec(route.secret);
      if (bad) problems.push(`route "${this.opts.route}": ${bad.detail}`);
      // The gateway's filter and coalescing would hide or merge our documents; an unwrap
      // destination sends original events, which is what both were written for.
      if (!this.unwrap) {
        if (isSet(route.events)) problems.push(`route "${this.opts.route}" sets events in ${this.subscriptionsPath}; turn it off for a route hookspool feeds (or set unwrap = true)`);
        if (isSet(route.coalesce)) problems.push(`route "${this.opts.route}" sets coalesce in ${this.subscriptionsPath}; turn it off for a route hookspool feeds (or set unwrap = true)`);
      }
    }
    problems.push(...namedHeaderProblems({ event_header: this.opts.eventHeader, dedup_header: this.opts.dedupHeader }));
    return problems;
  }
}

/** A config outcome when a whsec_ route secret is not base64, else null. */
function checkWhsec(secret: string): Outcome | null {
  return usableSecret(secret) ? null : configOutcome("route secret is not valid whsec_ base64", "the route secret is not valid whsec_ base64");
}
