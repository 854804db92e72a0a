// Key fetchers for KeyCache's fetchKey: how a published signing key is looked up by kid, from a
// per-key endpoint (Plaid) or a JWKS document. "No such key" resolves null, so the cache
// remembers the kid as unknown; any other failure throws, so the cache tries again later.
import type { JsonWebKey } from "../plugin/keys.ts";
import { type Http, hostOf, mergeHeaders, statusError, tryJson } from "./http.ts";
import { Permanent } from "../plugin/types.ts";

export interface KeyFetcherOptions {
  http: Http;
  /** The request that asks for kid (its body is sent as JSON; it may carry the API secret). */
  request: (kid: string) => { method: "GET" | "POST"; url: string; body?: unknown };
  /** The key in a 2xx answer, or null when the answer holds none (then kid is unknown). */
  extract: (json: unknown) => JsonWebKey | null;
  /** True when a non-2xx answer means "the sender has no such key" (Plaid: 400 INVALID_FIELD). */
  unknownKid?: (status: number, json: unknown) => boolean;
}

/**
 * One key per request: e.g. Plaid's POST {base}/webhook_verification_key/get {client_id, secret, key_id} -> { key: JWK
 * }.
 */
export function keyFetcher(opts: KeyFetcherOptions): (kid: string) => Promise<JsonWebKey | null> {
  return async (kid) => {
    const r = opts.request(kid);
    const hasBody = r.body !== undefined;
    const res = await opts.http.request(r.method, r.url, {
      headers: mergeHeaders({ accept: "application/json" }, hasBody ? { "content-type": "application/json" } : {}),
      body: hasBody ? JSON.stringify(r.body) : undefined,
    });
    const json = tryJson(res.text);
    const err = statusError(r.method, r.url, res);
    if (err) {
      if (opts.unknownKid?.(res.status, json)) return null;
      throw err;
    }
    if (json === undefined) throw new Permanent(`${r.method} ${hostOf(r.url)}: response is not JSON`);
    return opts.extract(json);
  };
}

/** A JWKS document ({ keys: [...] }): the key whose kid matches, or null. */
export function jwksFetcher(opts: { http: Http; url: string }): (kid: string) => Promise<JsonWebKey | null> {
  return async (kid) => {
    const doc = await opts.http.getJson<{ keys?: unknown }>(opts.url);
    const keys = doc !== null && typeof doc === "object" ? doc.keys : undefined;
    if (!Array.isArray(keys)) throw new Permanent(`GET ${hostOf(opts.url)}: JWKS document has no keys`);
    const key = keys.find(
      (k): k is JsonWebKey => k !== null && typeof k === "object" && (k as { kid?: unknown }).kid === kid,
    );
    return key ?? null;
  };
}

export interface DocumentFetcherOptions<K> {
  http: Http;
  /** The key in a 2xx answer's text (a PEM certificate), or null when it holds none. */
  parse: (text: string) => K | null;
  /** The statuses that mean "no such document": the cache remembers the URL as unknown (404, 410). */
  unknownStatuses?: readonly number[];
}

/**
 * A key published as a document at a URL the request names (PayPal's PAYPAL-CERT-URL): GET it and
 * parse it. The caller checks the URL (its scheme and host) before the cache ever asks for it.
 * A 404 or 410, or a 2xx answer that holds no key, resolves null (the URL is remembered as
 * unknown); any other failure throws (tried again after the cache's fetch interval).
 */
export function documentFetcher<K>(opts: DocumentFetcherOptions<K>): (url: string) => Promise<K | null> {
  const unknown = new Set(opts.unknownStatuses ?? [404, 410]);
  return async (url) => {
    const res = await opts.http.request("GET", url, { headers: { accept: "application/x-pem-file, */*" } });
    if (unknown.has(res.status)) return null;
    const err = statusError("GET", url, res);
    if (err) throw err;
    return opts.parse(res.text);
  };
}
