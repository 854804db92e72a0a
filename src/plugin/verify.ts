// Signature, token and timestamp checks for sources, and signing for destinations (spec 10, 6.4).
// The only module that computes an HMAC or compares a secret (DESIGN.md stack table): every
// comparison goes through constantTimeEqual. A check answers false for anything a sender can
// get wrong (missing header, bad hex or base64, wrong prefix, stale time) and never throws for
// it; nothing here logs, and no error message carries a secret.
import { createHash, createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { importJWK, jwtVerify, type JWK } from "jose";
import type { Clock } from "../clock.ts";
import { HookspoolError } from "../errors.ts";

export type Data = string | Uint8Array;
export type Algorithm = "sha256" | "sha1" | "sha512";
export type Encoding = "hex" | "base64";
/** A public key as a sender publishes it (jose's JWK; the DOM type is not in our lib). */
export type JsonWebKey = JWK;

const ALGORITHMS: ReadonlySet<string> = new Set(["sha256", "sha1", "sha512"]);
const encoder = new TextEncoder();

function bytes(x: Data): Uint8Array {
  return typeof x === "string" ? encoder.encode(x) : x;
}

function concat(...parts: Data[]): Uint8Array {
  return Buffer.concat(parts.map(bytes));
}

// ---------------------------------------------------------------------------------------------
// Comparison and encodings

// Per-process random key: both sides are HMAC'd before timingSafeEqual, so inputs of any length
// compare as two 32-byte digests (no early exit on a length mismatch), and a sender cannot
// choose inputs whose digests collide because it never learns the key.
const compareKey = randomBytes(32);

/** Compare two secrets or signatures in constant time, whatever their lengths. */
export function constantTimeEqual(a: Data, b: Data): boolean {
  const da = createHmac("sha256", compareKey).update(bytes(a)).digest();
  const db = createHmac("sha256", compareKey).update(bytes(b)).digest();
  return timingSafeEqual(da, db);
}

/** Hex to bytes, or null when it is not an even run of hex digits (either case). */
function decodeHex(s: string): Uint8Array | null {
  return /^(?:[0-9a-fA-F]{2})+$/.test(s) ? Buffer.from(s, "hex") : null;
}

/** Standard base64, or base64url with or without padding; null when it is neither. */
function decodeBase64(s: string): Uint8Array | null {
  const body = s.replace(/={1,2}$/, "");
  const padded = body.length !== s.length;
  const std = /^[A-Za-z0-9+/]+$/.test(body);
  const url = /^[A-Za-z0-9_-]+$/.test(body);
  if (!std && !url) return null;
  if (body.length % 4 === 1 || (padded && s.length % 4 !== 0)) return null;
  return Buffer.from(body, std ? "base64" : "base64url");
}

function decode(s: string, encoding: Encoding): Uint8Array | null {
  return encoding === "hex" ? decodeHex(s) : decodeBase64(s);
}

/**
 * The Standard Webhooks / Hermes key rule (spec 6.4): a secret starting with whsec_ is the
 * base64 after the prefix, anything else is its raw UTF-8 bytes. Throws E_CONFIG for a whsec_
 * secret that is not base64 (a configuration mistake; the message never holds the secret).
 */
export function signingKey(secret: string): Uint8Array {
  if (!secret.startsWith("whsec_")) return encoder.encode(secret);
  const key = decodeBase64(secret.slice("whsec_".length));
  if (!key) throw new HookspoolError("E_CONFIG", "a whsec_ secret is not valid base64", { hint: "copy the secret again from the sender" });
  return key;
}

// ---------------------------------------------------------------------------------------------
// HMAC

/** The HMAC of data under key (a string key is its raw UTF-8, not signingKey), hex by default. */
export function hmac(key: Data, data: Data, opts: { algorithm?: Algorithm; encoding?: Encoding } = {}): string {
  return Buffer.from(mac(key, data, opts.algorithm ?? "sha256")).toString(opts.encoding ?? "hex");
}

function mac(key: Data, data: Data, algorithm: string): Uint8Array {
  // A bad algorithm name is a programming error, never a sender's.
  if (!ALGORITHMS.has(algorithm)) throw new TypeError(`unsupported HMAC algorithm ${algorithm}`);
  return createHmac(algorithm, bytes(key)).update(bytes(data)).digest();
}

/**
 * True when given (encoded) equals the HMAC of data. An empty secret never verifies: an empty
 * secret file must fail closed, not make every signature computable.
 */
function macMatches(given: string | null, secret: Data, data: Data, algorithm: string, encoding: Encoding): boolean {
  if (given === null || bytes(secret).length === 0) return false;
  const claimed = decode(given.trim(), encoding);
  return claimed !== null && constantTimeEqual(claimed, mac(secret, data, algorithm));
}

/** A hex HMAC (either case) of data under secret. */
export function hmacHex(signature: string | null, secret: Data, data: Data, algorithm: Algorithm = "sha256"): boolean {
  return macMatches(signature, secret, data, algorithm, "hex");
}

/** A base64 (or unpadded base64url) HMAC of data under secret. */
export function hmacB64(signature: string | null, secret: Data, data: Data, algorithm: Algorithm = "sha256"): boolean {
  return macMatches(signature, secret, data, algorithm, "base64");
}

/** A header of the form <prefix><hmac> (GitHub: "sha256=<hex>"); the prefix is case-sensitive. */
export function hmacPrefixed(
  header: string | null,
  prefix: string,
  secret: Data,
  data: Data,
  opts: { algorithm?: Algorithm; encoding?: Encoding } = {},
): boolean {
  if (header === null || !header.startsWith(prefix)) return false;
  return macMatches(header.slice(prefix.length), secret, data, opts.algorithm ?? "sha256", opts.encoding ?? "hex");
}

// ---------------------------------------------------------------------------------------------
// Timestamped schemes (spec 10: every one takes a tolerance, default 300 s, two-sided)

/**
 * abs(now - t) <= toleranceS: future-dated requests fail too. t is unix seconds (a decimal
 * string or a number); a value above 1e12 is taken as milliseconds. Anything else is false.
 */
export function timestampFresh(ts: string | number | null, now: number, toleranceS = 300): boolean {
  let t: number;
  if (typeof ts === "number") t = ts;
  else if (typeof ts === "string" && /^\d{1,16}(?:\.\d{1,9})?$/.test(ts.trim())) t = Number(ts.trim());
  else return false;
  if (!Number.isFinite(t) || t < 0) return false;
  if (t > 1e12) t /= 1000;
  return Math.abs(now - t) <= toleranceS;
}

/**
 * The t=<unix>,v1=<sig>[,v1=<sig>...] scheme (Stripe): the HMAC of "<t>.<body>" (t exactly as
 * sent), any v1 may match (a sender rotating its secret signs twice). Exactly one t is required.
 */
export function timestamped(
  header: string | null,
  secret: Data,
  body: Data,
  opts: { now: number; toleranceS?: number; algorithm?: Algorithm; encoding?: Encoding },
): boolean {
  if (header === null) return false;
  const times: string[] = [];
  const candidates: string[] = [];
  for (const part of header.split(",")) {
    const eq = part.indexOf("=");
    if (eq < 0) continue;
    const name = part.slice(0, eq).trim();
    if (name === "t") times.push(part.slice(eq + 1).trim());
    else if (name === "v1") candidates.push(part.slice(eq + 1).trim());
  }
  const t = times[0];
  if (times.length !== 1 || t === undefined || !candidates.length) return false;
  if (!timestampFresh(t, opts.now, opts.toleranceS ?? 300)) return false;
  const signed = concat(`${t}.`, body);
  const algorithm = opts.algorithm ?? "sha256";
  const encoding = opts.encoding ?? "hex";
  // Check every candidate rather than stopping at the first match; the work is the same per try.
  return candidates.map((c) => macMatches(c, secret, signed, algorithm, encoding)).includes(true);
}

/**
 * An HMAC over a message that embeds a timestamp sent in its own header (Zoom v0: message
 * "v0:<ts>:<body>", prefix "v0=", hex). The caller builds the message; parts are concatenated
 * as bytes so a body is never re-encoded.
 */
export function signedTimestamp(opts: {
  signature: string | null;
  prefix?: string;
  timestamp: string | null;
  secret: Data;
  message: Data | readonly Data[];
  now: number;
  toleranceS?: number;
  algorithm?: Algorithm;
  encoding?: Encoding;
}): boolean {
  if (!timestampFresh(opts.timestamp, opts.now, opts.toleranceS ?? 300)) return false;
  const message = typeof opts.message === "string" || opts.message instanceof Uint8Array ? opts.message : concat(...opts.message);
  return hmacPrefixed(opts.signature, opts.prefix ?? "", opts.secret, message, opts);
}

/**
 * Standard Webhooks: webhook-signature holds space-separated "v1,<base64 HMAC-SHA256>" entries
 * over "<id>.<timestamp>.<body>" under signingKey(secret); other versions are ignored and any
 * v1 under any listed secret passes (rotation). A whsec_ secret that is not base64 fails closed.
 */
export function standardWebhooks(
  h: { id: string | null; timestamp: string | null; signature: string | null },
  secret: string | readonly string[],
  body: Data,
  opts: { now: number; toleranceS?: number },
): boolean {
  const { id, timestamp, signature } = h;
  if (!id || timestamp === null || signature === null) return false;
  if (!timestampFresh(timestamp, opts.now, opts.toleranceS ?? 300)) return false;
  const candidates = signature
    .split(/\s+/)
    .filter((entry) => entry.startsWith("v1,"))
    .map((entry) => entry.slice(3));
  if (!candidates.length) return false;
  const signed = concat(`${id}.${timestamp}.`, body);
  let ok = false;
  for (const s of typeof secret === "string" ? [secret] : secret) {
    let key: Uint8Array;
    try {
      key = signingKey(s);
    } catch {
      continue;
    }
    for (const c of candidates) ok = macMatches(c, key, signed, "sha256", "base64") || ok;
  }
  return ok;
}

/** The "v1,<base64>" signature of spec 6.4 for one secret (emit one per secret on rotation). */
export function standardWebhooksSignature(secret: string, id: string, timestamp: number | string, body: Data): string {
  return `v1,${hmac(signingKey(secret), concat(`${id}.${timestamp}.`, body), { encoding: "base64" })}`;
}

// ---------------------------------------------------------------------------------------------
// Tokens and body hashes

/** A static token (URL parameter or header) equal to the secret; an empty secret never matches. */
export function staticToken(given: string | null, secret: string): boolean {
  if (given === null || secret.length === 0) return false;
  return constantTimeEqual(given, secret);
}

/** The lower-case hex SHA-256 of data. */
export function sha256Hex(data: Data): string {
  return createHash("sha256").update(bytes(data)).digest("hex");
}

/** Plaid's request_body_sha256 claim (hex, either case) against the body as received. */
export function bodySha256Matches(claimHex: string | null, body: Uint8Array): boolean {
  if (typeof claimHex !== "string") return false;
  const claim = decodeHex(claimHex);
  return claim !== null && constantTimeEqual(claim, createHash("sha256").update(body).digest());
}

// ---------------------------------------------------------------------------------------------
// Published keys (spec 10, Plaid bullet; spec 14.3.7 KeyCache, shared_key_cache)

export interface KeyCacheOptions {
  /** Fetch the key for kid (through net); null when the sender says there is no such key. */
  fetchKey: (kid: string) => Promise<JsonWebKey | null>;
  clock: Clock;
  /** At most one fetch per this many seconds for the whole cache, whatever the kid (60). */
  minFetchIntervalS?: number;
  /** How long a kid the sender does not know stays unknown (600). */
  negativeTtlS?: number;
}

/**
 * Keys by kid, guarded so unauthenticated requests cannot amplify against the sender's API:
 * known keys stay for the life of the process; an unknown kid is negative-cached for
 * negativeTtlS; the whole cache makes at most one fetch per minFetchIntervalS (a lookup that
 * would exceed it answers null without fetching); concurrent lookups of one kid share a fetch.
 * A failed fetch (throws) answers null and caches nothing, so the kid is tried again once the
 * fetch interval has passed: an outage costs at most one interval of refusals, never ten minutes.
 */
export class KeyCache {
  private readonly known = new Map<string, JsonWebKey>();
  private readonly unknownUntil = new Map<string, number>();
  private readonly inflight = new Map<string, Promise<JsonWebKey | null>>();
  private lastFetchAt = Number.NEGATIVE_INFINITY;
  private readonly minFetchIntervalS: number;
  private readonly negativeTtlS: number;

  constructor(private readonly opts: KeyCacheOptions) {
    this.minFetchIntervalS = opts.minFetchIntervalS ?? 60;
    this.negativeTtlS = opts.negativeTtlS ?? 600;
  }

  /** The key for kid, or null (unknown, rate-limited, or the fetch failed). Never throws. */
  async key(kid: string): Promise<JsonWebKey | null> {
    const hit = this.known.get(kid);
    if (hit) return hit;
    const now = this.opts.clock.now();
    const until = this.unknownUntil.get(kid);
    if (until !== undefined && now < until) return null;
    const pending = this.inflight.get(kid);
    if (pending) return pending;
    if (now - this.lastFetchAt < this.minFetchIntervalS) return null;
    this.lastFetchAt = now;
    const fetched = this.fetch(kid).finally(() => this.inflight.delete(kid));
    this.inflight.set(kid, fetched);
    return fetched;
  }

  private async fetch(kid: string): Promise<JsonWebKey | null> {
    let jwk: JsonWebKey | null;
    try {
      jwk = await this.opts.fetchKey(kid);
    } catch {
      return null;
    }
    if (jwk) {
      this.known.set(kid, jwk);
      this.unknownUntil.delete(kid);
      return jwk;
    }
    const now = this.opts.clock.now();
    // The fetch rate bounds this map (one entry per interval); dropping expired ones keeps it so.
    for (const [k, t] of this.unknownUntil) if (t <= now) this.unknownUntil.delete(k);
    this.unknownUntil.set(kid, now + this.negativeTtlS);
    return null;
  }
}

const sharedCaches = new Map<string, KeyCache>();

/** One cache per name for the whole process ("plaid:production"), made on first use. */
export function sharedKeyCache(name: string, make: () => KeyCache): KeyCache {
  let cache = sharedCaches.get(name);
  if (!cache) {
    cache = make();
    sharedCaches.set(name, cache);
  }
  return cache;
}

function jsonPart(part: string): Record<string, unknown> | null {
  try {
    const v: unknown = JSON.parse(Buffer.from(part, "base64url").toString("utf8"));
    return v !== null && typeof v === "object" && !Array.isArray(v) ? (v as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

/**
 * Verify an ES256 JWT (Plaid-Verification) and return its claims, or null. The structure,
 * alg == ES256 and a kid are checked before any key lookup, so garbage never reaches the
 * network (spec 10); then the signature (jose) and iat, two-sided within maxAgeS. The caller
 * checks claims that bind the token to the request (bodySha256Matches).
 */
export async function jwtEs256(
  token: string | null,
  cache: KeyCache,
  opts: { now: number; maxAgeS?: number },
): Promise<Record<string, unknown> | null> {
  if (typeof token !== "string") return null;
  const parts = token.split(".");
  if (parts.length !== 3 || !parts.every((p) => /^[A-Za-z0-9_-]+$/.test(p))) return null;
  const header = jsonPart(parts[0] ?? "");
  if (!header || header.alg !== "ES256") return null;
  const kid = header.kid;
  if (typeof kid !== "string" || kid.length === 0 || kid.length > 256) return null;
  if (!jsonPart(parts[1] ?? "")) return null;

  const jwk = await cache.key(kid);
  if (!jwk) return null;
  try {
    const key = await importJWK(jwk, "ES256");
    // currentDate keeps jose's exp/nbf checks on our clock (STYLE rule 9).
    const { payload } = await jwtVerify(token, key, { algorithms: ["ES256"], currentDate: new Date(opts.now * 1000) });
    const iat = payload.iat;
    if (typeof iat !== "number" || !Number.isFinite(iat) || Math.abs(opts.now - iat) > (opts.maxAgeS ?? 300)) return null;
    return payload as Record<string, unknown>;
  } catch {
    return null;
  }
}
