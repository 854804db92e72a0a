// Signature, token and timestamp checks for sources, and signing for destinations. The only
// module that computes an HMAC or compares a secret: every comparison goes through
// constantTimeEqual. A check answers false for anything a sender can
// get wrong (missing header, bad hex or base64, wrong prefix, stale time) and never throws for
// it; nothing here logs, and no error message carries a secret.
import {
  createHash,
  createHmac,
  createPublicKey,
  type KeyObject,
  randomBytes,
  timingSafeEqual,
  verify as verifySignature,
} from "node:crypto";
import { HookspoolError } from "../errors.ts";

export type Data = string | Uint8Array;
export type Algorithm = "sha256" | "sha1" | "sha512";
export type Encoding = "hex" | "base64";
export type { JsonWebKey } from "./keys.ts";

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
 * The Standard Webhooks / Hermes key rule: a secret starting with whsec_ is the
 * base64 after the prefix, anything else is its raw UTF-8 bytes. Throws E_CONFIG for a whsec_
 * secret that is not base64 (a configuration mistake; the message never holds the secret).
 */
export function signingKey(secret: string): Uint8Array {
  if (!secret.startsWith("whsec_")) return encoder.encode(secret);
  const key = decodeBase64(secret.slice("whsec_".length));
  if (!key)
    throw new HookspoolError("E_CONFIG", "a whsec_ secret is not valid base64", {
      hint: "copy the secret again from the sender",
    });
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
 * Why a request is not verified, as a class that is safe to log (it holds no value): no
 * signature at all, one that cannot be read, one that does not match, or a timestamp outside
 * the tolerance (in the past, or in the future).
 */
export type VerifyFailure = "missing_signature" | "malformed" | "mismatch" | "stale" | "future";

/**
 * Null when given (encoded) equals the HMAC of data, else why not. An empty secret never
 * verifies: an empty secret file must fail closed, not make every signature computable.
 */
function macWhy(
  given: string | null,
  secret: Data,
  data: Data,
  algorithm: string,
  encoding: Encoding,
): VerifyFailure | null {
  if (given === null) return "missing_signature";
  if (bytes(secret).length === 0) return "mismatch";
  const claimed = decode(given.trim(), encoding);
  if (claimed === null) return "malformed";
  return constantTimeEqual(claimed, mac(secret, data, algorithm)) ? null : "mismatch";
}

/**
 * At most this many signatures in one header: a sender rotating its secret sends two. More is
 * no sender's, and refusing it keeps an unsigned request from costing many MACs or key checks.
 */
export const MAX_SIGNATURES = 8;

/**
 * Null when any candidate (encoded) equals `expected`, the one MAC computed for the request;
 * else why not. Every candidate is compared, so the work does not say which matched.
 */
function anyEqualWhy(candidates: readonly string[], expected: Uint8Array, encoding: Encoding): VerifyFailure | null {
  if (candidates.length === 0) return "missing_signature";
  if (candidates.length > MAX_SIGNATURES) return "malformed";
  let ok = false;
  let readable = false;
  for (const c of new Set(candidates.map((x) => x.trim()))) {
    const claimed = decode(c, encoding);
    if (claimed === null) continue;
    readable = true;
    ok = constantTimeEqual(claimed, expected) || ok;
  }
  if (ok) return null;
  return readable ? "mismatch" : "malformed";
}

function macMatches(given: string | null, secret: Data, data: Data, algorithm: string, encoding: Encoding): boolean {
  return macWhy(given, secret, data, algorithm, encoding) === null;
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
  return hmacPrefixedWhy(header, prefix, secret, data, opts) === null;
}

/** hmacPrefixed, saying why not (null: verified). */
export function hmacPrefixedWhy(
  header: string | null,
  prefix: string,
  secret: Data,
  data: Data,
  opts: { algorithm?: Algorithm; encoding?: Encoding } = {},
): VerifyFailure | null {
  if (header === null) return "missing_signature";
  if (!header.startsWith(prefix)) return "malformed";
  return macWhy(header.slice(prefix.length), secret, data, opts.algorithm ?? "sha256", opts.encoding ?? "hex");
}

// ---------------------------------------------------------------------------------------------
// Timestamped schemes (every one takes a tolerance, default 300 s, two-sided)

/**
 * abs(now - t) <= toleranceS: future-dated requests fail too. t is unix seconds (a decimal
 * string or a number); a value above 1e12 is taken as milliseconds. Anything else is false.
 */
export function timestampFresh(ts: string | number | null, now: number, toleranceS = 300): boolean {
  return timestampWhy(ts, now, toleranceS) === null;
}

/**
 * An RFC 3339 date-time (`2020-01-01T00:00:00-08:00`, `2021-03-25T05:09:27Z`, fractions allowed;
 * `T` and `Z` in either case) as Unix seconds, or null when the text is not one or names no real
 * instant (month 13, February 30). A time without an offset is not an instant, and is refused.
 */
export function rfc3339Seconds(text: string): number | null {
  const m = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})$/.exec(text);
  if (!m) return null;
  const [, y, mo, d, h, mi, s, frac, zone] = m as unknown as string[];
  const utc = Date.UTC(Number(y), Number(mo) - 1, Number(d), Number(h), Number(mi), Number(s));
  const back = new Date(utc);
  // Date.UTC rolls an out-of-range field over into the next; a real date-time reads back the same.
  if (
    back.getUTCFullYear() !== Number(y) ||
    back.getUTCMonth() !== Number(mo) - 1 ||
    back.getUTCDate() !== Number(d) ||
    back.getUTCHours() !== Number(h) ||
    back.getUTCMinutes() !== Number(mi) ||
    back.getUTCSeconds() !== Number(s)
  )
    return null;
  let offset = 0;
  if (zone !== "Z" && zone !== "z") {
    const oh = Number(zone.slice(1, 3));
    const om = Number(zone.slice(4, 6));
    if (oh > 23 || om > 59) return null;
    offset = (zone[0] === "-" ? -1 : 1) * (oh * 3600 + om * 60);
  }
  return utc / 1000 + (frac ? Number(`0${frac}`) : 0) - offset;
}

