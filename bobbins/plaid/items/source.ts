// plaid.items: the webhooks Plaid sends to an Item's webhook URL (TRANSACTIONS SYNC_UPDATES_AVAILABLE,
// ITEM ERROR, ITEM WEBHOOK_UPDATE_ACKNOWLEDGED, ...). A code source, because Plaid signs with a
// published key, not a shared secret:
//
// - Plaid-Verification is an ES256 JWT. Its structure, alg == "ES256" and a kid are checked before
//   any network (jwtEs256); the key for the kid comes from Plaid's POST {base}/webhook_verification_key/get
//   with {client_id, secret, key_id}, answered {key: <JWK>}; the JWT's iat must be within 300 s
//   of now, either way; its request_body_sha256 claim must be the body's SHA-256 (constant time).
// - Keys are looked up through one guarded cache per Plaid environment for the whole process: a
//   known key is kept, a kid Plaid does not know (INVALID_WEBHOOK_VERIFICATION_KEY_ID) is
//   remembered as unknown for 10 minutes, and the cache asks Plaid at most once a minute, so a
//   flood of made-up kids costs one request to Plaid per minute, not one per request.
// - One batch per Item (item_id); the event type is "<webhook_type>.<webhook_code>"; Plaid's
//   bodies carry no delivery id, so the dedup id is the body's SHA-256 (README.md: keep the
//   window short, 600 s).
import { bodySha256 } from "../../../src/plugin/dedup.ts";
import { getText } from "../../../src/plugin/get-path.ts";
import { type JsonWebKey, jwtEs256, KeyCache, sharedKeyCache } from "../../../src/plugin/keys.ts";
import {
  type Attrs,
  BadPayload,
  defineSource,
  type HookRequest,
  type Secrets,
  type SourcePlugin,
  type VerifyFailure,
} from "../../../src/plugin/types.ts";
import { bodySha256Matches } from "../../../src/plugin/verify.ts";
import { createHttp, type Http } from "../../../src/net/http.ts";
import { apiBaseUrl, BASE_URL_RULE } from "../../../src/providers/base-url.ts";
import { keyFetcher } from "../../../src/net/keys.ts";

const HEADER = "Plaid-Verification";
const MAX_AGE_S = 300;
const ENVIRONMENTS: Readonly<Record<string, string>> = {
  sandbox: "https://sandbox.plaid.com",
  production: "https://production.plaid.com",
};

interface Bound {
  env: string;
  /** The API's base URL, without a trailing slash. */
  base: string;
  /** The shared cache's name: one per environment, or per api_base_url when that is set. */
  cacheName: string;
}

/** The settings as the source runs with them; an unusable value is an error at load. */
function bind(config: Readonly<Record<string, unknown>>): Bound {
  const env = config.env ?? "production";
  if (typeof env !== "string" || !Object.hasOwn(ENVIRONMENTS, env))
    throw new Error('env must be "sandbox" or "production"');
  const base = apiBaseUrl(config.api_base_url);
  if (base === null) throw new Error(BASE_URL_RULE);
  if (base === undefined) return { env, base: ENVIRONMENTS[env] as string, cacheName: `plaid:${env}` };
  return { env, base, cacheName: `plaid:${base}` };
}

/**
 * What a shared cache's lookups read: the time and the API keys of the request that asked last.
 * The cache is made once per process; its clock follows the intake's (req.now), and the keys are
 * read when a lookup starts, so a secret file rewritten and reloaded is used from the next one on.
 */
interface Reading {
  now: number;
  secrets: Secrets | null;
}
const caches = new Map<string, { reading: Reading; cache: KeyCache }>();

/** Plaid's key in a 2xx answer; a key Plaid marks expired counts as none (Plaid's example rejects it). */
function keyOf(json: unknown): JsonWebKey | null {
  const key = json !== null && typeof json === "object" ? (json as { key?: unknown }).key : undefined;
  if (key === null || typeof key !== "object" || Array.isArray(key)) return null;
  const { created_at: _created, expired_at: expired, ...jwk } = key as Record<string, unknown>;
  if (expired !== null && expired !== undefined) return null;
  return jwk as JsonWebKey;
}

