// Known-answer tests for src/plugin/verify.ts. Expected values are published
// vectors or computed here with node:crypto, never with verify.ts itself.
import { describe, expect, test } from "bun:test";
import { createHash, createHmac } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { exportJWK, generateKeyPair, SignJWT } from "jose";
import { Webhook } from "standardwebhooks";
import { FakeClock, systemClock } from "../../src/clock.ts";
import { HookspoolError } from "../../src/errors.ts";
import {
  bodySha256Matches,
  constantTimeEqual,
  hmac,
  hmacB64,
  hmacHex,
  hmacPrefixed,
  jwtEs256,
  KeyCache,
  type JsonWebKey,
  sha256Hex,
  sharedKeyCache,
  signedTimestamp,
  signingKey,
  standardWebhooks,
  standardWebhooksSignature,
  staticToken,
  timestamped,
  timestampFresh,
} from "../../src/plugin/verify.ts";

const enc = new TextEncoder();
const nodeHmac = (alg: string, key: string | Uint8Array, data: string | Uint8Array, out: "hex" | "base64") =>
  createHmac(alg, key).update(data).digest(out);

describe("constantTimeEqual and signingKey", () => {
  test("equal, unequal, different lengths, bytes against strings", () => {
    expect(constantTimeEqual("abc", "abc")).toBe(true);
    expect(constantTimeEqual("abc", "abd")).toBe(false);
    expect(constantTimeEqual("abc", "abcd")).toBe(false);
    expect(constantTimeEqual("", "a")).toBe(false);
    expect(constantTimeEqual(enc.encode("abc"), "abc")).toBe(true);
  });

  test("whsec_ is base64 after the prefix; anything else is raw UTF-8", () => {
    expect(Buffer.from(signingKey("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"))).toEqual(
      Buffer.from("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "base64"),
    );
    expect(Buffer.from(signingKey("plain secret"))).toEqual(Buffer.from("plain secret", "utf8"));
  });

  test("a whsec_ secret that is not base64 is E_CONFIG without the secret in the message", () => {
    const bad = "whsec_not!base64";
    expect(() => signingKey(bad)).toThrow(HookspoolError);
    try {
      signingKey(bad);
    } catch (e) {
      expect((e as HookspoolError).code).toBe("E_CONFIG");
      expect((e as HookspoolError).describe()).not.toContain("not!base64");
    }
  });

  test("hmac computes what node:crypto computes", () => {
    expect(hmac("k", "data")).toBe(nodeHmac("sha256", "k", "data", "hex"));
    expect(hmac("k", "data", { algorithm: "sha1", encoding: "base64" })).toBe(nodeHmac("sha1", "k", "data", "base64"));
    expect(hmac(enc.encode("k"), enc.encode("data"), { algorithm: "sha512" })).toBe(
      nodeHmac("sha512", "k", "data", "hex"),
    );
  });
});

describe("GitHub (hmac_prefixed, sha256=<hex>)", () => {
  // GitHub's documented example ("Validating webhook deliveries").
  const secret = "It's a Secret to Everybody";
  const body = enc.encode("Hello, World!");
  const good = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";

  test("the published vector passes, uppercase hex too", () => {
    expect(nodeHmac("sha256", secret, body, "hex")).toBe(good.slice(7));
    expect(hmacPrefixed(good, "sha256=", secret, body)).toBe(true);
    expect(hmacPrefixed(`sha256=${good.slice(7).toUpperCase()}`, "sha256=", secret, body)).toBe(true);
    expect(hmacHex(good.slice(7), secret, body)).toBe(true);
  });

  test("tampered body, wrong secret, missing header, wrong prefix, bad hex fail", () => {
    expect(hmacPrefixed(good, "sha256=", secret, enc.encode("Hello, World?"))).toBe(false);
    expect(hmacPrefixed(good, "sha256=", "It's a Secret to Nobody", body)).toBe(false);
    expect(hmacPrefixed(null, "sha256=", secret, body)).toBe(false);
    expect(hmacPrefixed(good.replace("sha256=", "sha1="), "sha256=", secret, body)).toBe(false);
    expect(hmacPrefixed(good.slice(7), "sha256=", secret, body)).toBe(false);
    expect(hmacPrefixed("sha256=zz" + good.slice(9), "sha256=", secret, body)).toBe(false);
    expect(hmacPrefixed(good.slice(0, -1), "sha256=", secret, body)).toBe(false);
    expect(hmacPrefixed("sha256=", "sha256=", secret, body)).toBe(false);
  });

  test("an empty secret never verifies, even against its own HMAC", () => {
    expect(hmacPrefixed(`sha256=${nodeHmac("sha256", "", body, "hex")}`, "sha256=", "", body)).toBe(false);
  });
});

describe("Trello (base64 HMAC-SHA1 over body + callback URL)", () => {
  const secret = "trello-app-secret";
  const callback = "https://hooks.example.com/hooks/trello";
  const body = '{"action":{"id":"5f1"}}';
  const sig = nodeHmac("sha1", secret, body + callback, "base64");

  test("passes over body + callback; fails on the body alone, another secret, garbage", () => {
    expect(hmacB64(sig, secret, body + callback, "sha1")).toBe(true);
    expect(hmacB64(sig, secret, body, "sha1")).toBe(false);
    expect(hmacB64(sig, "other", body + callback, "sha1")).toBe(false);
    expect(hmacB64(sig, secret, body + callback)).toBe(false); // sha256 by default
    expect(hmacB64("not base64!", secret, body + callback, "sha1")).toBe(false);
    expect(hmacB64(null, secret, body + callback, "sha1")).toBe(false);
  });

  test("base64url without padding is accepted too", () => {
    const url = Buffer.from(sig, "base64").toString("base64url");
    expect(url).not.toContain("=");
    expect(hmacB64(url, secret, body + callback, "sha1")).toBe(true);
  });
});

describe("Zoom v0 (signedTimestamp)", () => {
  const secret = "zoom-secret-token";
  const ts = "1700000000";
  const body = '{"event":"meeting.started"}';
  const sig = `v0=${nodeHmac("sha256", secret, `v0:${ts}:${body}`, "hex")}`;
  const check = (now: number, over: Partial<Parameters<typeof signedTimestamp>[0]> = {}) =>
    signedTimestamp({
      signature: sig,
      prefix: "v0=",
      timestamp: ts,
      secret,
      message: `v0:${ts}:${body}`,
      now,
      ...over,
    });

  test("fresh passes; 300 s either way passes; 301 s stale or future fails", () => {
    expect(check(1_700_000_000)).toBe(true);
    expect(check(1_700_000_300)).toBe(true);
    expect(check(1_699_999_700)).toBe(true);
    expect(check(1_700_000_301)).toBe(false);
    expect(check(1_699_999_699)).toBe(false);
  });

  test("message parts are joined as bytes; tampering and a missing timestamp fail", () => {
    expect(check(1_700_000_000, { message: [`v0:${ts}:`, enc.encode(body)] })).toBe(true);
    expect(check(1_700_000_000, { message: `v0:${ts}:${body} ` })).toBe(false);
    expect(check(1_700_000_000, { timestamp: null })).toBe(false);
    expect(check(1_700_000_000, { signature: sig.slice(3) })).toBe(false);
  });
});

describe("timestampFresh", () => {
  test("seconds, milliseconds, strings; non-numeric is false", () => {
    expect(timestampFresh("1700000000", 1_700_000_000)).toBe(true);
    expect(timestampFresh(1_700_000_000_000, 1_700_000_100)).toBe(true);
    expect(timestampFresh("1700000000123", 1_700_000_000)).toBe(true);
    expect(timestampFresh(1_700_000_000, 1_700_000_010, 5)).toBe(false);
    for (const bad of ["", "abc", "1e9", "-1700000000", "0x10", null, Number.NaN])
      expect(timestampFresh(bad, 1_700_000_000)).toBe(false);
  });
});

describe("Standard Webhooks", () => {
  // The published test vector (standard-webhooks spec and libraries).
  const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
  const id = "msg_p5jXN8AQM9LWM0D4loKWxJek";
  const ts = 1614265330;
  const body = '{"test": 2432232314}';
  const good = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";
  const headers = (signature: string | null, timestamp: string | null = String(ts)) => ({ id, timestamp, signature });

  test("the published vector passes, as bytes too", () => {
    expect(standardWebhooks(headers(good), secret, body, { now: ts })).toBe(true);
    expect(standardWebhooks(headers(good), secret, enc.encode(body), { now: ts })).toBe(true);
    expect(standardWebhooksSignature(secret, id, ts, body)).toBe(good);
  });

  test("several entries: a wrong one and a right one pass; v2 entries are ignored", () => {
    const wrong = `v1,${Buffer.alloc(32, 7).toString("base64")}`;
    expect(standardWebhooks(headers(`${wrong} ${good}`), secret, body, { now: ts })).toBe(true);
    expect(standardWebhooks(headers(`v2,${good.slice(3)} ${wrong}`), secret, body, { now: ts })).toBe(false);
    expect(standardWebhooks(headers(`v2,${good.slice(3)}`), secret, body, { now: ts })).toBe(false);
    expect(standardWebhooks(headers(`v1a,x ${good}`), secret, body, { now: ts })).toBe(true);
  });

  test("tampered, missing and garbage headers fail", () => {
    expect(standardWebhooks(headers(good), secret, `${body} `, { now: ts })).toBe(false);
    expect(standardWebhooks({ ...headers(good), id: "msg_other" }, secret, body, { now: ts })).toBe(false);
    expect(standardWebhooks({ ...headers(good), id: null }, secret, body, { now: ts })).toBe(false);
    expect(standardWebhooks(headers(null), secret, body, { now: ts })).toBe(false);
    expect(standardWebhooks(headers(good, null), secret, body, { now: ts })).toBe(false);
    expect(standardWebhooks(headers("v1,@@@"), secret, body, { now: ts })).toBe(false);
    expect(standardWebhooks(headers(good), "whsec_bad!!", body, { now: ts })).toBe(false);
  });

  test("stale and future timestamps fail (two-sided, 300 s)", () => {
    expect(standardWebhooks(headers(good), secret, body, { now: ts + 300 })).toBe(true);
    expect(standardWebhooks(headers(good), secret, body, { now: ts + 301 })).toBe(false);
    expect(standardWebhooks(headers(good), secret, body, { now: ts - 301 })).toBe(false);
    expect(standardWebhooks(headers(good), secret, body, { now: ts + 30, toleranceS: 10 })).toBe(false);
  });

  test("a raw (non-whsec_) key is its UTF-8 bytes", () => {
    const raw = "a raw shared secret";
    const sig = `v1,${nodeHmac("sha256", raw, `${id}.${ts}.${body}`, "base64")}`;
    expect(standardWebhooks(headers(sig), raw, body, { now: ts })).toBe(true);
    expect(standardWebhooksSignature(raw, id, ts, body)).toBe(sig);
  });

  test("rotation: any listed secret passes", () => {
    const other = "whsec_" + Buffer.alloc(24, 1).toString("base64");
    expect(standardWebhooks(headers(good), [other, secret], body, { now: ts })).toBe(true);
    expect(standardWebhooks(headers(good), [other], body, { now: ts })).toBe(false);
    expect(standardWebhooks(headers(good), [], body, { now: ts })).toBe(false);
  });

  test("our signature is what the standardwebhooks package signs and verifies", () => {
    const wh = new Webhook(secret);
    expect(wh.sign(id, new Date(ts * 1000), body)).toBe(standardWebhooksSignature(secret, id, ts, body));
    // The package verifies against the wall clock, so this signature is made now.
    const now = Math.floor(systemClock.now());
    const sig = standardWebhooksSignature(secret, "msg_1", now, body);
    expect(
      wh.verify(body, { "webhook-id": "msg_1", "webhook-timestamp": String(now), "webhook-signature": sig }),
    ).toEqual({ test: 2432232314 });
    const raw = new Webhook("a raw shared secret", { format: "raw" });
    expect(raw.sign(id, new Date(ts * 1000), body)).toBe(
      standardWebhooksSignature("a raw shared secret", id, ts, body),
    );
  });
});

describe("t=,v1= (timestamped)", () => {
  const secret = "whsec_stripe_like";
  const t = "1700000000";
  const body = '{"id":"evt_1"}';
  const v1 = nodeHmac("sha256", secret, `${t}.${body}`, "hex");
  const wrong = "0".repeat(64);

  test("one v1 and two v1 entries (one wrong) pass; v0 is ignored", () => {
    expect(timestamped(`t=${t},v1=${v1}`, secret, body, { now: 1_700_000_000 })).toBe(true);
    expect(timestamped(`t=${t},v1=${wrong},v1=${v1}`, secret, enc.encode(body), { now: 1_700_000_000 })).toBe(true);
    expect(timestamped(`t=${t},v0=${v1}`, secret, body, { now: 1_700_000_000 })).toBe(false);
    expect(timestamped(`t=${t},v1=${wrong}`, secret, body, { now: 1_700_000_000 })).toBe(false);
  });

  test("stale and future fail; 300 s passes", () => {
    const h = `t=${t},v1=${v1}`;
    expect(timestamped(h, secret, body, { now: 1_700_000_300 })).toBe(true);
    expect(timestamped(h, secret, body, { now: 1_700_000_301 })).toBe(false);
    expect(timestamped(h, secret, body, { now: 1_699_999_699 })).toBe(false);
  });

  test("malformed headers fail", () => {
    for (const h of [null, "", `v1=${v1}`, `t=${t}`, `t=${t},t=${t},v1=${v1}`, `t=abc,v1=${v1}`, "garbage"]) {
      expect(timestamped(h, secret, body, { now: 1_700_000_000 })).toBe(false);
    }
    expect(timestamped(`t=${t},v1=${v1}`, secret, `${body}x`, { now: 1_700_000_000 })).toBe(false);
  });
});

describe("static token", () => {
  test("right, wrong, different length, null, empty secret", () => {
    expect(staticToken("s3cr3t-token", "s3cr3t-token")).toBe(true);
    expect(staticToken("s3cr3t-tokeN", "s3cr3t-token")).toBe(false);
    expect(staticToken("s3cr3t", "s3cr3t-token")).toBe(false);
    expect(staticToken(null, "s3cr3t-token")).toBe(false);
    expect(staticToken("", "")).toBe(false);
  });
});

const plaidKeys = await generateKeyPair("ES256");
const otherKeys = await generateKeyPair("ES256");
const plaidJwk = await exportJWK(plaidKeys.publicKey);

describe("Plaid (ES256 JWT, KeyCache)", () => {
  const { privateKey } = plaidKeys;
  const other = otherKeys;
  const kid = "plaid-kid-1";
  const jwk: JsonWebKey = { ...plaidJwk, kid, alg: "ES256" };
  const body = enc.encode('{"webhook_type":"TRANSACTIONS","webhook_code":"SYNC_UPDATES_AVAILABLE"}');
  const bodyHash = createHash("sha256").update(body).digest("hex");
  const T = 1_700_000_000;

  const sign = (
    claims: Record<string, unknown>,
    header: Record<string, unknown> = { alg: "ES256", kid },
    key = privateKey,
  ) => new SignJWT(claims).setProtectedHeader(header as { alg: string }).sign(key);

  function stubCache(keys: Record<string, JsonWebKey> = { [kid]: jwk }, clock = new FakeClock(T)) {
    const calls: string[] = [];
    const cache = new KeyCache({
      clock,
      fetchKey: async (k) => {
        calls.push(k);
        return keys[k] ?? null;
      },
    });
    return { cache, calls, clock };
  }
  const b64url = (s: string) => Buffer.from(s).toString("base64url");

  test("a good token passes and its body hash binds it to the body", async () => {
    const { cache, calls } = stubCache();
    const claims = await jwtEs256(await sign({ iat: T, request_body_sha256: bodyHash }), cache, { now: T });
    expect(claims).not.toBeNull();
    expect(sha256Hex(body)).toBe(bodyHash);
    expect(bodySha256Matches(claims?.request_body_sha256 as string, body)).toBe(true);
    expect(bodySha256Matches(bodyHash.toUpperCase(), body)).toBe(true);
    expect(bodySha256Matches(claims?.request_body_sha256 as string, enc.encode("{}"))).toBe(false);
    expect(bodySha256Matches(null, body)).toBe(false);
    expect(bodySha256Matches("xyz", body)).toBe(false);
    // A second token with the same kid uses the cached key.
    expect(await jwtEs256(await sign({ iat: T, request_body_sha256: bodyHash }), cache, { now: T })).not.toBeNull();
    expect(calls).toEqual([kid]);
  });

  test("HS256 and none are refused before any fetch", async () => {
    const { cache, calls } = stubCache();
    const hs = await new SignJWT({ iat: T }).setProtectedHeader({ alg: "HS256", kid }).sign(enc.encode("x".repeat(32)));
    expect(await jwtEs256(hs, cache, { now: T })).toBeNull();
    const payload = b64url(JSON.stringify({ iat: T }));
    expect(await jwtEs256(`${b64url(JSON.stringify({ alg: "none", kid }))}.${payload}.`, cache, { now: T })).toBeNull();
    expect(
      await jwtEs256(`${b64url(JSON.stringify({ alg: "none", kid }))}.${payload}.AAAA`, cache, { now: T }),
    ).toBeNull();
    expect(calls.length).toBe(0);
  });

  test("malformed tokens are refused with no fetch", async () => {
    const { cache, calls } = stubCache();
    const good = await sign({ iat: T });
    const [h, p, s] = good.split(".");
    const bad = [
      null,
      "",
      `${h}.${p}`,
      `${h}.${p}.${s}.${s}`,
      `${h}!.${p}.${s}`,
      `${b64url("not json")}.${p}.${s}`,
      `${b64url("[1,2]")}.${p}.${s}`,
      `${b64url(JSON.stringify({ alg: "ES256" }))}.${p}.${s}`,
      `${b64url(JSON.stringify({ alg: "ES256", kid: 7 }))}.${p}.${s}`,
      `${h}.${b64url("not json")}.${s}`,
    ];
    for (const token of bad) expect(await jwtEs256(token, cache, { now: T })).toBeNull();
    expect(calls.length).toBe(0);
  });

  test("a bad signature or another key's signature is refused", async () => {
    const { cache } = stubCache();
    const good = await sign({ iat: T, request_body_sha256: bodyHash });
    const [h, , s] = good.split(".");
    expect(
      await jwtEs256(`${h}.${b64url(JSON.stringify({ iat: T, request_body_sha256: sha256Hex("x") }))}.${s}`, cache, {
        now: T,
      }),
    ).toBeNull();
    expect(
      await jwtEs256(await sign({ iat: T }, { alg: "ES256", kid }, other.privateKey), cache, { now: T }),
    ).toBeNull();
  });

  test("stale and future iat are refused (two-sided, 300 s); a missing iat too", async () => {
    const { cache } = stubCache();
    expect(await jwtEs256(await sign({ iat: T - 300 }), cache, { now: T })).not.toBeNull();
    expect(await jwtEs256(await sign({ iat: T - 301 }), cache, { now: T })).toBeNull();
    expect(await jwtEs256(await sign({ iat: T + 301 }), cache, { now: T })).toBeNull();
    expect(await jwtEs256(await sign({ iat: T - 100 }), cache, { now: T, maxAgeS: 60 })).toBeNull();
    expect(await jwtEs256(await sign({}), cache, { now: T })).toBeNull();
  });

  test("an unknown kid is null and negative-cached for 10 minutes", async () => {
    const { cache, calls, clock } = stubCache();
    const token = await sign({ iat: T }, { alg: "ES256", kid: "nope" });
    expect(await jwtEs256(token, cache, { now: T })).toBeNull();
    expect(calls).toEqual(["nope"]);
    clock.advance(61); // past the fetch interval: only the negative cache stops a fetch now
    expect(await cache.key("nope")).toBeNull();
    expect(calls.length).toBe(1);
    clock.advance(540); // 601 s after the first fetch
    expect(await cache.key("nope")).toBeNull();
    expect(calls.length).toBe(2);
  });

  test("a flood of 1,000 random kids makes at most one fetch per minute", async () => {
    const { cache, calls, clock } = stubCache();
    for (let i = 0; i < 1000; i++) {
      expect(await cache.key(`rnd-${crypto.randomUUID()}`)).toBeNull();
      clock.advance(0.05); // 50 s in all
    }
    expect(calls.length).toBe(1);
    clock.advance(9); // 59 s: even a real kid waits for the interval
    expect(await cache.key(kid)).toBeNull();
    expect(calls.length).toBe(1);
    clock.advance(2);
    expect(await cache.key(kid)).toEqual(jwk);
    expect(calls.length).toBe(2);
  });

  test("concurrent lookups of one kid share a fetch", async () => {
    const { cache, calls } = stubCache();
    const [a, b, c] = await Promise.all([cache.key(kid), cache.key(kid), cache.key(kid)]);
    expect([a, b, c]).toEqual([jwk, jwk, jwk]);
    expect(calls.length).toBe(1);
  });

  test("a fetch error is null now and retried after the fetch interval, not after 10 minutes", async () => {
    const clock = new FakeClock(T);
    let fail = true;
    let calls = 0;
    const cache = new KeyCache({
      clock,
      fetchKey: async () => {
        calls++;
        if (fail) throw new Error("network down");
        return jwk;
      },
    });
    expect(await cache.key(kid)).toBeNull();
    expect(await cache.key(kid)).toBeNull();
    expect(calls).toBe(1);
    fail = false;
    clock.advance(60);
    expect(await cache.key(kid)).toEqual(jwk);
    expect(calls).toBe(2);
  });

  test("sharedKeyCache: one cache per name", () => {
    const make = () => stubCache().cache;
    const a = sharedKeyCache("test:plaid:production", make);
    expect(sharedKeyCache("test:plaid:production", make)).toBe(a);
    expect(sharedKeyCache("test:plaid:sandbox", make)).not.toBe(a);
  });
});

// ---------------------------------------------------------------------------------------------
// Only verify.ts computes HMACs or compares secrets

/** Source with comments blanked and string contents replaced by "s" (empty strings stay ""). */
function codeOnly(src: string): string {
  let out = "";
  let i = 0;
  let prev = ""; // last significant code character, to tell a regex literal from a division
  while (i < src.length) {
    const c = src[i] as string;
    const n = src[i + 1];
    if (c === "/" && n === "/") {
      while (i < src.length && src[i] !== "\n") i++;
    } else if (c === "/" && n === "*") {
      const end = src.indexOf("*/", i + 2);
      i = end < 0 ? src.length : end + 2;
      out += " ";
    } else if (
      c === '"' ||
      c === "'" ||
      c === "`" ||
      (c === "/" && (prev === "" || "(,=:[!&|?{};+-*%<>~^".includes(prev)))
    ) {
      let j = i + 1;
      let inClass = false;
      while (j < src.length && !(src[j] === c && !inClass)) {
        if (src[j] === "\\") j++;
        else if (c === "/" && src[j] === "[") inClass = true;
        else if (c === "/" && src[j] === "]") inClass = false;
        else if (c === "/" && src[j] === "\n") break;
        j++;
      }
      out += c === "/" ? "/r/" : j === i + 1 ? '""' : '"s"';
      prev = '"';
      i = j + 1;
    } else {
      out += c;
      if (!/\s/.test(c)) prev = c;
      i++;
    }
  }
  return out;
}

const NOUNS = new Set([
  "secret",
  "secrets",
  "signature",
  "signatures",
  "sig",
  "sigs",
  "token",
  "tokens",
  "digest",
  "digests",
  "hmac",
  "hmacs",
]);
const FORMS = new Set(["hex", "b64", "base64", "bytes", "buf", "buffer", "value", "str", "string", "header"]);
const HARMLESS = /^(?:null|undefined|true|false|\d[\d_.]*|""|'')$/;

/** Whether a dotted name's last segment names a secret or a signature (pageToken, expectedSig, sigHex). */
function secretish(name: string): boolean {
  const last = name.split(/\??\./).pop() ?? "";
  const words = last
    .replace(/([a-z0-9])([A-Z])/g, "$1 $2")
    .toLowerCase()
    .split(/[\s_$]+/)
    .filter(Boolean);
  const tail = words[words.length - 1] ?? "";
  return NOUNS.has(tail) || (FORMS.has(tail) && words.slice(0, -1).some((w) => NOUNS.has(w)));
}

/** Offences in one file: HMAC or compare primitives, and ==/=== on secret-like names. */
function offences(src: string): string[] {
  const code = codeOnly(src);
  const found: string[] = [];
  for (const m of code.matchAll(/\b(createHmac|timingSafeEqual)\b|CryptoHasher\(\s*[^,)]+,/g)) found.push(m[0]);
  const operand = String.raw`(?:typeof\s+)?[A-Za-z_$][\w$]*(?:\??\.[A-Za-z_$][\w$]*)*|""|''|\d[\d_.]*`;
  const cmp = new RegExp(String.raw`(${operand})\s*(===|!==|==|!=)\s*(${operand})`, "g");
  for (const m of code.matchAll(cmp)) {
    const [, left = "", op, right = ""] = m;
    const sides = [left, right];
    if (sides.some((s) => HARMLESS.test(s) || s.startsWith("typeof"))) continue;
    if (sides.some(secretish)) found.push(`${left} ${op} ${right}`);
  }
  return found;
}

function tsFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? tsFiles(join(dir, e.name)) : e.name.endsWith(".ts") ? [join(dir, e.name)] : [],
  );
}