/**
 * timestampFresh, saying why not: absent, unreadable, too old (stale) or ahead (future). With
 * `rfc3339`, a string may also be an RFC 3339 date-time (a sender that writes its timestamp
 * header so: Box, Zendesk); without it only Unix seconds or milliseconds are read.
 */
export function timestampWhy(
  ts: string | number | null,
  now: number,
  toleranceS = 300,
  opts: { rfc3339?: boolean } = {},
): VerifyFailure | null {
  let t: number;
  if (ts === null) return "missing_signature";
  if (typeof ts === "number") t = ts;
  else if (typeof ts === "string" && /^\d{1,16}(?:\.\d{1,9})?$/.test(ts.trim())) t = Number(ts.trim());
  else if (typeof ts === "string" && opts.rfc3339 && ts.length <= 64) {
    const at = rfc3339Seconds(ts.trim());
    if (at === null) return "malformed";
    // An instant in the date-time form is never read as milliseconds.
    if (now - at > toleranceS) return "stale";
    if (at - now > toleranceS) return "future";
    return null;
  } else return "malformed";
  if (!Number.isFinite(t) || t < 0) return "malformed";
  if (t > 1e12) t /= 1000;
  if (now - t > toleranceS) return "stale";
  if (t - now > toleranceS) return "future";
  return null;
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
  return timestampedWhy(header, secret, body, opts) === null;
}

/** timestamped, saying why not (null: verified). */
export function timestampedWhy(
  header: string | null,
  secret: Data,
  body: Data,
  opts: { now: number; toleranceS?: number; algorithm?: Algorithm; encoding?: Encoding },
): VerifyFailure | null {
  if (header === null) return "missing_signature";
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
  if (times.length !== 1 || t === undefined || !candidates.length) return "malformed";
  const stale = timestampWhy(t, opts.now, opts.toleranceS ?? 300);
  if (stale) return stale;
  if (bytes(secret).length === 0) return "mismatch";
  return anyEqualWhy(
    candidates,
    mac(secret, concat(`${t}.`, body), opts.algorithm ?? "sha256"),
    opts.encoding ?? "hex",
  );
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
  return signedTimestampWhy(opts) === null;
}

/** signedTimestamp, saying why not (null: verified). */
export function signedTimestampWhy(opts: Parameters<typeof signedTimestamp>[0]): VerifyFailure | null {
  if (opts.signature === null) return "missing_signature";
  const stale = timestampWhy(opts.timestamp, opts.now, opts.toleranceS ?? 300);
  if (stale) return stale;
  const message =
    typeof opts.message === "string" || opts.message instanceof Uint8Array ? opts.message : concat(...opts.message);
  return hmacPrefixedWhy(opts.signature, opts.prefix ?? "", opts.secret, message, opts);
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
  return standardWebhooksWhy(h, secret, body, opts) === null;
}

