// src/net/oauth.ts against a stub token endpoint and a stub API that accepts only the tokens it
// issued: caching to a minute before expiry, refresh, one retry after a 401, rotation, revoked
// grants, a shared refresh, and no credential value in any error.
import { afterAll, beforeEach, describe, expect, test } from "bun:test";
import { FakeClock } from "../../src/clock.ts";
import { createHttp } from "../../src/net/http.ts";
import { createOAuth, type StoredToken, type TokenStore } from "../../src/net/oauth.ts";
import { Permanent, Retryable } from "../../src/plugin/types.ts";
import { SECRET_SENTINEL } from "../helpers/logs.ts";

const T0 = 1_700_000_000;

interface Issuer {
  forms: Record<string, string>[];
  /** The token endpoint's next answers, in order; when empty it issues tok-N for an hour. */
  replies: (() => Response)[];
  /** Held until released: lets callers pile up on one refresh. */
  gate: Promise<void> | null;
  valid: Set<string>;
  apiCalls: number;
}
const iss: Issuer = { forms: [], replies: [], gate: null, valid: new Set(), apiCalls: 0 };
beforeEach(() => {
  iss.forms = [];
  iss.replies = [];
  iss.gate = null;
  iss.valid = new Set();
  iss.apiCalls = 0;
});

const server = Bun.serve({
  port: 0,
  hostname: "127.0.0.1",
  async fetch(req) {
    const path = new URL(req.url).pathname;
    if (path === "/token") {
      const form = Object.fromEntries(new URLSearchParams(await req.text()));
      iss.forms.push(form);
      if (iss.gate) await iss.gate;
      const reply = iss.replies.shift();
      if (reply) return reply();
      const token = `tok-${iss.forms.length}`;
      iss.valid.add(token);
      return Response.json({ access_token: token, expires_in: 3600, token_type: "Bearer" });
    }
    iss.apiCalls++;
    const bearer = req.headers.get("authorization")?.replace(/^Bearer /, "") ?? "";
    if (path === "/always-401" || !iss.valid.has(bearer)) return new Response("who are you", { status: 401 });
    return Response.json({ ok: true, token: bearer });
  },
});
const base = `http://127.0.0.1:${server.port}`;
afterAll(() => server.stop(true));

const CREDENTIAL = {
  client_id: "cid",
  client_secret: `cs-${SECRET_SENTINEL}`,
  refresh_token: `rt-${SECRET_SENTINEL}`,
  token_uri: `${base}/token`,
};

function memoryStore(initial: StoredToken | null = null): TokenStore & { saved: StoredToken[] } {
  let t = initial;
  const saved: StoredToken[] = [];
  return {
    saved,
    load: () => t,
    save(next) {
      t = next;
      saved.push(next);
    },
  };
}

function setup(o: { store?: TokenStore; credential?: string } = {}) {
  const clock = new FakeClock(T0);
  const store = o.store ?? memoryStore();
  let reads = 0;
  const text = o.credential ?? JSON.stringify(CREDENTIAL);
  const oauth = createOAuth({ http: createHttp({ clock }), clock, store, credential: async () => (reads++, text) });
  return { clock, store, oauth, reads: () => reads };
}

async function failure(p: Promise<unknown>): Promise<Error> {
  try {
    await p;
  } catch (e) {
    return e as Error;
  }
  throw new Error("expected a rejection");
}

const revoked = () =>
  Response.json(
    { error: "invalid_grant", error_description: `Token has been expired or revoked ${SECRET_SENTINEL}` },
    { status: 400 },
  );

describe("accessToken", () => {
  test("the first call refreshes with the credential's fields", async () => {
    const { oauth, store } = setup();
    expect(await oauth.accessToken()).toBe("tok-1");
    expect(iss.forms).toEqual([
      {
        grant_type: "refresh_token",
        client_id: "cid",
        client_secret: CREDENTIAL.client_secret,
        refresh_token: CREDENTIAL.refresh_token,
      },
    ]);
    expect(store.load()).toEqual({ access_token: "tok-1", expires_at: T0 + 3600 });
  });

  test("the stored token is used until 60 s before expiry, then refreshed", async () => {
    const { oauth, clock } = setup();
    expect(await oauth.accessToken()).toBe("tok-1");
    clock.advance(3600 - 61);
    expect(await oauth.accessToken()).toBe("tok-1");
    expect(iss.forms).toHaveLength(1);
    clock.advance(2);
    expect(await oauth.accessToken()).toBe("tok-2");
    expect(iss.forms).toHaveLength(2);
  });

  test("an expired stored token is refreshed", async () => {
    const { oauth } = setup({ store: memoryStore({ access_token: "old", expires_at: T0 - 10 }) });
    expect(await oauth.accessToken()).toBe("tok-1");
  });

  test("concurrent callers share one refresh", async () => {
    const { oauth, reads } = setup();
    let open = () => {};
    iss.gate = new Promise((r) => (open = r));
    const all = Promise.all(Array.from({ length: 8 }, () => oauth.accessToken()));
    open();
    expect(await all).toEqual(Array(8).fill("tok-1"));
    expect(iss.forms).toHaveLength(1);
    expect(reads()).toBe(1);
  });

  test("the default token URI is used when the credential has none", async () => {
    const { token_uri: _, ...noUri } = CREDENTIAL;
    const clock = new FakeClock(T0);
    const oauth = createOAuth({
      http: createHttp({ clock }),
      clock,
      store: memoryStore(),
      credential: async () => JSON.stringify(noUri),
      defaultTokenUri: `${base}/token`,
    });
    expect(await oauth.accessToken()).toBe("tok-1");
    // Without either, Google's endpoint: seen through an injected fetch, never the network.
    const urls: string[] = [];
    const fake = (async (url: string | URL | Request) => (
      urls.push(String(url)), Response.json({ access_token: "g", expires_in: 60 })
    )) as typeof fetch;
    const google = createOAuth({
      http: createHttp({ clock, fetch: fake }),
      clock,
      store: memoryStore(),
      credential: async () => JSON.stringify(noUri),
    });
    expect(await google.accessToken()).toBe("g");
    expect(urls).toEqual(["https://oauth2.googleapis.com/token"]);
  });
});

