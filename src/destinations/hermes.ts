// The hermes destination: POST the document (or each event, with unwrap) to the Hermes
// Agent gateway's webhook route, signed with the route's secret from the gateway's own
// subscriptions file, read fresh on every attempt so a rotation needs no restart.
import { destinationDefaults } from "../config/schema.ts";
import { readFileSync, statSync } from "node:fs";
import { expandPath } from "../config/load.ts";
import type { Env } from "../config/secrets.ts";
import { type Received, isReceived, post } from "./post.ts";
import { namedHeaderProblems, outboundHeaders, usableSecret } from "./signing.ts";
import { outcomeForStatus, statusLine } from "./status-map.ts";
import {
  type Answer,
  ANSWERS,
  type DeliveryContext,
  type Destination,
  type Idempotency,
  outcome,
  type Outcome,
  type Pace,
  type StoredEvent,
} from "../delivery.ts";
import type { Rate } from "../pacing.ts";
import { jsonText } from "../store/content.ts";
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
  /** Its own rate (null: "none", not paced); without it, the gateway's. */
  rate?: Rate | null;
  /** [hermes] rate_limit: the gateway's requests per route per minute, when the route sets none. */
  gatewayRateLimit?: number;
  /** Open an issue after this many ignored answers in a row (0: never). */
  ignoredIssueAfter?: number;
}

/** The gateway counts requests per route in a rolling window of this length. */
export const GATEWAY_WINDOW_S = 60;
/** The gateway's rate_limit when its config sets none. */
export const GATEWAY_RATE_LIMIT = 30;
/** Ignored answers in a row before an issue opens, unless the destination says. */
export const IGNORED_ISSUE_AFTER = 5;

/** One route of the gateway's subscriptions file, as far as hookspool reads it. */
export interface HermesRoute {
  secret: string;
  profile: string | null;
  /** The gateway's own filter and coalescing: both must be off unless unwrap. */
  events: unknown;
  coalesce: unknown;
  /** The route's own rate_limit, when its entry has one. */
  rateLimit: number | null;
}

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
    return configOutcome(
      "subscriptions file unreadable",
      `hermes.subscriptions_path ${path} cannot be read (${(e as NodeJS.ErrnoException).code ?? "error"})`,
    );
  }
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    return configOutcome("subscriptions file invalid", `hermes.subscriptions_path ${path} is not valid JSON`);
  }
  if (doc === null || typeof doc !== "object" || Array.isArray(doc))
    return configOutcome("subscriptions file invalid", `hermes.subscriptions_path ${path} is not a JSON object`);
  const entry = Object.hasOwn(doc, route) ? (doc as Record<string, unknown>)[route] : undefined;
  if (entry === undefined) return configOutcome("unknown hermes route", `route "${route}" is not in ${path}`);
  if (entry === null || typeof entry !== "object")
    return configOutcome("subscriptions file invalid", `route "${route}" in ${path} is not an object`);
  const e = entry as Record<string, unknown>;
  if (typeof e.secret !== "string" || e.secret.length === 0)
    return configOutcome("hermes route has no secret", `route "${route}" in ${path} has no secret`);
  if (e.profile !== undefined && e.profile !== null && (typeof e.profile !== "string" || e.profile === "")) {
    return configOutcome(
      "hermes route profile invalid",
      `route "${route}" in ${path} has a profile that is not a name`,
    );
  }
  const rateLimit =
    typeof e.rate_limit === "number" && Number.isSafeInteger(e.rate_limit) && e.rate_limit >= 1 ? e.rate_limit : null;
  return {
    secret: e.secret,
    profile: (e.profile as string | null | undefined) ?? null,
    events: e.events,
    coalesce: e.coalesce,
    rateLimit,
  };
}

/** Whether a route's events filter or coalesce option is on. */
function isSet(v: unknown): boolean {
  if (v === undefined || v === null || v === false || v === 0 || v === "") return false;
  if (Array.isArray(v)) return v.length > 0;
  return true;
}

/** What one request of an attempt needs to read the gateway's answer. */
export interface AnswerContext {
  /**
   * Whether an earlier attempt of ours saw the gateway accept this same request id. Only then
   * does "duplicate" confirm anything: the gateway records an id before it runs the route, so
   * after a request of ours that timed out or failed, duplicate proves only that it came in.
   * A document's id is new on every attempt, so nothing can confirm it.
   */
  confirmed: boolean;
  /** Route and profile, for the words of a 404. */
  route: string;
  profile: string | null;
  subscriptionsPath: string;
}

/**
 * The outcome of a gateway answer, read as the gateway means it: a 2xx by its JSON status
 * (accepted, coalesced, delivered, duplicate, ignored: each delivered, each recorded in its own
 * word), 404 a configuration fault that pauses the destination, 401/403 config, anything else
 * as for http except that a 3xx is config.
 */