/** standardWebhooks, saying why not (null: verified). */
export function standardWebhooksWhy(
  h: { id: string | null; timestamp: string | null; signature: string | null },
  secret: string | readonly string[],
  body: Data,
  opts: { now: number; toleranceS?: number },
): VerifyFailure | null {
  const { id, timestamp, signature } = h;
  if (!id || timestamp === null || signature === null) return "missing_signature";
  const stale = timestampWhy(timestamp, opts.now, opts.toleranceS ?? 300);
  if (stale) return stale;
  const candidates = signature
    .split(/\s+/)
    .filter((entry) => entry.startsWith("v1,"))
    .map((entry) => entry.slice(3));
  if (!candidates.length || candidates.length > MAX_SIGNATURES) return "malformed";
  const signed = concat(`${id}.${timestamp}.`, body);
  let ok = false;
  for (const s of typeof secret === "string" ? [secret] : secret) {
    let key: Uint8Array;
    try {
      key = signingKey(s);
    } catch {
      continue;
    }
    if (key.length === 0) continue;
    // One MAC per secret, compared with every candidate.
    ok = anyEqualWhy(candidates, mac(key, signed, "sha256"), "base64") === null || ok;
  }
  return ok ? null : "mismatch";
}

/** The Standard Webhooks "v1,<base64>" signature for one secret (one per secret on rotation). */
export function standardWebhooksSignature(secret: string, id: string, timestamp: number | string, body: Data): string {
  return `v1,${hmac(signingKey(secret), concat(`${id}.${timestamp}.`, body), { encoding: "base64" })}`;
}

/**
 * Several candidate signatures (a sender rotating its secret sends two): null when any one is
 * the HMAC of data, else why not. Every candidate is checked, so the work does not say which.
 */
export function hmacAnyWhy(
  candidates: readonly string[],
  secret: Data,
  data: Data,
  opts: { algorithm?: Algorithm; encoding?: Encoding } = {},
): VerifyFailure | null {
  if (candidates.length === 0) return "missing_signature";
  if (bytes(secret).length === 0) return "mismatch";
  return anyEqualWhy(candidates, mac(secret, data, opts.algorithm ?? "sha256"), opts.encoding ?? "hex");
}

/**
 * Signatures made under different secrets, each entry in its own place (Box's primary and
 * secondary keys, each in its own header): null when any candidate of an entry is the HMAC of
 * data under that entry's secret, else why not. Every entry's MAC is computed and every candidate
 * compared, whichever matches, is missing or is empty, so the work does not say which key
 * verified; an empty secret is computed under a stand-in key and never matches.
 */
export function hmacEachWhy(
  entries: readonly { candidates: readonly string[]; secret: Data }[],
  data: Data,
  opts: { algorithm?: Algorithm; encoding?: Encoding } = {},
): VerifyFailure | null {
  const total = entries.reduce((n, e) => n + e.candidates.length, 0);
  if (total === 0) return "missing_signature";
  if (total > MAX_SIGNATURES) return "malformed";
  const encoding = opts.encoding ?? "hex";
  let ok = false;
  let readable = false;
  for (const e of entries) {
    const usable = bytes(e.secret).length > 0;
    const expected = mac(usable ? e.secret : compareKey, data, opts.algorithm ?? "sha256");
    for (const c of new Set(e.candidates.map((x) => x.trim()))) {
      const claimed = decode(c, encoding);
      if (claimed === null) continue;
      readable = true;
      ok = (constantTimeEqual(claimed, expected) && usable) || ok;
    }
  }
  if (ok) return null;
  return readable ? "mismatch" : "malformed";
}

// ---------------------------------------------------------------------------------------------
// Public-key signatures (the configured "secret" is the sender's public key)

// An Ed25519 public key as 32 raw bytes becomes a key object through this fixed SPKI header.
const ED25519_SPKI_PREFIX = Buffer.from("302a300506032b6570032100", "hex");

/** A public key from its text: PEM, or hex / base64 of the raw key (Ed25519, 32 bytes) or of SPKI DER. */
function publicKeyOf(text: string, kind: "ed25519" | "ec"): KeyObject | null {
  const t = text.trim();
  try {
    if (t.startsWith("-----BEGIN")) return createPublicKey(t);
    const raw = decodeHex(t) ?? decodeBase64(t);
    if (!raw) return null;
    const der = kind === "ed25519" && raw.length === 32 ? Buffer.concat([ED25519_SPKI_PREFIX, raw]) : Buffer.from(raw);
    return createPublicKey({ key: der, format: "der", type: "spki" });
  } catch {
    return null;
  }
}

