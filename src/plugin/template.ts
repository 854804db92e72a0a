// The template source: a source described by settings instead of code, for any
// service that sends a signed or tokened JSON POST.
import { bodySha256 } from "./dedup.ts";
import { getPath, getText } from "./get-path.ts";
import { type Attrs, BadPayload, type HookRequest, response, type SourcePlugin, type Verdict } from "./types.ts";
import { hmacPrefixedWhy, sha256Hex, standardWebhooksWhy, staticTokenWhy, timestampedWhy } from "./verify.ts";

export const TEMPLATE_KEYS = ["scheme", "header", "prefix", "param", "callback_url", "head_handshake", "key", "dedup", "ignore", "event_type", "attrs", "sender_retries"] as const;

/** How each scheme verifies, and which keys it needs. */
export const SCHEMES = {
  "hmac-sha256-hex": { needs: ["header"], doc: "HMAC-SHA256 of the body, hex, in `header` after `prefix` (GitHub: X-Hub-Signature-256, sha256=)" },
  "hmac-sha1-hex": { needs: ["header"], doc: "HMAC-SHA1 of the body, hex, in `header` after `prefix`" },
  "hmac-sha256-base64": { needs: ["header"], doc: "HMAC-SHA256 of the body, base64, in `header` after `prefix`" },
  "hmac-sha1-base64-url": { needs: ["header", "callback_url"], doc: "HMAC-SHA1 of the body followed by `callback_url`, base64 (Trello)" },
  "standard-webhooks": { needs: [], doc: "webhook-id, webhook-timestamp, webhook-signature (Standard Webhooks); svix-id, svix-timestamp, svix-signature from Svix senders" },
  timestamped: { needs: ["header"], doc: "`t=<unix>,v1=<hex>` in `header`, HMAC-SHA256 of `<t>.<body>`" },
  "static-token": { needs: [], doc: "a shared token in `header` (after `prefix`) or in the query parameter `param`" },
} as const;

export type Scheme = keyof typeof SCHEMES;

export interface TemplateSettings {
  scheme: Scheme;
  header?: string;
  prefix?: string;
  param?: string;
  callback_url?: string;
  head_handshake?: boolean;
  /** One selector or several joined with ":". */
  key: string | string[];
  /** A selector, body_sha256, or none; unset: the scheme's default (see defaultDedup). */
  dedup?: string;
  /** Event types acked with "ignored" and not enqueued (GitHub's ping). */
  ignore?: string | string[];
  event_type?: string;
  attrs?: Record<string, string>;
  sender_retries?: boolean;
}

export interface TemplateProblem {
  key: string;
  message: string;
}

const STRING_KEYS = ["scheme", "header", "prefix", "param", "callback_url", "dedup", "event_type"] as const;

/**
 * Check a template table. Selectors: `header:<Name>`, `field:<dotted.path>` or a bare path
 * (a payload field), `const:<text>`; `dedup` also takes `body_sha256` and `none`.
 */
export function checkTemplate(t: Record<string, unknown>): TemplateProblem[] {
  const out: TemplateProblem[] = [];
  for (const k of Object.keys(t)) {
    if (!(TEMPLATE_KEYS as readonly string[]).includes(k)) out.push({ key: k, message: "unknown template key" });
  }
  for (const k of STRING_KEYS) {
    if (t[k] !== undefined && (typeof t[k] !== "string" || t[k] === "")) out.push({ key: k, message: "expected a non-empty string" });
  }
  for (const k of ["head_handshake", "sender_retries"] as const) {
    if (t[k] !== undefined && typeof t[k] !== "boolean") out.push({ key: k, message: "expected true or false" });
  }
  const scheme = t.scheme as string | undefined;
  if (scheme === undefined) out.push({ key: "scheme", message: `required: one of ${Object.keys(SCHEMES).join(", ")}` });
  else if (!Object.hasOwn(SCHEMES, scheme)) out.push({ key: "scheme", message: `unknown scheme "${scheme}": one of ${Object.keys(SCHEMES).join(", ")}` });
  else {
    for (const need of SCHEMES[scheme as Scheme].needs) {
      if (t[need] === undefined) out.push({ key: need, message: `required by scheme ${scheme}` });
    }
    if (scheme === "static-token" && (t.header === undefined) === (t.param === undefined)) {
      out.push({ key: "header", message: "scheme static-token needs exactly one of header or param" });
    }
  }
  const isSelectorList = (v: unknown) => typeof v === "string" || (Array.isArray(v) && v.length > 0 && v.every((x) => typeof x === "string"));
  if (t.key === undefined) out.push({ key: "key", message: "required: the payload field(s) that form the coalesce key" });
  else if (!isSelectorList(t.key)) out.push({ key: "key", message: "expected a selector or a list of selectors" });
  if (t.ignore !== undefined) {
    if (!isSelectorList(t.ignore)) out.push({ key: "ignore", message: "expected an event type or a list of them" });
    else if (t.event_type === undefined) out.push({ key: "ignore", message: "needs event_type (ignore matches event types)" });
  }
  if (t.attrs !== undefined) {
    const a = t.attrs;
    if (typeof a !== "object" || a === null || Array.isArray(a) || !Object.values(a).every((v) => typeof v === "string")) {
      out.push({ key: "attrs", message: "expected a table of name = selector" });
    }
  }
  for (const k of ["key", "event_type", "dedup"] as const) {
    for (const sel of ([] as unknown[]).concat(t[k] ?? [])) {
      if (typeof sel === "string" && !selectorOk(sel, k === "dedup")) out.push({ key: k, message: `bad selector "${sel}"` });
    }
  }
  return out;
}