export function hermesOutcome(a: Received, now: number, c: AnswerContext): Outcome {
  const line = statusLine(a.status);
  if (a.status >= 200 && a.status < 300) {
    const body = answerBody(a.text);
    const status = body?.status;
    if (status === undefined)
      return outcome({
        kind: "ok",
        reason: `http ${a.status}`,
        status: a.status,
        detail: `${line}; no known hermes status`,
      });
    const unconfirmed = status === "duplicate" && !c.confirmed;
    const ignoredReason = status === "ignored" ? (body?.reason ?? null) : null;
    const words = unconfirmed
      ? "duplicate, unconfirmed: the gateway had the id, nothing says it ran"
      : ignoredReason
        ? `ignored (${ignoredReason})`
        : status;
    return outcome({
      kind: "ok",
      reason: `hermes ${status}`,
      status: a.status,
      detail: `${line}; ${words}`,
      answer: status,
      unconfirmed,
      ignoredReason,
    });
  }
  if (a.status === 401)
    return {
      ...configOutcome("bad secret", `${line}: the gateway refused the signature (route secret or clock differs)`),
      status: 401,
    };
  if (a.status === 403)
    return {
      ...configOutcome(
        "route disabled or missing secret",
        `${line}: the route is disabled or has no secret on the gateway`,
      ),
      status: 403,
    };
  if (a.status === 404) {
    const where = c.profile === null ? `route "${c.route}"` : `route "${c.route}" of profile "${c.profile}"`;
    const why =
      `${line}: the gateway does not serve ${where}: its entry in ${c.subscriptionsPath} is missing or was ` +
      "skipped as invalid (no secret, or INSECURE_NO_AUTH off loopback), " +
      "or the gateway does not serve that profile";
    return {
      ...configOutcome("unknown route or profile", why),
      status: 404,
      pause: `the gateway answered 404 for ${where}`,
    };
  }
  return outcomeForStatus(a.status, a.headers.get("retry-after"), "hermes", now);
}

/**
 * The JSON "status" of a gateway answer (one of its known words) and an ignored answer's reason. Nothing else of the
 * body is kept.
 */
function answerBody(text: string): { status: Answer; reason?: string } | null {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    // not JSON: a 2xx is still ok
    return null;
  }
  if (v === null || typeof v !== "object") return null;
  const o = v as { status?: unknown; reason?: unknown; event?: unknown };
  if (typeof o.status !== "string" || !(ANSWERS as readonly string[]).includes(o.status)) return null;
  // The gateway's own reason is a word (filter, script); its events filter names no reason but the event.
  const reason =
    typeof o.reason === "string" && /^[a-z_]{1,32}$/.test(o.reason)
      ? o.reason
      : o.event !== undefined
        ? "events"
        : undefined;
  return { status: o.status as Answer, ...(reason ? { reason } : {}) };
}

/**
 * The word for an attempt of several requests (unwrap): ignored only when every event was;
 * otherwise the first of accepted, coalesced, duplicate, delivered any request got.
 */
function attemptAnswer(answers: readonly Outcome[]): Pick<Outcome, "answer" | "unconfirmed" | "ignoredReason"> {
  const words = answers.map((o) => o.answer).filter((a): a is Answer => a !== null);
  const unconfirmed = answers.some((o) => o.unconfirmed);
  if (words.length === 0) return { answer: null, unconfirmed, ignoredReason: null };
  if (words.every((w) => w === "ignored"))
    return {
      answer: "ignored",
      unconfirmed,
      ignoredReason: answers.find((o) => o.ignoredReason)?.ignoredReason ?? null,
    };
  const answer = (["accepted", "coalesced", "duplicate", "delivered"] as const).find((w) => words.includes(w)) ?? null;
  return { answer, unconfirmed, ignoredReason: null };
}

/**
 * The body of one event's request: its stored payload as it is when that is a JSON object, else
 * wrapped in one ({"event_type": ..., "payload": ...}), since the gateway reads fields of an
 * object and fails on anything else (an array, a string) with a 500 that no retry mends.
 */