/**
 * Null when `signature` (hex by default: Discord's X-Signature-Ed25519) is the Ed25519 signature
 * of message under the public key, else why not. A key that does not parse fails closed
 * ("mismatch": the sender is not at fault, and nothing verifies until the key is fixed).
 */
export function ed25519Why(
  signature: string | null,
  publicKey: string,
  message: Data,
  opts: { encoding?: Encoding } = {},
): VerifyFailure | null {
  if (signature === null) return "missing_signature";
  const sig = decode(signature.trim(), opts.encoding ?? "hex");
  if (sig === null || sig.length !== 64) return "malformed";
  const key = publicKeyOf(publicKey, "ed25519");
  if (key?.asymmetricKeyType !== "ed25519") return "mismatch";
  try {
    return verifySignature(null, bytes(message), key, sig) ? null : "mismatch";
  } catch {
    return "mismatch";
  }
}

/**
 * Null when `signature` (base64 DER by default: SendGrid's signed event webhook) is an ECDSA
 * P-256 / SHA-256 signature of message under the public key (base64 SPKI, as SendGrid shows it,
 * or PEM), else why not.
 */
export function ecdsaP256Why(
  signature: string | null,
  publicKey: string,
  message: Data,
  opts: { encoding?: Encoding } = {},
): VerifyFailure | null {
  if (signature === null) return "missing_signature";
  const sig = decode(signature.trim(), opts.encoding ?? "base64");
  if (sig === null) return "malformed";
  const key = publicKeyOf(publicKey, "ec");
  if (key?.asymmetricKeyType !== "ec" || key.asymmetricKeyDetails?.namedCurve !== "prime256v1") return "mismatch";
  try {
    return verifySignature("sha256", bytes(message), { key, dsaEncoding: "der" }, sig) ? null : "mismatch";
  } catch {
    return "mismatch";
  }
}

/**
 * Null when `signature` (base64 by default: PayPal's PAYPAL-TRANSMISSION-SIG) is an RSASSA-PKCS1-v1_5
 * signature with SHA-256 (Java's SHA256withRSA) of message under the public key, else why not.
 * The key is a KeyObject (a certificate's: certificateKey) or PEM text; one that is not RSA, or
 * shorter than 2048 bits, fails closed ("mismatch").
 */
export function rsaSha256Why(
  signature: string | null,
  publicKey: KeyObject | string,
  message: Data,
  opts: { encoding?: Encoding } = {},
): VerifyFailure | null {
  if (signature === null) return "missing_signature";
  const sig = decode(signature.trim(), opts.encoding ?? "base64");
  if (sig === null || sig.length === 0 || sig.length > 1024) return "malformed";
  let key: KeyObject;
  try {
    key = typeof publicKey === "string" ? createPublicKey(publicKey.trim()) : publicKey;
  } catch {
    return "mismatch";
  }
  if (key.asymmetricKeyType !== "rsa" || (key.asymmetricKeyDetails?.modulusLength ?? 0) < 2048) return "mismatch";
  try {
    return verifySignature("sha256", bytes(message), key, sig) ? null : "mismatch";
  } catch {
    return "mismatch";
  }
}

/** The CRC-32 (IEEE, zlib's) of data as an unsigned decimal: the last part of PayPal's signed message. */
export function crc32Decimal(data: Data): string {
  return String(Bun.hash.crc32(bytes(data)) >>> 0);
}

// ---------------------------------------------------------------------------------------------
// Tokens and body hashes

/** A static token (URL parameter or header) equal to the secret; an empty secret never matches. */
export function staticToken(given: string | null, secret: string): boolean {
  return staticTokenWhy(given, secret) === null;
}

/** staticToken, saying why not (null: verified). */
export function staticTokenWhy(given: string | null, secret: string): VerifyFailure | null {
  if (given === null) return "missing_signature";
  if (secret.length === 0) return "mismatch";
  return constantTimeEqual(given, secret) ? null : "mismatch";
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

// Published keys (Plaid's ES256 JWT and its guarded key cache) live in keys.ts; they are part
// of the same API for plugins.
export {
  type CertificateKey,
  certificateKey,
  certificateValidAt,
  jwtEs256,
  KeyCache,
  type KeyCacheOptions,
  sharedKeyCache,
} from "./keys.ts";
