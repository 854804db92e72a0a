// The template source: a source described by settings instead of code, for any service that
// sends a signed or tokened POST. Verification is template-verify.ts's, selectors
// template-select.ts's, the check of a table template-check.ts's.
import { bodySha256 } from "./dedup.ts";
import { getPath } from "./get-path.ts";
import { select, holds, alternatives } from "./template-select.ts";
import { defaultDedup, schemeVerifier, type VerifySettings } from "./template-verify.ts";
import {
  type Attrs,
  BadPayload,
  type HookRequest,
  type HookResponse,
  response,
  type SourcePlugin,
  type Verdict,
} from "./types.ts";
import { staticTokenWhy } from "./verify.ts";

export { checkTemplate, type TemplateProblem } from "./template-check.ts";
export { defaultDedup, standardWebhooksHeaders } from "./template-verify.ts";

export const TEMPLATE_KEYS = [
  "scheme",
  "header",
  "header2",
  "prefix",
  "param",
  "callback_url",
  "head_handshake",
  "key",
  "dedup",
  "ignore",
  "event_type",
  "version",
  "attrs",
  "sender_retries",
  "tolerance_s",
  "sw_headers",
  "algorithm",
  "encoding",
  "message",
  "timestamp_header",
  "timestamp_field",
  "id_header",
  "pairs",
  "ts_name",
  "sig_name",
  "signatures",
  "public_url",
  "body",
  "form_json",
  "echo_when",
  "echo_field",
  "get_verify",
  "reply_when",
  "reply",
  "reply_type",
  "ack",
  "ack_type",
  "split",
  "learn",
  "echo_unsigned",
  "echo_method",
  "echo_reply",
  "secret_encoding",
] as const;

/** How each scheme verifies, and which keys it needs. */
export const SCHEMES = {
  "hmac-sha256-hex": {
    needs: ["header"],
    doc: "HMAC-SHA256 of the body, hex, in `header` after `prefix` (GitHub: X-Hub-Signature-256, sha256=)",
  },
  "hmac-sha1-hex": { needs: ["header"], doc: "HMAC-SHA1 of the body, hex, in `header` after `prefix`" },
  "hmac-sha256-base64": { needs: ["header"], doc: "HMAC-SHA256 of the body, base64, in `header` after `prefix`" },
  "hmac-sha1-base64-url": {
    needs: ["header", "callback_url"],
    doc: "HMAC-SHA1 of the body followed by `callback_url`, base64 (Trello)",
  },
  "standard-webhooks": {
    needs: [],
    doc:
      "webhook-id, webhook-timestamp, webhook-signature (Standard Webhooks); " +
      "svix-id, svix-timestamp, svix-signature from Svix senders (`sw_headers`)",
  },
  timestamped: { needs: ["header"], doc: "`t=<unix>,v1=<hex>` in `header`, HMAC-SHA256 of `<t>.<body>`" },
  "static-token": { needs: [], doc: "a shared token in `header` (after `prefix`) or in the query parameter `param`" },
  hmac: {
    needs: ["header"],
    doc:
      "an HMAC (`algorithm`, `encoding`) of the `message` recipe in `header`, " +
      "after `prefix` or as `pairs`, with a timestamp from `timestamp_header`, " +
      "`timestamp_field` or a pair; with `header2`, a second signature under `secret2` " +
      "(Slack, Paddle, PagerDuty, HubSpot, Twilio, Box)",
  },
  ed25519: {
    needs: ["header"],
    doc:
      "an Ed25519 signature (hex) in `header` of the `message` recipe, " +
      "default `{ts}{body}`, under the sender's public key as the secret (Discord)",
  },
  "ecdsa-p256": {
    needs: ["header"],
    doc:
      "an ECDSA P-256 SHA-256 signature (base64 DER) in `header` of the `message` recipe, " +
      "default `{ts}{body}`, under the sender's public key as the secret (SendGrid)",
  },
} as const;

export type Scheme = keyof typeof SCHEMES;

export interface TemplateSettings extends VerifySettings {
  scheme: Scheme;
  head_handshake?: boolean;
  /** One selector or several joined with ":". */
  key: string | string[];
  /** A selector, body_sha256, or none; unset: the scheme's default (see defaultDedup). */
  dedup?: string;
  /** Event types acked with "ignored" and not enqueued (GitHub's ping). */
  ignore?: string | string[];
  event_type?: string;
  /**
   * A selector for the event's version by the provider's clock ("field:created",
   * "header:X-Shopify-Triggered-At"): a number, numeric text or an RFC 3339 or ISO 8601 time.
   */
  version?: string;
  attrs?: Record<string, string>;
  sender_retries?: boolean;
  form_json?: string;
  echo_when?: string;
  echo_field?: string;
  get_verify?: boolean;
  reply_when?: string;
  reply?: string;
  reply_type?: string;
  ack?: string;
  ack_type?: string;
  /** A payload path to an array, or "*" for a body that is the array: one event per element. */
  split?: string;
  /**
   * A handshake that teaches the secret: "header:<Name>" (echoed back, Asana) or "field:<path>" of an unsigned JSON
   * POST (Notion).
   */
  learn?: string;
  /**
   * A verification request that carries no signature, answered before verify with the value it
   * brought: "query:<name>" (Dropbox's `challenge`, Microsoft Graph's `validationToken`) or
   * "header:<Name>" (Okta's X-Okta-Verification-Challenge).
   */
  echo_unsigned?: string;
  /** The method of that request: GET (default) or POST. */
  echo_method?: "GET" | "POST";
  /** How it is answered: "text" (default: the value as text/plain) or "json:<field>" ({"<field>": value}). */
  echo_reply?: string;
}

