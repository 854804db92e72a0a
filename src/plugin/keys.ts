// Senders that sign with a published key (Plaid's ES256 JWT, PayPal's certificate): the guarded
// key cache, the JWT check and the X.509 certificate's key and dates. No secret is compared here;
// jose and node:crypto verify the signatures.
import { type KeyObject, X509Certificate } from "node:crypto";
import { importJWK, jwtVerify, type JWK } from "jose";
import type { Clock } from "../clock.ts";

/** A public key as a sender publishes it (jose's JWK; the DOM type is not in our lib). */
export type JsonWebKey = JWK;

export interface KeyCacheOptions<K = JsonWebKey> {
  /** Fetch the key for kid (through net); null when the sender says there is no such key. */
  fetchKey: (kid: string) => Promise<K | null>;
  clock: Clock;
  /** At most one fetch per this many seconds for the whole cache, whatever the kid (60). */
  minFetchIntervalS?: number;
  /** How long a kid the sender does not know stays unknown (600). */
  negativeTtlS?: number;
  /** At most this many known keys; a new one past it drops the one learned first (unbounded). */
  maxKeys?: number;
}

/**
 * Keys by kid, guarded so unauthenticated requests cannot amplify against the sender's API:
 * known keys stay for the life of the process; an unknown kid is negative-cached for
 * negativeTtlS; the whole cache makes at most one fetch per minFetchIntervalS (a lookup that
 * would exceed it answers null without fetching); concurrent lookups of one kid share a fetch.
 * A failed fetch (throws) answers null and caches nothing, so the kid is tried again once the
 * fetch interval has passed: an outage costs at most one interval of refusals, never ten minutes.
 */
export class KeyCache<K = JsonWebKey> {
  private readonly known = new Map<string, K>();
  private readonly unknownUntil = new Map<string, number>();
  private readonly inflight = new Map<string, Promise<K | null>>();
  private lastFetchAt = Number.NEGATIVE_INFINITY;
  private readonly minFetchIntervalS: number;
  private readonly negativeTtlS: number;
  private readonly maxKeys: number;

  constructor(private readonly opts: KeyCacheOptions<K>) {
    this.minFetchIntervalS = opts.minFetchIntervalS ?? 60;
    this.negativeTtlS = opts.negativeTtlS ?? 600;
    this.maxKeys = opts.maxKeys ?? Number.POSITIVE_INFINITY;
  }

  /** How many keys it holds (known ones; unknown kids are not counted). */
  get size(): number {
    return this.known.size;
  }

  /** The key for kid, or null (unknown, rate-limited, or the fetch failed). Never throws. */
  async key(kid: string): Promise<K | null> {
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

  private async fetch(kid: string): Promise<K | null> {
    let jwk: K | null;
    try {
      jwk = await this.opts.fetchKey(kid);
    } catch {
      return null;
    }
    if (jwk) {
      this.known.set(kid, jwk);
      // Map order is insertion order: the first key past the bound is the one learned first.
      for (const k of this.known.keys()) {
        if (this.known.size <= this.maxKeys) break;
        this.known.delete(k);
      }
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

const sharedCaches = new Map<string, KeyCache<unknown>>();

/** One cache per name for the whole process ("plaid:production"), made on first use. */
export function sharedKeyCache<K = JsonWebKey>(name: string, make: () => KeyCache<K>): KeyCache<K> {
  let cache = sharedCaches.get(name) as KeyCache<K> | undefined;
  if (!cache) {
    cache = make();
    sharedCaches.set(name, cache as KeyCache<unknown>);
  }
  return cache;
}

/** A certificate's public key and the times it is valid between (Unix seconds, both included). */
export interface CertificateKey {
  publicKey: KeyObject;
  notBefore: number;
  notAfter: number;
}

/**
 * The first certificate of a PEM document (PayPal's PAYPAL-CERT-URL answer), or null when it
 * holds none that parses or its dates do not read. The certificate's chain is not checked: the
 * caller trusts it for where it was fetched from (https, from the sender's own host).
 */
export function certificateKey(pem: string): CertificateKey | null {
  const m = /-----BEGIN CERTIFICATE-----[A-Za-z0-9+/=\s]+?-----END CERTIFICATE-----/.exec(pem);
  if (!m) return null;
  try {
    const cert = new X509Certificate(m[0]);
    const notBefore = Date.parse(cert.validFrom) / 1000;
    const notAfter = Date.parse(cert.validTo) / 1000;
    if (!Number.isFinite(notBefore) || !Number.isFinite(notAfter)) return null;
    return { publicKey: cert.publicKey, notBefore, notAfter };
  } catch {
    return null;
  }
}

/** True when now (Unix seconds) is within the certificate's validity. */
export function certificateValidAt(cert: CertificateKey, now: number): boolean {
  return now >= cert.notBefore && now <= cert.notAfter;
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
 * network; then the signature (jose) and iat, two-sided within maxAgeS. The caller
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
  if (header?.alg !== "ES256") return null;
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
    if (typeof iat !== "number" || !Number.isFinite(iat) || Math.abs(opts.now - iat) > (opts.maxAgeS ?? 300))
      return null;
    return payload as Record<string, unknown>;
  } catch {
    return null;
  }
}
