// OAuth 2 with a refresh token (Google and friends): an access token kept until a minute before
// it expires, one refresh shared by every caller, a rotated refresh token kept in the caller's
// store, and one retry after a 401. No token or secret ever appears in an error.
import type { Clock } from "../clock.ts";
import { Permanent } from "../plugin/types.ts";
import {
  type Http,
  type HttpResponse,
  jsonOf,
  mergeHeaders,
  type RequestOptions,
  type SendOptions,
  tryJson,
} from "./http.ts";

export interface OAuthCredential {
  client_id: string;
  client_secret: string;
  refresh_token: string;
  token_uri?: string;
}

/** Runtime state kept by the caller (the spool's meta, a state file). */
export interface TokenStore {
  load(): StoredToken | null;
  save(t: StoredToken): void;
}

export interface StoredToken {
  access_token: string;
  /** Unix seconds */
  expires_at: number;
  /** A refresh token the endpoint rotated to; it replaces the credential's from then on. */
  refresh_token?: string;
}

export interface OAuth {
  /** A valid access token: the stored one until 60 s before expiry, else refreshed. */
  accessToken(): Promise<string>;
  /** request() with "Authorization: Bearer <token>"; on one 401, refresh once and retry once. */
  request(method: string, url: string, opts?: SendOptions): Promise<HttpResponse>;
  getJson<T = unknown>(url: string, opts?: RequestOptions): Promise<T>;
}

export const GOOGLE_TOKEN_URI = "https://oauth2.googleapis.com/token";
/** A token this close to its expiry is refreshed first, so it cannot expire in flight. */
export const EXPIRY_MARGIN_S = 60;
/** Assumed lifetime when the token endpoint gives no expires_in. */
const DEFAULT_EXPIRES_IN_S = 3600;

/** The credential file's text as a credential; Permanent naming what is wrong, never a value. */
export function parseCredential(text: string): OAuthCredential {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    throw new Permanent("oauth credential is not valid JSON");
  }
  if (v === null || typeof v !== "object" || Array.isArray(v))
    throw new Permanent("oauth credential is not a JSON object");
  const c = v as Record<string, unknown>;
  for (const field of ["client_id", "client_secret", "refresh_token"]) {
    if (typeof c[field] !== "string" || c[field] === "") throw new Permanent(`oauth credential has no ${field}`);
  }
  if (c.token_uri !== undefined && typeof c.token_uri !== "string")
    throw new Permanent("oauth credential's token_uri is not a string");
  return c as unknown as OAuthCredential;
}

/** The token endpoint's error codes that no retry can mend, with what to tell the operator. */
const GRANT_ERRORS: Record<string, string> = {
  invalid_grant: "oauth grant revoked or expired",
  invalid_client: "oauth client rejected (check client_id and client_secret)",
};

export function createOAuth(opts: {
  http: Http;
  clock: Clock;
  credential: () => Promise<string>;
  store: TokenStore;
  defaultTokenUri?: string;
}): OAuth {
  const { http, clock, store } = opts;
  let inflight: Promise<string> | null = null;
  // Bumped by every refresh: a 401 on a token older than the latest refresh retries with the
  // new one instead of refreshing again (and no token is compared to find that out).
  let generation = 0;

  async function refresh(): Promise<string> {
    const cred = parseCredential(await opts.credential());
    const tokenUri = cred.token_uri ?? opts.defaultTokenUri ?? GOOGLE_TOKEN_URI;
    const previous = store.load();
    const form = {
      grant_type: "refresh_token",
      client_id: cred.client_id,
      client_secret: cred.client_secret,
      refresh_token: previous?.refresh_token ?? cred.refresh_token,
    };
    const res = await http.request("POST", tokenUri, {
      headers: { accept: "application/json", "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams(form).toString(),
    });
    if (res.status === 400 || res.status === 401) {
      const code = (tryJson(res.text) as { error?: unknown } | undefined)?.error;
      if (typeof code === "string" && Object.hasOwn(GRANT_ERRORS, code)) throw new Permanent(GRANT_ERRORS[code]);
    }
    const answer = jsonOf<Record<string, unknown> | null>("POST", tokenUri, res, clock);
    const access = answer?.access_token;
    if (typeof access !== "string" || access === "") throw new Permanent("oauth token answer has no access_token");
    const expiresIn = Number(answer?.expires_in ?? DEFAULT_EXPIRES_IN_S);
    const rotated =
      typeof answer?.refresh_token === "string" && answer.refresh_token !== ""
        ? answer.refresh_token
        : previous?.refresh_token;
    const saved: StoredToken = {
      access_token: access,
      expires_at: clock.now() + (Number.isFinite(expiresIn) ? expiresIn : DEFAULT_EXPIRES_IN_S),
    };
    if (rotated !== undefined) saved.refresh_token = rotated;
    store.save(saved);
    generation++;
    return access;
  }

  /** One refresh at a time: callers that arrive while one runs share its answer. */
  function sharedRefresh(): Promise<string> {
    inflight ??= refresh().finally(() => {
      inflight = null;
    });
    return inflight;
  }

  async function current(): Promise<{ token: string; gen: number }> {
    if (inflight) return { token: await inflight, gen: generation };
    const stored = store.load();
    if (stored && clock.now() < stored.expires_at - EXPIRY_MARGIN_S)
      return { token: stored.access_token, gen: generation };
    const token = await sharedRefresh();
    return { token, gen: generation };
  }

  const withBearer = (o: SendOptions, token: string): SendOptions => {
    const headers = mergeHeaders(o.headers);
    headers.authorization = `Bearer ${token}`;
    return { ...o, headers };
  };

  async function request(method: string, url: string, o: SendOptions = {}): Promise<HttpResponse> {
    const first = await current();
    const res = await http.request(method, url, withBearer(o, first.token));
    if (res.status !== 401) return res;
    // The token was refused before its time (revoked, rotated elsewhere): one fresh token, one
    // more try, and a second 401 is the caller's answer, so a broken grant cannot loop.
    const token = generation !== first.gen ? (await current()).token : await sharedRefresh();
    return http.request(method, url, withBearer(o, token));
  }

  return {
    accessToken: async () => (await current()).token,
    request,
    async getJson<T>(url: string, o: RequestOptions = {}) {
      const res = await request("GET", url, { ...o, headers: mergeHeaders({ accept: "application/json" }, o.headers) });
      return jsonOf<T>("GET", url, res, clock);
    },
  };
}