/** The request headers a template reads to classify (its header: selectors, the default dedup's id header). */
export function templateHeaders(t: TemplateSettings): string[] {
  const selectors = [
    ...([] as string[]).concat(t.key ?? []),
    t.dedup,
    t.event_type,
    t.version,
    ...Object.values(t.attrs ?? {}),
  ];
  const out = selectors
    .filter((x): x is string => typeof x === "string")
    .flatMap(alternatives)
    .filter((x) => x.startsWith("header:"))
    .map((x) => x.slice(7));
  if (t.scheme === "standard-webhooks" && t.dedup === undefined) out.push("webhook-id", "svix-id");
  if (t.id_header && t.dedup === undefined) out.push(t.id_header);
  return out;
}

function dedupFor(t: TemplateSettings): ((payload: unknown, req: HookRequest) => string | null) | undefined {
  if (t.dedup === "none") return undefined;
  if (t.dedup === "body_sha256") return bodySha256;
  if (t.dedup !== undefined) {
    const sel = t.dedup;
    return (payload, req) => select(sel, payload, req);
  }
  return defaultDedup(t);
}

/** A form body as an object (the first value of a repeated name), or one field's JSON (Slack's `payload=`). */
function formPayload(req: HookRequest, jsonField: string | undefined): unknown {
  const params = new URLSearchParams(req.text());
  // No prototype: a field named __proto__ is a field like any other.
  const out: Record<string, string> = Object.create(null);
  for (const [k, v] of params) if (!Object.hasOwn(out, k)) out[k] = v;
  if (jsonField !== undefined && Object.hasOwn(out, jsonField)) {
    try {
      return JSON.parse(out[jsonField]);
    } catch {
      throw new BadPayload(`the form field ${jsonField} is not valid JSON`, "not_json");
    }
  }
  return out;
}

/**
 * Build the source plugin a (checked) template describes. Its secret is named `secret` (and `secret2` with header2,
 * `verify_token` with get_verify).
 */
