// How a template source verifies a request, scheme by scheme, and the parts those schemes share:
// the signed message built from a recipe, where the timestamp comes from, and the grammar of the
// signature header. The comparisons themselves are verify.ts's.
import { getText } from "./get-path.ts";
import type { HookRequest, VerifyFailure } from "./types.ts";
import {
  type Algorithm,
  type Data,
  ecdsaP256Why,
  ed25519Why,
  type Encoding,
  hmacAnyWhy,
  hmacEachWhy,
  hmacPrefixedWhy,
  MAX_SIGNATURES,
  sha256Hex,
  standardWebhooksWhy,
  staticTokenWhy,
  timestampedWhy,
  timestampWhy,
} from "./verify.ts";

/** The settings verification reads (a subset of TemplateSettings). */
export interface VerifySettings {
  scheme: string;
  header?: string;
  /** "base64": the secret is the base64 of the MAC key's bytes (Airtable's macSecretBase64). */
  secret_encoding?: "text" | "base64";
  /** A second signature header, made under the second secret (`secret2`): Box's primary and secondary keys. */
  header2?: string;
  prefix?: string;
  param?: string;
  callback_url?: string;
  tolerance_s?: number;
  sw_headers?: "webhook" | "svix" | "either";
  algorithm?: Algorithm;
  encoding?: Encoding;
  message?: string;
  timestamp_header?: string;
  timestamp_field?: string;
  id_header?: string;
  pairs?: string;
  ts_name?: string;
  sig_name?: string;
  signatures?: string;
  public_url?: string;
  body?: "json" | "form";
}

export const DEFAULT_TOLERANCE_S = 300;

/** The parts a message recipe may name; any other text in it is taken literally. */
export const RECIPE_PARTS = ["body", "ts", "id", "method", "url", "params"] as const;
type Part = (typeof RECIPE_PARTS)[number];

const PART = /\{([a-z]+)\}/g;

/** The recipe's parts in order: literal text, or a named part. */
export function parseRecipe(recipe: string): ({ text: string } | { part: string })[] {
  const out: ({ text: string } | { part: string })[] = [];
  let at = 0;
  for (const m of recipe.matchAll(PART)) {
    if (m.index > at) out.push({ text: recipe.slice(at, m.index) });
    out.push({ part: m[1] });
    at = m.index + m[0].length;
  }
  if (at < recipe.length) out.push({ text: recipe.slice(at) });
  return out;
}

/** The message recipe a scheme signs when the template sets none. */
export function defaultRecipe(t: Pick<VerifySettings, "scheme" | "message">): string {
  if (t.message !== undefined) return t.message;
  return t.scheme === "ed25519" || t.scheme === "ecdsa-p256" ? "{ts}{body}" : "{body}";
}

/** Whether the scheme, as set, checks a timestamp (so a stale or future request is refused). */
export function checksTimestamp(t: VerifySettings): boolean {
  if (t.scheme === "standard-webhooks" || t.scheme === "timestamped") return true;
  if (t.scheme === "hmac" || t.scheme === "ed25519" || t.scheme === "ecdsa-p256")
    return t.timestamp_header !== undefined || t.timestamp_field !== undefined || t.pairs !== undefined;
  return false;
}

/** Whether the signature covers the body (a token does not; a URL-only recipe does not). */
export function coversBody(t: VerifySettings): boolean {
  if (t.scheme === "static-token") return false;
  if (t.scheme === "hmac" || t.scheme === "ed25519" || t.scheme === "ecdsa-p256") {
    return parseRecipe(defaultRecipe(t)).some((p) => "part" in p && (p.part === "body" || p.part === "params"));
  }
  return true;
}

/**
 * A form body's parameters sorted by name (then value) and written name + value with nothing
 * between: the part Twilio signs after the URL.
 */
export function sortedParams(body: Uint8Array): string {
  const pairs = [...new URLSearchParams(new TextDecoder().decode(body))];
  pairs.sort(([a, av], [b, bv]) => (a < b ? -1 : a > b ? 1 : av < bv ? -1 : av > bv ? 1 : 0));
  return pairs.map(([k, v]) => k + v).join("");
}

/** The URL the sender signed: the public URL it calls, with the query string as received. */
export function signedUrl(t: VerifySettings, req: Pick<HookRequest, "rawQuery">): string {
  return `${t.public_url ?? ""}${req.rawQuery ? `?${req.rawQuery}` : ""}`;
}

/** The message the sender signed: the recipe's parts, the body as raw bytes. */
export function buildMessage(
  t: VerifySettings,
  parts: { body: Uint8Array; ts: string; id: string; method: string; url: string; params: () => string },
): Uint8Array {
  const enc = new TextEncoder();
  const chunks = parseRecipe(defaultRecipe(t)).map((p) => {
    if ("text" in p) return enc.encode(p.text);
    const name = p.part as Part;
    if (name === "body") return parts.body;
    if (name === "params") return enc.encode(parts.params());
    return enc.encode(parts[name]);
  });
  return Buffer.concat(chunks);
}

