// Signature, token and timestamp checks for sources, and signing for destinations: the plugin
// API's checks. The only module that computes an HMAC or compares a secret: every comparison
// goes through constantTimeEqual. A check answers false for anything a sender can get wrong
// (missing header, bad hex or base64, wrong prefix, stale time) and never throws for it; nothing
// here logs, and no error message carries a secret. What compares no secret lives beside it and
// is exported from here: the encodings (verify-codec.ts), timestamps (verify-time.ts), public-key
// signatures (verify-public.ts) and published keys (keys.ts).
import { createHash, createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { HookspoolError } from "../errors.ts";
import {
  type Algorithm,
  bytes,
  concat,
  type Data,
  decode,
  decodeBase64,
  decodeHex,
  type Encoding,
  type VerifyFailure,
} from "./verify-codec.ts";
import { timestampWhy } from "./verify-time.ts";

export type { Algorithm, Data, Encoding, VerifyFailure } from "./verify-codec.ts";
export { crc32Decimal, ecdsaP256Why, ed25519Why, rsaSha256Why } from "./verify-public.ts";
export { rfc3339Seconds, timestampFresh, timestampWhy } from "./verify-time.ts";
export type { JsonWebKey } from "./keys.ts";

const ALGORITHMS: ReadonlySet<string> = new Set(["sha256", "sha1", "sha512"]);

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

/**
 * The Standard Webhooks / Hermes key rule: a secret starting with whsec_ is the
 * base64 after the prefix, anything else is its raw UTF-8 bytes. Throws E_CONFIG for a whsec_
 * secret that is not base64 (a configuration mistake; the message never holds the secret).
 */
export function signingKey(secret: string): Uint8Array {
  if (!secret.startsWith("whsec_")) return bytes(secret);
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