/** Plaid's answer for a key_id it has no key for: error_code INVALID_WEBHOOK_VERIFICATION_KEY_ID. */
function unknownKid(_status: number, json: unknown): boolean {
  return (
    json !== null &&
    typeof json === "object" &&
    (json as { error_code?: unknown }).error_code === "INVALID_WEBHOOK_VERIFICATION_KEY_ID"
  );
}

function cacheFor(b: Bound): { reading: Reading; cache: KeyCache } {
  const known = caches.get(b.cacheName);
  if (known) return known;
  const base = createHttp();
  // A key lookup holds up the webhook that needed it: answer well inside Plaid's 10 s.
  const http: Http = {
    ...base,
    request: (method, url, opts = {}) => base.request(method, url, { ...opts, timeoutS: 5, maxBytes: 64 * 1024 }),
  };
  const reading: Reading = { now: 0, secrets: null };
  const fetchKey = keyFetcher({
    http,
    request: (kid) => ({
      method: "POST",
      url: `${b.base}/webhook_verification_key/get`,
      body: {
        client_id: reading.secrets?.get("client_id") ?? "",
        secret: reading.secrets?.get("secret") ?? "",
        key_id: kid,
      },
    }),
    extract: keyOf,
    unknownKid,
  });
  const cache = sharedKeyCache(
    b.cacheName,
    () => new KeyCache({ fetchKey, clock: { now: () => reading.now }, minFetchIntervalS: 60, negativeTtlS: 600 }),
  );
  const entry = { reading, cache };
  caches.set(b.cacheName, entry);
  return entry;
}

/** The claims part of a token that failed, read only to name the class of the failure. */
function claimsOf(token: string): Record<string, unknown> | null {
  const parts = token.split(".");
  if (parts.length !== 3 || !parts.every((p) => /^[A-Za-z0-9_-]+$/.test(p))) return null;
  try {
    const v: unknown = JSON.parse(Buffer.from(parts[1] ?? "", "base64url").toString("utf8"));
    return v !== null && typeof v === "object" && !Array.isArray(v) ? (v as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

/** Why a token jwtEs256 refused is refused, for the log line (no value of it is logged). */
function failure(token: string, now: number): VerifyFailure {
  const claims = claimsOf(token);
  if (!claims) return "malformed";
  const iat = claims.iat;
  if (typeof iat === "number" && now - iat > MAX_AGE_S) return "stale";
  if (typeof iat === "number" && iat - now > MAX_AGE_S) return "future";
  return "mismatch";
}

function plugin(config: Readonly<Record<string, unknown>>): SourcePlugin {
  const b = bind(config);
  return defineSource({
    secrets: ["client_id", "secret"],
    authHeaders: [HEADER],
    span: "sync",
    // Plaid sends a delivery that got no 200 within 10 s again for up to 24 hours (README.md).
    senderRetries: true,
    configKeys: ["env", "api_base_url"],
    withConfig: (c: Readonly<Record<string, unknown>>) => plugin(c),

    async verify(req: HookRequest, secrets: Secrets) {
      const token = req.header(HEADER);
      if (!token) return "missing_signature";
      const { reading, cache } = cacheFor(b);
      reading.now = req.now;
      reading.secrets = secrets;
      const claims = await jwtEs256(token, cache, { now: req.now, maxAgeS: MAX_AGE_S });
      if (!claims) return failure(token, req.now);
      const claimed = claims.request_body_sha256;
      return bodySha256Matches(typeof claimed === "string" ? claimed : null, req.body) ? true : "mismatch";
    },

    key(payload: unknown) {
      const id = getText(payload, "item_id");
      if (!id) throw new BadPayload("no item_id (the Item the webhook is about)", "key_missing");
      return id;
    },

    eventType(payload: unknown) {
      const type = getText(payload, "webhook_type");
      const code = getText(payload, "webhook_code");
      return type && code ? `${type}.${code}` : (type ?? code ?? "");
    },

    // No delivery id in Plaid's bodies: the body's SHA-256, which a retry repeats byte for byte.
    dedupId: bodySha256,

    attrs(payload: unknown): Attrs {
      const environment = getText(payload, "environment");
      return environment ? { environment } : {};
    },
  });
}

export default plugin({});