/** The timestamp and the candidate signatures a request carries, by the template's grammar. */
function readSignature(
  t: VerifySettings,
  req: HookRequest,
  name: string | undefined = t.header,
): { ts: string | null; candidates: string[] } | VerifyFailure {
  const header = name ? req.header(name) : null;
  if (header === null) return "missing_signature";
  let ts: string | null = null;
  let candidates: string[];
  if (t.pairs !== undefined) {
    const tsName = t.ts_name ?? "t";
    const sigName = t.sig_name ?? "v1";
    const times: string[] = [];
    candidates = [];
    for (const part of header.split(t.pairs)) {
      const eq = part.indexOf("=");
      if (eq < 0) continue;
      const name = part.slice(0, eq).trim();
      const value = part.slice(eq + 1).trim();
      if (name === tsName) times.push(value);
      else if (name === sigName) candidates.push(value);
    }
    if (times.length > 1) return "malformed";
    ts = times[0] ?? null;
    if (!candidates.length) return "malformed";
  } else {
    const prefix = t.prefix ?? "";
    const values = t.signatures !== undefined ? header.split(t.signatures).map((v) => v.trim()) : [header];
    candidates = values.filter((v) => v.startsWith(prefix)).map((v) => v.slice(prefix.length));
    if (!candidates.length) return "malformed";
  }
  if (t.timestamp_header !== undefined) ts = req.header(t.timestamp_header);
  else if (t.timestamp_field !== undefined) {
    // The body is not verified yet: an unreadable one has no timestamp, and the request fails.
    try {
      ts = getText(req.json(), t.timestamp_field);
    } catch {
      return "malformed";
    }
  }
  return { ts, candidates };
}

/**
 * The two signature headers of a template with `header2`: each one's candidates (none when it is
 * absent or unreadable), and the timestamp, which both share. Only when neither can be read does
 * the request fail here.
 */
function readBoth(
  t: VerifySettings,
  req: HookRequest,
): { ts: string | null; first: string[]; second: string[] } | VerifyFailure {
  const a = readSignature(t, req);
  const b = readSignature(t, req, t.header2);
  if (typeof a === "string" && typeof b === "string")
    return a === "missing_signature" && b === "missing_signature"
      ? "missing_signature"
      : a === "missing_signature"
        ? b
        : a;
  const ts = typeof a === "string" ? (b as { ts: string | null }).ts : a.ts;
  return {
    ts,
    first: typeof a === "string" ? [] : a.candidates,
    second: typeof b === "string" ? [] : b.candidates,
  };
}

/** Why the request is not verified under the generic schemes (hmac, ed25519, ecdsa-p256), or null. */
function genericWhy(t: VerifySettings, req: HookRequest, secret: string, secret2: string): VerifyFailure | null {
  const read = t.header2 !== undefined ? readBoth(t, req) : readSignature(t, req);
  if (typeof read === "string") return read;
  const { ts } = read;
  const candidates = "candidates" in read ? read.candidates : [...read.first, ...read.second];
  // Each public-key check costs far more than a MAC: no sender needs more than a couple.
  if (candidates.length > MAX_SIGNATURES) return "malformed";
  if (checksTimestamp(t)) {
    const stale = timestampWhy(ts, req.now, t.tolerance_s ?? DEFAULT_TOLERANCE_S, {
      rfc3339: t.timestamp_header !== undefined,
    });
    if (stale) return stale;
  }
  const message = buildMessage(t, {
    body: req.body,
    ts: ts ?? "",
    id: (t.id_header ? req.header(t.id_header) : null) ?? "",
    method: req.method,
    url: signedUrl(t, req),
    params: () => sortedParams(req.body),
  });
  if (t.scheme === "ed25519")
    return firstPass(candidates.map((c) => ed25519Why(c, secret, message, { encoding: t.encoding ?? "hex" })));
  if (t.scheme === "ecdsa-p256")
    return firstPass(candidates.map((c) => ecdsaP256Why(c, secret, message, { encoding: t.encoding ?? "base64" })));
  const mac = { algorithm: t.algorithm ?? "sha256", encoding: t.encoding ?? "hex" } as const;
  // Both keys are tried every time, each on its own header's signatures: either verifying is
  // enough, so a sender rotating one key at a time never fails a delivery.
  if ("first" in read)
    return hmacEachWhy(
      [
        { candidates: read.first, secret: macKey(t, secret) },
        { candidates: read.second, secret: macKey(t, secret2) },
      ],
      message,
      mac,
    );
  if (secret.length === 0) return "mismatch";
  return hmacAnyWhy(candidates, macKey(t, secret), message, mac);
}