describe("rotation and failures", () => {
  test("a rotated refresh token is saved and used for the next refresh; the credential is not", async () => {
    const { oauth, clock, store, reads } = setup();
    iss.replies.push(() => Response.json({ access_token: "tok-a", expires_in: 3600, refresh_token: "rt-rotated" }));
    expect(await oauth.accessToken()).toBe("tok-a");
    expect(store.load()?.refresh_token).toBe("rt-rotated");
    clock.advance(3600);
    expect(await oauth.accessToken()).toBe("tok-2");
    expect(iss.forms[1].refresh_token).toBe("rt-rotated");
    // An answer without a new refresh token keeps the rotated one.
    expect(store.load()).toEqual({ access_token: "tok-2", expires_at: T0 + 7200, refresh_token: "rt-rotated" });
    expect(reads()).toBe(2);
  });

  test("invalid_grant is Permanent, without the answer or the secret", async () => {
    const { oauth } = setup();
    iss.replies.push(revoked);
    const e = await failure(oauth.accessToken());
    expect(e).toBeInstanceOf(Permanent);
    expect(e.message).toBe("oauth grant revoked or expired");
  });

  test("invalid_client is Permanent; a 503 from the token endpoint is Retryable; neither names a secret", async () => {
    const { oauth } = setup();
    const echo = (status: number) => () =>
      new Response(JSON.stringify({ error: status === 401 ? "invalid_client" : "backend", got: iss.forms.at(-1) }), {
        status,
      });
    iss.replies.push(echo(401), echo(503), echo(400));
    const errors = [
      await failure(oauth.accessToken()),
      await failure(oauth.accessToken()),
      await failure(oauth.accessToken()),
    ];
    expect(errors[0]).toBeInstanceOf(Permanent);
    expect(errors[0].message).toContain("oauth client rejected");
    expect(errors[1]).toBeInstanceOf(Retryable);
    expect(errors[1].message).toBe(`POST 127.0.0.1:${server.port}: http 503`);
    expect(errors[2]).toBeInstanceOf(Permanent);
    for (const e of errors) expect(e.message).not.toContain(SECRET_SENTINEL);
  });

  test("a credential that is not JSON, or lacks a field, is Permanent without its values", async () => {
    const bad = await failure(setup({ credential: `{"client_secret": "${SECRET_SENTINEL}",` }).oauth.accessToken());
    expect(bad).toBeInstanceOf(Permanent);
    expect(bad.message).toBe("oauth credential is not valid JSON");
    for (const field of ["client_id", "client_secret", "refresh_token"] as const) {
      const { [field]: _, ...rest } = CREDENTIAL;
      const e = await failure(setup({ credential: JSON.stringify(rest) }).oauth.accessToken());
      expect(e).toBeInstanceOf(Permanent);
      expect(e.message).toBe(`oauth credential has no ${field}`);
      expect(e.message).not.toContain(SECRET_SENTINEL);
    }
    expect(iss.forms).toHaveLength(0);
  });

  test("a token answer without access_token is Permanent", async () => {
    const { oauth } = setup();
    iss.replies.push(() => Response.json({ token_type: "Bearer" }));
    expect((await failure(oauth.accessToken())).message).toBe("oauth token answer has no access_token");
  });
});

describe("request", () => {
  test("sends the bearer token", async () => {
    const { oauth } = setup();
    expect(await oauth.getJson(`${base}/api`)).toEqual({ ok: true, token: "tok-1" });
  });

  test("one 401 refreshes once and retries once", async () => {
    const { oauth } = setup({ store: memoryStore({ access_token: "revoked-early", expires_at: T0 + 3000 }) });
    const r = await oauth.request("GET", `${base}/api`);
    expect(r.status).toBe(200);
    expect(JSON.parse(r.text).token).toBe("tok-1");
    expect(iss.apiCalls).toBe(2);
    expect(iss.forms).toHaveLength(1);
  });

  test("a second 401 is the answer, not a loop", async () => {
    const { oauth } = setup();
    const r = await oauth.request("GET", `${base}/always-401`);
    expect(r.status).toBe(401);
    expect(iss.apiCalls).toBe(2);
    expect(iss.forms).toHaveLength(2);
    expect((await failure(oauth.getJson(`${base}/always-401`))).message).toBe(`GET 127.0.0.1:${server.port}: http 401`);
  });

  test("concurrent 401s share one refresh", async () => {
    const { oauth } = setup({ store: memoryStore({ access_token: "revoked-early", expires_at: T0 + 3000 }) });
    const all = await Promise.all(Array.from({ length: 5 }, () => oauth.getJson<{ token: string }>(`${base}/api`)));
    expect(all.map((r) => r.token)).toEqual(Array(5).fill("tok-1"));
    expect(iss.forms).toHaveLength(1);
  });

  test("a caller's Authorization header is replaced, whatever its case", async () => {
    const { oauth } = setup();
    expect(await oauth.getJson(`${base}/api`, { headers: { Authorization: "Basic nope" } })).toEqual({
      ok: true,
      token: "tok-1",
    });
  });
});