export function gatewayPayload(event: StoredEvent): string {
  const json = jsonText(event.payload);
  if (/^\s*\{/.test(json)) return json;
  return `{"event_type":${JSON.stringify(event.eventType)},"payload":${json}}`;
}

export class HermesDestination implements Destination {
  readonly type = "hermes" as const;
  readonly name: string;
  readonly timeoutS: number;
  readonly maxBodyBytes: number;
  readonly maxInflight: number;
  readonly idempotency: Idempotency;
  readonly unwrap: boolean;
  readonly ignoredIssueAfter: number;
  private readonly env: Env;
  /** The gateway's pace as last read, and the subscriptions file's stamp when it was. */
  private paceCache: { stamp: string; pace: Pace } | null = null;

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
    // Ignored documents mean the route's own filter or script vetoes what we send; with unwrap the
    // gateway sees original events, which its filter was written for, so ignored is expected.
    this.ignoredIssueAfter = this.unwrap ? 0 : (opts.ignoredIssueAfter ?? IGNORED_ISSUE_AFTER);
  }

  /**
   * Its own rate if it has one; else the gateway's: the route's rate_limit in the subscriptions
   * file, else [hermes] rate_limit, per minute. The file is read again only when it changed.
   */
  pace(): Pace | null {
    if (this.opts.rate !== undefined) return this.opts.rate ? { rate: this.opts.rate, from: "its rate" } : null;
    const path = this.subscriptionsPath;
    let stamp = "missing";
    try {
      const st = statSync(path);
      stamp = `${st.mtimeMs}:${st.size}:${st.ino}`;
    } catch {
      // unreadable: the gateway's default, and deliveries say what is wrong with the file
    }
    if (this.paceCache?.stamp === stamp) return this.paceCache.pace;
    const route = stamp === "missing" ? null : readRoute(path, this.opts.route);
    const own = route !== null && !("kind" in route) ? route.rateLimit : null;
    const limit = this.opts.gatewayRateLimit ?? GATEWAY_RATE_LIMIT;
    const pace: Pace =
      own !== null
        ? { rate: { limit: own, windowS: GATEWAY_WINDOW_S }, from: `the route's rate_limit in ${path}` }
        : {
            rate: { limit, windowS: GATEWAY_WINDOW_S },
            from: `the gateway's rate_limit ([hermes] rate_limit = ${limit})`,
          };
    this.paceCache = { stamp, pace };
    return pace;
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
    if (base.protocol !== "http:" && base.protocol !== "https:")
      return configOutcome("bad hermes.base_url", "hermes.base_url must be http(s)");
    const prefix = profile === null ? "" : `/p/${encodeURIComponent(profile)}`;
    const path = `${prefix}/webhooks/${encodeURIComponent(this.opts.route)}`;
    return `${base.origin}${base.pathname.replace(/\/+$/, "")}${path}`;
  }

  /** The route's secret from the subscriptions file, read now: the completion hook signs with it. */
  outcomeSecrets(): string[] {
    const route = readRoute(this.subscriptionsPath, this.opts.route);
    return "kind" in route || checkWhsec(route.secret) ? [] : [route.secret];
  }

  async deliver(body: string, ctx: DeliveryContext): Promise<Outcome> {
    // Secret and profile are read fresh on every attempt: rotation without restart.
    const route = readRoute(this.subscriptionsPath, this.opts.route);
    if ("kind" in route) return route;
    const checked = checkWhsec(route.secret);
    if (checked) return checked;
    const url = this.url(route.profile);
    if (typeof url !== "string") return url;
    const answers: Outcome[] = [];
    const resume = ctx.resume;
    // A paced gateway counts every request: what an earlier attempt got through is not sent again.
    const skipTaken = this.unwrap && this.pace() !== null;
    const o = await deliverBatch(body, ctx, {
      instanceId: this.opts.instanceId,
      maxBodyBytes: this.maxBodyBytes,
      unwrap: this.unwrap,
      // The destination's own header, else the source's (X-GitHub-Event): the batch's event type.
      eventHeader: this.opts.eventHeader ?? ctx.eventHeader,
      dedupHeader: this.opts.dedupHeader,
      payload: gatewayPayload,
      skipTaken,
      send: async (bytes, webhookId, named, unwrapped, event) => {
        // An event an earlier attempt saw taken is confirmed, unless that was itself an unconfirmed duplicate.
        const confirmed =
          unwrapped && resume !== undefined && event !== undefined && event.id < resume.before && !resume.unconfirmed;
        const answerCtx: AnswerContext = {
          confirmed,
          route: this.opts.route,
          profile: route.profile,
          subscriptionsPath: this.subscriptionsPath,
        };
        const r = await this.send(url, route.secret, bytes, webhookId, ctx, answerCtx, named);
        if (r.kind === "ok") answers.push(r);
        return r;
      },
    });
    if (!this.unwrap) return o;
    // Events skipped as taken carry over what was said of them.
    const carried = skipTaken && resume?.unconfirmed === true;
    if (o.kind !== "ok") return { ...o, unconfirmed: carried || answers.some((a) => a.unconfirmed) };
    const said = attemptAnswer(answers);
    return { ...o, ...said, unconfirmed: said.unconfirmed || carried };
  }

  private async send(
    url: string,
    secret: string,
    body: Uint8Array,
    webhookId: string,
    ctx: DeliveryContext,
    answerCtx: AnswerContext,
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
    return hermesOutcome(r, ctx.clock.now(), answerCtx);
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
        if (isSet(route.events))
          problems.push(
            `route "${this.opts.route}" sets events in ${this.subscriptionsPath}; ` +
              "turn it off for a route hookspool feeds (or set unwrap = true)",
          );
        if (isSet(route.coalesce))
          problems.push(
            `route "${this.opts.route}" sets coalesce in ${this.subscriptionsPath}; ` +
              "turn it off for a route hookspool feeds (or set unwrap = true)",
          );
      }
    }
    problems.push(...namedHeaderProblems({ event_header: this.opts.eventHeader, dedup_header: this.opts.dedupHeader }));
    return problems;
  }
}

/** A config outcome when a whsec_ route secret is not base64, else null. */
function checkWhsec(secret: string): Outcome | null {
  return usableSecret(secret)
    ? null
    : configOutcome("route secret is not valid whsec_ base64", "the route secret is not valid whsec_ base64");
}