describe("verify.ts is the only place that computes HMACs or compares secrets", () => {
  test("the scan catches what it should and lets the rest through", () => {
    expect(offences('import { createHmac } from "node:crypto";')).toEqual(["createHmac"]);
    expect(offences("crypto.timingSafeEqual(a, b)")).toEqual(["timingSafeEqual"]);
    expect(offences('new Bun.CryptoHasher("sha256", key)')).toHaveLength(1);
    expect(offences("if (signature === expected) ok();")).toHaveLength(1);
    expect(offences("return given != opts.secret;")).toHaveLength(1);
    expect(offences("if (expectedSig !== sigHex) return;")).toHaveLength(1);
    expect(offences("a.digest == b")).toHaveLength(1);
    expect(offences("if (token == header) return;")).toHaveLength(1);
    const fine = [
      'new Bun.CryptoHasher("sha256")',
      "if (token === null || secret !== undefined) return;",
      'if (typeof token === "string") return;',
      "if (secrets.length === 0 || tokenCount === max) return;",
      'if (kind === "token" || x === "secret") return;',
      "// never signature === expected here",
      "/* secret == x */ const signal = a === b;",
      'const url = "https://x//y"; if (pageToken === undefined) go(url);',
      "const re = /[\"']/; if (secretName === name) go(re);",
    ];
    for (const src of fine) expect(offences(src)).toEqual([]);
  });

  test("no file under src/ other than src/plugin/verify.ts offends", () => {
    const root = join(import.meta.dir, "../..");
    const src = join(root, "src");
    const report: string[] = [];
    for (const file of tsFiles(src)) {
      const rel = relative(root, file);
      if (rel === join("src", "plugin", "verify.ts")) continue;
      for (const o of offences(readFileSync(file, "utf8"))) report.push(`${rel}: ${o}`);
    }
    expect(report).toEqual([]);
  });
});
