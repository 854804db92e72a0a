// Senders that sign with a published key (Plaid's ES256 JWT): the guarded key cache and the JWT
// check. No secret is compared here; jose verifies the signature.
import { importJWK, jwtVerify, type JWK } from "jose";
import type { Clock } from "../clock.ts";

/** A public key as a sender publishes it (jose's JWK; the DOM type is not in our lib). */
export type JsonWebKey = JWK;

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