/**
 * The three Standard Webhooks headers of a request: the webhook-* names, or, when a request
 * carries no webhook-signature, the svix-* names a Svix sender uses without white-labelling
 * (Resend, Clerk). One set or the other, never a mix.
 */
export function standardWebhooksHeaders(req: HookRequest): { id: string | null; timestamp: string | null; signature: string | null } {
  const p = req.header("webhook-signature") !== null ? "webhook" : req.header("svix-signature") !== null ? "svix" : "webhook";
  return { id: req.header(`${p}-id`), timestamp: req.header(`${p}-timestamp`), signature: req.header(`${p}-signature`) };
}

/** The request headers a template reads to classify (its header: selectors, the default dedup's id header). */
export function templateHeaders(t: TemplateSettings): string[] {
  const selectors = [...([] as string[]).concat(t.key ?? []), t.dedup, t.event_type, ...Object.values(t.attrs ?? {})];
  const out = selectors
    .filter((x): x is string => typeof x === "string")
    .flatMap(alternatives)
    .filter((x) => x.startsWith("header:"))
    .map((x) => x.slice(7));
  if (t.scheme === "standard-webhooks" && t.dedup === undefined) out.push("webhook-id", "svix-id");
  return out;
}

const BARE_PATH = /^[A-Za-z0-9_$-]+(\.[A-Za-z0-9_$-]+)*$/;

/**
 * The alternatives of a selector: `a|b|c` is tried left to right, the first with a value wins
 * (a `const:` last is a default). `keyof:` takes its own `|` list, so it is one alternative.
 */
function alternatives(sel: string): string[] {
  return sel.startsWith("keyof:") ? [sel] : sel.split("|");
}

function selectorOk(sel: string, dedup: boolean): boolean {
  if (dedup && (sel === "body_sha256" || sel === "none")) return true;
  return alternatives(sel).every((alt) => {
    if (alt.startsWith("keyof:")) return alt.slice(6).split("|").every((p) => BARE_PATH.test(p));
    if (/^(header|field|const):(.+)$/.test(alt)) return true;
    return BARE_PATH.test(alt);
  });
}

/** One alternative's value, or null when it has none. */
function selectOne(sel: string, payload: unknown, req: HookRequest): string | null {
  if (sel.startsWith("header:")) return req.header(sel.slice(7));
  if (sel.startsWith("const:")) return sel.slice(6);
  // The name of the first of these payload fields that is present (Telegram's update kinds).
  if (sel.startsWith("keyof:")) return sel.slice(6).split("|").find((p) => getPath(payload, p) != null) ?? null;
  return getText(payload, sel.startsWith("field:") ? sel.slice(6) : sel);
}

/** A selector's value for this request: its first alternative with a non-empty value, or null. */
function select(sel: string, payload: unknown, req: HookRequest): string | null {
  for (const alt of alternatives(sel)) {
    const v = selectOne(alt, payload, req);
    if (v !== null && v !== "") return v;
  }
  return null;
}

function concat(a: Uint8Array, b: string): Uint8Array {
  const tail = new TextEncoder().encode(b);
  const out = new Uint8Array(a.length + tail.length);
  out.set(a, 0);
  out.set(tail, a.length);
  return out;
}

