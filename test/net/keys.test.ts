// src/net/keys.ts against a stub that publishes keys as Plaid does (one key per POST) and as a
// JWKS document, then a KeyCache built on it: a flood of unknown kids costs one fetch a minute.
import { afterAll, beforeEach, describe, expect, test } from "bun:test";
import { exportJWK, generateKeyPair, SignJWT } from "jose";
import { FakeClock, seededRng } from "../../src/clock.ts";
import { createHttp } from "../../src/net/http.ts";
import { jwksFetcher, keyFetcher } from "../../src/net/keys.ts";
import { jwtEs256, KeyCache, type JsonWebKey } from "../../src/plugin/keys.ts";
import { Permanent, Retryable } from "../../src/plugin/types.ts";
import { SECRET_SENTINEL } from "../helpers/logs.ts";

const T0 = 1_700_000_000;
const { privateKey, publicKey } = await generateKeyPair("ES256");
const JWK: JsonWebKey = { ...(await exportJWK(publicKey)), kid: "k1", alg: "ES256", use: "sig" };

let fetches: { path: string; body: unknown; contentType: string | null }[] = [];
beforeEach(() => {
  fetches = [];
});

const server = Bun.serve({
  port: 0,
  hostname: "127.0.0.1",
  async fetch(req) {
    const path = new URL(req.url).pathname;
    const text = await req.text();
    fetches.push({ path, body: text ? JSON.parse(text) : null, contentType: req.headers.get("content-type") });
    if (path === "/webhook_verification_key/get") {
      const { key_id } = JSON.parse(text) as { key_id: string };
      if (key_id === "k1") return Response.json({ key: JWK, request_id: "r1" });
      return Response.json(
        { error_code: "INVALID_FIELD", error_message: `no key ${SECRET_SENTINEL}` },
        { status: 400 },
      );
    }
    if (path === "/down") return new Response(`upstream ${SECRET_SENTINEL}`, { status: 500 });
    if (path === "/jwks") return Response.json({ keys: [{ kid: "other", kty: "EC" }, JWK] });
    if (path === "/not-jwks") return Response.json({ hello: "world" });
    return new Response("no", { status: 404 });
  },
});
const base = `http://127.0.0.1:${server.port}`;
afterAll(() => server.stop(true));

const http = createHttp();
const plaid = (path = "/webhook_verification_key/get") =>
  keyFetcher({
    http,
    request: (kid) => ({
      method: "POST",
      url: `${base}${path}`,
      body: { client_id: "cid", secret: SECRET_SENTINEL, key_id: kid },
    }),
    extract: (json) => (json as { key?: JsonWebKey }).key ?? null,
    unknownKid: (status, json) =>
      status === 400 && (json as { error_code?: string } | undefined)?.error_code === "INVALID_FIELD",
  });

async function failure(p: Promise<unknown>): Promise<Error> {
  try {
    await p;
  } catch (e) {
    return e as Error;
  }
  throw new Error("expected a rejection");
}

describe("keyFetcher", () => {
  test("a known kid: the key, asked for with a JSON body", async () => {
    expect(await plaid()("k1")).toEqual(JWK);
    expect(fetches).toEqual([
      {
        path: "/webhook_verification_key/get",
        body: { client_id: "cid", secret: SECRET_SENTINEL, key_id: "k1" },
        contentType: "application/json",
      },
    ]);
  });

  test("a kid the sender does not know resolves null", async () => {
    expect(await plaid()("nope")).toBeNull();
  });

  test("the same answer without an unknownKid rule throws Permanent", async () => {
    const strict = keyFetcher({
      http,
      request: (kid) => ({ method: "POST", url: `${base}/webhook_verification_key/get`, body: { key_id: kid } }),
      extract: () => null,
    });
    expect(await failure(strict("nope"))).toBeInstanceOf(Permanent);
  });

  test("a 500 throws Retryable, without the body or the secret", async () => {
    const e = await failure(plaid("/down")("k1"));
    expect(e).toBeInstanceOf(Retryable);
    expect(e.message).toBe(`POST 127.0.0.1:${server.port}: http 500`);
  });

  test("a GET request carries no body", async () => {
    const get = keyFetcher({
      http,
      request: (kid) => ({ method: "GET", url: `${base}/jwks?kid=${kid}` }),
      extract: (j) => (j as { keys: JsonWebKey[] }).keys[1] ?? null,
    });
    expect(await get("k1")).toEqual(JWK);
    expect(fetches[0]).toEqual({ path: "/jwks", body: null, contentType: null });
  });
});

describe("jwksFetcher", () => {
  test("the key whose kid matches, or null", async () => {
    const jwks = jwksFetcher({ http, url: `${base}/jwks` });
    expect(await jwks("k1")).toEqual(JWK);
    expect(await jwks("missing")).toBeNull();
  });

  test("a document without keys, or a failing one, throws", async () => {
    expect(await failure(jwksFetcher({ http, url: `${base}/not-jwks` })("k1"))).toBeInstanceOf(Permanent);
    expect(await failure(jwksFetcher({ http, url: `${base}/down` })("k1"))).toBeInstanceOf(Retryable);
  });
});

describe("a KeyCache on keyFetcher", () => {
  test("a flood of random kids within a minute makes one fetch", async () => {
    const clock = new FakeClock(T0);
    const cache = new KeyCache({ fetchKey: plaid(), clock });
    const rng = seededRng(7);
    const kid = () => `kid-${Math.floor(rng.next() * 1e9)}`;
    expect(await Promise.all(Array.from({ length: 50 }, () => cache.key(kid())))).toEqual(Array(50).fill(null));
    for (let i = 0; i < 50; i++) {
      clock.advance(1);
      expect(await cache.key(kid())).toBeNull();
    }
    expect(fetches).toHaveLength(1);
    // A minute later the real kid is fetched, verified, and kept.
    clock.advance(11);
    expect(await cache.key("k1")).toEqual(JWK);
    expect(fetches).toHaveLength(2);
  });

  test("an ES256 JWT verifies through the fetched key", async () => {
    const clock = new FakeClock(T0);
    const cache = new KeyCache({ fetchKey: plaid(), clock });
    const token = await new SignJWT({ request_body_sha256: "abc" })
      .setProtectedHeader({ alg: "ES256", kid: "k1" })
      .setIssuedAt(T0)
      .sign(privateKey);
    expect(await jwtEs256(token, cache, { now: T0 })).toMatchObject({ request_body_sha256: "abc", iat: T0 });
    expect(fetches).toHaveLength(1);
  });
});