/** The schemes whose secret is an HMAC key, which `secret_encoding` may give as base64. */
export const MAC_KEY_SCHEMES = [
  "hmac-sha256-hex",
  "hmac-sha1-hex",
  "hmac-sha256-base64",
  "hmac-sha1-base64-url",
  "timestamped",
  "hmac",
];

/** An HMAC key as the secret gives it: its text, or the bytes its base64 names. */
function macKey(t: VerifySettings, secret: string): Data {
  return t.secret_encoding === "base64" ? Buffer.from(secret, "base64") : secret;
}

function firstPass(verdicts: (VerifyFailure | null)[]): VerifyFailure | null {
  if (verdicts.includes(null)) return null;
  return verdicts.every((v) => v === "malformed") ? "malformed" : "mismatch";
}

/**
 * The three Standard Webhooks headers of a request: the webhook-* names, the svix-* names a Svix
 * sender uses without white-labelling (Resend, Clerk), or (`either`, the default) whichever set
 * carries a signature, webhook-* first. One set or the other, never a mix.
 */
export function standardWebhooksHeaders(
  req: HookRequest,
  names: VerifySettings["sw_headers"] = "either",
): { id: string | null; timestamp: string | null; signature: string | null } {
  const p =
    names === "either"
      ? req.header("webhook-signature") !== null
        ? "webhook"
        : req.header("svix-signature") !== null
          ? "svix"
          : "webhook"
      : names;
  return {
    id: req.header(`${p}-id`),
    timestamp: req.header(`${p}-timestamp`),
    signature: req.header(`${p}-signature`),
  };
}

function concat(a: Uint8Array, b: string): Uint8Array {
  return Buffer.concat([a, new TextEncoder().encode(b)]);
}

/** The verifier a (checked) template describes: null when verified, else why not. */
export function schemeVerifier(
  t: VerifySettings,
): (req: HookRequest, secret: string, secret2?: string) => VerifyFailure | null {
  const prefix = t.prefix ?? "";
  const tolerance = t.tolerance_s ?? DEFAULT_TOLERANCE_S;
  return (req, secret, secret2 = "") => {
    const h = t.header ? req.header(t.header) : null;
    switch (t.scheme) {
      case "hmac-sha256-hex":
        return hmacPrefixedWhy(h, prefix, macKey(t, secret), req.body, { algorithm: "sha256", encoding: "hex" });
      case "hmac-sha1-hex":
        return hmacPrefixedWhy(h, prefix, macKey(t, secret), req.body, { algorithm: "sha1", encoding: "hex" });
      case "hmac-sha256-base64":
        return hmacPrefixedWhy(h, prefix, macKey(t, secret), req.body, { algorithm: "sha256", encoding: "base64" });
      case "hmac-sha1-base64-url":
        return hmacPrefixedWhy(h, prefix, macKey(t, secret), concat(req.body, t.callback_url ?? ""), {
          algorithm: "sha1",
          encoding: "base64",
        });
      case "standard-webhooks":
        return standardWebhooksWhy(standardWebhooksHeaders(req, t.sw_headers), secret, req.body, {
          now: req.now,
          toleranceS: tolerance,
        });
      case "timestamped":
        return timestampedWhy(h, macKey(t, secret), req.body, { now: req.now, toleranceS: tolerance });
      case "static-token": {
        if (t.param) return staticTokenWhy(req.query[t.param] ?? null, secret);
        if (h === null) return "missing_signature";
        if (!h.startsWith(prefix)) return "malformed";
        return staticTokenWhy(h.slice(prefix.length), secret);
      }
      case "hmac":
      case "ed25519":
      case "ecdsa-p256":
        return genericWhy(t, req, secret, secret2);
      default:
        return "mismatch";
    }
  };
}

/**
 * The dedup id a scheme implies when the template sets no `dedup`, so that a signed request
 * replayed within its timestamp tolerance is not queued twice: Standard Webhooks carries a
 * message id (webhook-id, or svix-id from Svix senders), and so does a generic scheme given an
 * `id_header`; a timestamped signature with no id stands in for one (hashed: the column never
 * holds a signature). Other schemes have no default.
 */
export function defaultDedup(t: VerifySettings): ((payload: unknown, req: HookRequest) => string | null) | undefined {
  if (t.scheme === "standard-webhooks") {
    const names = t.sw_headers ?? "either";
    return (_p, req) =>
      (names === "either" ? req.header("webhook-id") || req.header("svix-id") : req.header(`${names}-id`)) || null;
  }
  if ((t.scheme === "hmac" || t.scheme === "ed25519" || t.scheme === "ecdsa-p256") && t.id_header) {
    const id = t.id_header;
    return (_p, req) => req.header(id) || null;
  }
  if ((t.scheme === "timestamped" || checksTimestamp(t)) && t.header) {
    const header = t.header;
    return (_p, req) => {
      const sig = req.header(header);
      return sig ? `sig:${sha256Hex(sig)}` : null;
    };
  }
  return undefined;
}