/**
 * The dedup id a scheme implies when the template sets no `dedup`, so that a signed request
 * replayed within its timestamp tolerance is not queued twice: Standard Webhooks carries a
 * message id (webhook-id, or svix-id from Svix senders); the t=,v1= scheme carries none, so the
 * signature header stands in for one (hashed: the column never holds a signature). Other
 * schemes have no default.
 */
export function defaultDedup(t: Pick<TemplateSettings, "scheme" | "header">): ((payload: unknown, req: HookRequest) => string | null) | undefined {
  if (t.scheme === "standard-webhooks") return (_p, req) => req.header("webhook-id") || req.header("svix-id") || null;
  if (t.scheme === "timestamped" && t.header) {
    const header = t.header;
    return (_p, req) => {
      const sig = req.header(header);
      return sig ? `sig:${sha256Hex(sig)}` : null;
    };
  }
  return undefined;
}

function dedupFor(t: TemplateSettings): ((payload: unknown, req: HookRequest) => string | null) | undefined {
  if (t.dedup === "none") return undefined;
  if (t.dedup === "body_sha256") return bodySha256;
  if (t.dedup !== undefined) {
    const sel = t.dedup;
    return (payload, req) => select(sel, payload, req) || null;
  }
  return defaultDedup(t);
}

/** Build the source plugin a (checked) template describes. Its one secret is named `secret`. */
export function templateSource(t: TemplateSettings): SourcePlugin {
  const keySelectors = ([] as string[]).concat(t.key);
  const ignored = new Set(([] as string[]).concat(t.ignore ?? []));
  const prefix = t.prefix ?? "";
  const verify = (req: HookRequest, secret: string): Verdict => {
    const h = t.header ? req.header(t.header) : null;
    const why = () => {
      switch (t.scheme) {
        case "hmac-sha256-hex":
          return hmacPrefixedWhy(h, prefix, secret, req.body, { algorithm: "sha256", encoding: "hex" });
        case "hmac-sha1-hex":
          return hmacPrefixedWhy(h, prefix, secret, req.body, { algorithm: "sha1", encoding: "hex" });
        case "hmac-sha256-base64":
          return hmacPrefixedWhy(h, prefix, secret, req.body, { algorithm: "sha256", encoding: "base64" });
        case "hmac-sha1-base64-url":
          return hmacPrefixedWhy(h, prefix, secret, concat(req.body, t.callback_url ?? ""), { algorithm: "sha1", encoding: "base64" });
        case "standard-webhooks":
          return standardWebhooksWhy(standardWebhooksHeaders(req), secret, req.body, { now: req.now });
        case "timestamped":
          return timestampedWhy(h, secret, req.body, { now: req.now });
        case "static-token": {
          if (t.param) return staticTokenWhy(req.query[t.param] ?? null, secret);
          if (h === null) return "missing_signature";
          if (!h.startsWith(prefix)) return "malformed";
          return staticTokenWhy(h.slice(prefix.length), secret);
        }
      }
    };
    return why() ?? true;
  };
  const authHeaders: string[] = [];
  if (t.header) authHeaders.push(t.header);
  if (t.scheme === "standard-webhooks") authHeaders.push("webhook-signature", "svix-signature");
  const eventType = (payload: unknown, req: HookRequest) => (t.event_type ? (select(t.event_type, payload, req) ?? "") : "");
  return {
    secrets: ["secret"],
    authHeaders,
    senderRetries: t.sender_retries,
    challengeUnauthenticated: t.head_handshake === true,
    verify: (req, secrets) => verify(req, secrets.get("secret")),
    // Trello checks a callback URL with a HEAD that carries no body and no signature; the
    // answer is constant, so answering it before verify is no oracle.
    challenge: t.head_handshake ? (req) => (req.method === "HEAD" ? response(200) : null) : undefined,
    ignore: ignored.size
      ? (req) => {
          const type = eventType(req.body.length ? req.json() : {}, req);
          return ignored.has(type) ? type : null;
        }
      : undefined,
    key(payload, req) {
      const parts = keySelectors.map((sel) => {
        const v = select(sel, payload, req);
        if (v === null || v === "") throw new BadPayload(`key selector ${sel} has no value`, "key_missing");
        return v;
      });
      return parts.join(":");
    },
    dedupId: dedupFor(t),
    eventType,
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