export function templateSource(t: TemplateSettings): SourcePlugin {
  const keySelectors = ([] as string[]).concat(t.key);
  const ignored = new Set(([] as string[]).concat(t.ignore ?? []));
  const why = schemeVerifier(t);
  const verify = (req: HookRequest, secret: string, secret2?: string): Verdict => why(req, secret, secret2) ?? true;
  const authHeaders: string[] = [];
  if (t.header) authHeaders.push(t.header);
  if (t.header2) authHeaders.push(t.header2);
  if (t.scheme === "standard-webhooks") authHeaders.push("webhook-signature", "svix-signature");
  const payloadOf = (req: HookRequest): unknown =>
    t.body === "form" ? formPayload(req, t.form_json) : req.body.length ? req.json() : {};
  const eventType = (payload: unknown, req: HookRequest) =>
    t.event_type ? (select(t.event_type, payload, req) ?? "") : "";

  // Handshakes: a constant HEAD answer before verify (Trello); a GET whose verify token is
  // compared with a secret (Meta); after verify, an echo of a signed challenge field (Slack's
  // url_verification) or a constant reply (Discord's PING), neither queued.
  const afterVerify = (req: HookRequest): HookResponse | null => {
    if (!t.echo_when && !t.reply_when) return null;
    const payload = payloadOf(req);
    if (t.echo_when && t.echo_field && holds(t.echo_when, payload, req)) {
      const v = select(t.echo_field, payload, req);
      return v === null ? response(400) : response(200, v, { "Content-Type": "text/plain; charset=utf-8" });
    }
    if (t.reply_when && t.reply !== undefined && holds(t.reply_when, payload, req))
      return response(200, t.reply, { "Content-Type": t.reply_type ?? "application/json" });
    return null;
  };
  const unsignedEcho = t.echo_unsigned ? echoUnsigned(t.echo_unsigned, t.echo_method ?? "GET", t.echo_reply) : null;
  const challenge = t.head_handshake
    ? (req: HookRequest) => (req.method === "HEAD" ? response(200) : null)
    : unsignedEcho
      ? unsignedEcho
      : t.echo_when || t.reply_when
        ? afterVerify
        : undefined;
  const splitPath = t.split;
  const versionSel = t.version;
  const learn = t.learn ? learnerFor(t.learn, t.header) : undefined;

  return {
    secrets: ["secret", ...(t.header2 ? ["secret2"] : []), ...(t.get_verify ? ["verify_token"] : [])],
    authHeaders,
    secretParams: t.get_verify ? ["hub.verify_token"] : undefined,
    senderRetries: t.sender_retries,
    challengeUnauthenticated: t.head_handshake === true || unsignedEcho !== null,
    verify: (req, secrets) => verify(req, secrets.get("secret"), t.header2 ? secrets.get("secret2") : undefined),
    // Trello checks a callback URL with a HEAD that carries no body and no signature; the
    // answer is constant, so answering it before verify is no oracle.
    challenge,
    handshake: t.get_verify
      ? (req, secrets) => {
          if (req.method !== "GET") return null;
          if (req.query["hub.mode"] !== "subscribe") return response(403);
          if (staticTokenWhy(req.query["hub.verify_token"] ?? null, secrets.get("verify_token")) !== null)
            return response(403);
          return response(200, req.query["hub.challenge"] ?? "", { "Content-Type": "text/plain; charset=utf-8" });
        }
      : undefined,
    learn,
    ack: t.ack !== undefined ? response(200, t.ack, { "Content-Type": t.ack_type ?? "application/json" }) : undefined,
    ignore: ignored.size
      ? (req) => {
          const type = eventType(payloadOf(req), req);
          return ignored.has(type) ? type : null;
        }
      : undefined,
    payload: t.body === "form" ? payloadOf : undefined,
    split: splitPath
      ? (payload) => {
          const list = splitPath === "*" ? payload : getPath(payload, splitPath);
          if (!Array.isArray(list))
            throw new BadPayload(`split: ${splitPath === "*" ? "the body" : splitPath} is not an array`);
          return list;
        }
      : undefined,
    key(payload, req) {
      const parts = keySelectors.map((sel) => {
        const v = select(sel, payload, req);
        if (v === null) throw new BadPayload(`key selector ${sel} has no value`, "key_missing");
        return v;
      });
      return parts.join(":");
    },
    dedupId: dedupFor(t),
    eventType,
    version: versionSel ? (payload, req) => select(versionSel, payload, req) : undefined,
    attrs: t.attrs
      ? (payload, req) => {
          const out: Attrs = {};
          for (const [name, sel] of Object.entries(t.attrs ?? {})) {
            const v = select(sel, payload, req);
            if (v !== null) out[name] = v;
          }
          return out;
        }
      : undefined,
  };
}

/** What an unsigned echo may send back: printable ASCII, at most this long (anything else: 400). */
const ECHO_VALUE = /^[\x20-\x7e]{1,1024}$/;

/**
 * An unsigned verification request's answer: the value it carried, and nothing else, so the answer
 * says nothing about the secret (it runs before verify). A request of the method without the
 * value is not one: it goes on (a GET then gets 405). The text answer is marked nosniff, since it
 * echoes what the request chose.
 */
function echoUnsigned(
  spec: string,
  method: "GET" | "POST",
  reply: string | undefined,
): (req: HookRequest) => HookResponse | null {
  const colon = spec.indexOf(":");
  const kind = spec.slice(0, colon);
  const name = spec.slice(colon + 1);
  const field = reply?.startsWith("json:") ? reply.slice(5) : null;
  return (req) => {
    if (req.method !== method) return null;
    const v = kind === "query" ? req.query[name] : req.header(name);
    if (v === undefined || v === null) return null;
    if (!ECHO_VALUE.test(v)) return response(400);
    const headers = { "Cache-Control": "no-store", "X-Content-Type-Options": "nosniff" };
    return field === null
      ? response(200, v, { ...headers, "Content-Type": "text/plain; charset=utf-8" })
      : response(200, JSON.stringify({ [field]: v }), { ...headers, "Content-Type": "application/json" });
  };
}

/**
 * The learning handshake of a template. "header:X-Hook-Secret": a POST carrying that header
 * offers its value, and the answer echoes it (Asana). "field:verification_token": a POST with no
 * signature header whose JSON body holds that string field offers it, answered 200 (Notion).
 */
function learnerFor(
  spec: string,
  signatureHeader: string | undefined,
): (req: HookRequest) => { secret: string; response: HookResponse } | null {
  const colon = spec.indexOf(":");
  const kind = spec.slice(0, colon);
  const name = spec.slice(colon + 1);
  if (kind === "header") {
    return (req) => {
      if (req.method !== "POST") return null;
      const offered = req.header(name);
      return offered ? { secret: offered, response: response(200, "", { [name]: offered }) } : null;
    };
  }
  return (req) => {
    if (req.method !== "POST" || (signatureHeader && req.header(signatureHeader))) return null;
    let body: unknown;
    try {
      body = req.json();
    } catch {
      return null;
    }
    const offered = getPath(body, name);
    return typeof offered === "string" && offered.length > 0 ? { secret: offered, response: response(200) } : null;
  };
}
