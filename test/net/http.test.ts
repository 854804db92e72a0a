// src/net/http.ts against a real stub server on 127.0.0.1: the status rule, Retry-After, the
// timeout (headers and body), the size cap, redirects, conditional GET, pacing, and that no
// path, query or body ever reaches an error or a log line.
import { afterAll, describe, expect, test } from "bun:test";
import { FakeClock } from "../../src/clock.ts";
import { createHttp, HttpStatusError, RetryLater, retryAfterSeconds, statusError } from "../../src/net/http.ts";
import type { Pacer } from "../../src/net/pace.ts";
import { Permanent, Retryable } from "../../src/plugin/types.ts";
import { PAYLOAD_SENTINEL, SECRET_SENTINEL } from "../helpers/logs.ts";

const T0 = 1_700_000_000;
const LAST_MODIFIED = "Tue, 14 Nov 2023 22:13:20 GMT";
const enc = new TextEncoder();
let hits = 0;

const server = Bun.serve({
  port: 0,
  hostname: "127.0.0.1",
  async fetch(req) {
    hits++;
    const path = new URL(req.url).pathname;
    const status = /^\/status\/(\d+)$/.exec(path);
    if (status) return new Response(`failed ${PAYLOAD_SENTINEL}`, { status: Number(status[1]) });
    switch (path) {
      case "/json":
        return Response.json({ ok: true, n: 1 });
      case "/echo":
        return Response.json({
          method: req.method,
          contentType: req.headers.get("content-type"),
          accept: req.headers.get("accept"),
          body: await req.text(),
        });
      case "/no-content":
        return new Response(null, { status: 204 });
      case "/not-json":
        return new Response("<html>hi</html>");
      case "/429-seconds":
        return new Response("slow down", { status: 429, headers: { "Retry-After": "120" } });
      case "/429-date":
        return new Response("slow down", {
          status: 429,
          headers: { "Retry-After": new Date((T0 + 90) * 1000).toUTCString() },
        });
      case "/429-huge":
        return new Response("slow down", { status: 429, headers: { "Retry-After": "86400" } });
      case "/503-seconds":
        return new Response("later", { status: 503, headers: { "Retry-After": "7" } });
      case "/never":
        return new Promise<Response>(() => {});
      case "/drip":
        // Headers at once, then one byte and silence: the timeout must cover reading the body.
        return new Response(new ReadableStream({ start: (c) => c.enqueue(enc.encode("{")) }));
      case "/big":
        return new Response("x".repeat(2 * 1024 * 1024));
      case "/exact":
        return new Response("y".repeat(1000));
      case "/endless":
        // No Content-Length and no end: only a reader that stops at the cap gets out.
        return new Response(new ReadableStream({ pull: (c) => c.enqueue(new Uint8Array(64 * 1024)) }));
      case "/redirect":
        return new Response(null, { status: 302, headers: { Location: "/json" } });
      case "/conditional": {
        const fresh =
          req.headers.get("if-none-match") === '"v1"' && req.headers.get("if-modified-since") === LAST_MODIFIED;
        const headers = { ETag: '"v1"', "Last-Modified": LAST_MODIFIED, "X-Feed-Kind": "Atom" };
        return fresh ? new Response(null, { status: 304, headers }) : new Response("<feed/>", { headers });
      }
    }
    return new Response("no route", { status: 404 });
  },
});
const base = `http://127.0.0.1:${server.port}`;
const host = `127.0.0.1:${server.port}`;
afterAll(() => server.stop(true));

const clock = new FakeClock(T0);
const lines: string[] = [];
const http = createHttp({ clock, log: (l) => lines.push(l) });

/** The error a promise rejects with (fails the test when it resolves). */
async function failure(p: Promise<unknown>): Promise<Error> {
  try {
    await p;
  } catch (e) {
    return e as Error;
  }
  throw new Error("expected a rejection");
}

describe("answers", () => {
  test("getJson parses a 2xx answer", async () => {
    expect(await http.getJson(`${base}/json`)).toEqual({ ok: true, n: 1 });
  });

  test("postJson sends JSON, postForm a urlencoded form; both read JSON back", async () => {
    expect(await http.postJson(`${base}/echo`, { a: [1, 2] })).toEqual({
      method: "POST",
      contentType: "application/json",
      accept: "application/json",
      body: '{"a":[1,2]}',
    });
    const form = await http.postForm<{ contentType: string; body: string }>(`${base}/echo`, {
      grant_type: "refresh_token",
      note: "a b&c",
    });
    expect(form.contentType).toBe("application/x-www-form-urlencoded");
    expect(Object.fromEntries(new URLSearchParams(form.body))).toEqual({ grant_type: "refresh_token", note: "a b&c" });
  });

  test("a caller's header replaces a default whatever its case", async () => {
    const r = await http.getJson<{ accept: string }>(`${base}/echo`, {
      headers: { Accept: "application/vnd.api+json" },
    });
    expect(r.accept).toBe("application/vnd.api+json");
  });

  test("a 2xx that is not JSON is Permanent; a 204 is null", async () => {
    const e = await failure(http.getJson(`${base}/not-json`));
    expect(e).toBeInstanceOf(Permanent);
    expect(e.message).toBe(`GET ${host}: response is not JSON`);
    expect(await http.postJson(`${base}/no-content`, {})).toBeNull();
  });

  test("request() answers any status without throwing", async () => {
    const r = await http.request("GET", `${base}/status/500`);
    expect(r.status).toBe(500);
    expect(r.text).toContain("failed");
  });
});

describe("the status rule", () => {
  test("404 and 400 are Permanent, with the status", async () => {
    for (const s of [404, 400, 401, 403]) {
      const e = await failure(http.getJson(`${base}/status/${s}`));
      expect(e).toBeInstanceOf(Permanent);
      expect(e).toBeInstanceOf(HttpStatusError);
      expect((e as HttpStatusError).status).toBe(s);
      expect(e.message).toBe(`GET ${host}: http ${s}`);
    }
  });

  test("a 403 that says it is a rate limit (Google's rateLimitExceeded) is Retryable; another 403 is not", () => {
    const res = (body: unknown) => ({ status: 403, headers: {}, text: JSON.stringify(body) });
    expect(
      statusError(
        "GET",
        "https://www.googleapis.com/x",
        res({ error: { errors: [{ reason: "userRateLimitExceeded" }] } }),
      ),
    ).toBeInstanceOf(RetryLater);
    expect(
      statusError("GET", "https://www.googleapis.com/x", res({ error: { status: "RATE_LIMIT_EXCEEDED" } })),
    ).toBeInstanceOf(RetryLater);
    expect(
      statusError("GET", "https://www.googleapis.com/x", res({ error: { errors: [{ reason: "forbidden" }] } })),
    ).toBeInstanceOf(HttpStatusError);
    expect(
      statusError("GET", "https://www.googleapis.com/x", { status: 403, headers: {}, text: "not json" }),
    ).toBeInstanceOf(HttpStatusError);
  });

  test("408, 425, 429, 500 and 503 are Retryable", async () => {
    for (const s of [408, 425, 429, 500, 502, 503]) {
      const e = await failure(http.getJson(`${base}/status/${s}`));
      expect(e).toBeInstanceOf(Retryable);
      expect(e.message).toBe(`GET ${host}: http ${s}`);
      expect((e as RetryLater).retryAfterS).toBeNull();
    }
  });

  test("Retry-After in seconds, as an HTTP date against the clock, and capped at an hour", async () => {
    const seconds = await failure(http.getJson(`${base}/429-seconds`));
    expect(seconds).toBeInstanceOf(RetryLater);
    expect((seconds as RetryLater).retryAfterS).toBe(120);
    expect(((await failure(http.getJson(`${base}/429-date`))) as RetryLater).retryAfterS).toBe(90);
    expect(((await failure(http.getJson(`${base}/429-huge`))) as RetryLater).retryAfterS).toBe(3600);
    expect(((await failure(http.postJson(`${base}/503-seconds`, {}))) as RetryLater).retryAfterS).toBe(7);
  });

  test("retryAfterSeconds: a date in the past is 0, garbage is null", () => {
    expect(retryAfterSeconds(new Date((T0 - 50) * 1000).toUTCString(), T0)).toBe(0);
    expect(retryAfterSeconds("soon", T0)).toBeNull();
    expect(retryAfterSeconds("-5", T0)).toBeNull();
    expect(retryAfterSeconds(undefined, T0)).toBeNull();
  });
});

describe("bounds", () => {
  test("a server that never answers is a Retryable timeout", async () => {
    const started = performance.now();
    const e = await failure(http.getJson(`${base}/never`, { timeoutS: 0.2 }));
    expect(e).toBeInstanceOf(Retryable);
    expect(e.message).toBe(`GET ${host}: timeout after 0.2 s`);
    expect(performance.now() - started).toBeLessThan(5000);
  });

  test("the timeout covers reading the body", async () => {
    const e = await failure(http.request("GET", `${base}/drip`, { timeoutS: 0.2 }));
    expect(e).toBeInstanceOf(Retryable);
    expect(e.message).toBe(`GET ${host}: timeout after 0.2 s`);
  });

  test("a body past maxBytes is Retryable; exactly maxBytes is kept", async () => {
    const e = await failure(http.request("GET", `${base}/big`, { maxBytes: 1024 * 1024 }));
    expect(e).toBeInstanceOf(Retryable);
    expect(e.message).toBe(`GET ${host}: response too large`);
    expect((await http.request("GET", `${base}/exact`, { maxBytes: 1000 })).text).toHaveLength(1000);
    expect(await failure(http.request("GET", `${base}/exact`, { maxBytes: 999 }))).toBeInstanceOf(RetryLater);
  });

  test("an endless body stops at the cap, long before the timeout", async () => {
    const e = await failure(http.request("GET", `${base}/endless`, { maxBytes: 200_000, timeoutS: 20 }));
    expect(e.message).toBe(`GET ${host}: response too large`);
  });

  test("a refused connection is Retryable", async () => {
    const closed = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response("") });
    const port = closed.port;
    closed.stop(true);
    const e = await failure(http.getJson(`http://127.0.0.1:${port}/x`));
    expect(e).toBeInstanceOf(Retryable);
    expect(e.message).toBe(`GET 127.0.0.1:${port}: connection failed`);
  });

  test("a URL that does not parse, or is not http(s), is Permanent", async () => {
    expect(await failure(http.getJson("not a url"))).toBeInstanceOf(Permanent);
    expect(await failure(http.getJson("file:///etc/passwd"))).toBeInstanceOf(Permanent);
  });
});

describe("redirects", () => {
  test("not followed by default: request() answers the 3xx, the typed helpers throw Permanent", async () => {
    const r = await http.request("GET", `${base}/redirect`);
    expect(r.status).toBe(302);
    expect(r.headers.location).toBe("/json");
    const e = await failure(http.getJson(`${base}/redirect`));
    expect(e).toBeInstanceOf(Permanent);
    expect(e.message).toBe(`GET ${host}: redirect not followed (http 302)`);
  });

  test("followed when asked", async () => {
    expect(await http.getJson(`${base}/redirect`, { followRedirects: true })).toEqual({ ok: true, n: 1 });
  });
});

describe("conditional GET", () => {
  test("sends If-None-Match and If-Modified-Since; 304 answers empty, headers lower-cased", async () => {
    const first = await http.getText(`${base}/conditional`);
    expect(first.status).toBe(200);
    expect(first.text).toBe("<feed/>");
    expect(first.headers.etag).toBe('"v1"');
    expect(first.headers["x-feed-kind"]).toBe("Atom");
    const again = await http.getText(`${base}/conditional`, {
      etag: first.headers.etag,
      lastModified: first.headers["last-modified"],
    });
    expect(again).toEqual({
      status: 304,
      text: "",
      headers: expect.objectContaining({ etag: '"v1"', "last-modified": LAST_MODIFIED }),
    });
  });

  test("a failing status still follows the rule", async () => {
    expect(await failure(http.getText(`${base}/status/503`))).toBeInstanceOf(Retryable);
    expect(await failure(http.getText(`${base}/status/410`))).toBeInstanceOf(Permanent);
  });
});

describe("nothing secret in an error or a log line", () => {
  const q = `?token=${SECRET_SENTINEL}&u=${PAYLOAD_SENTINEL}`;
  const body = { secret: SECRET_SENTINEL, payload: PAYLOAD_SENTINEL };

  test("status, timeout, size and transport errors name only the method, host and status", async () => {
    const before = lines.length;
    const errors = [
      await failure(http.getJson(`${base}/status/500${q}`)),
      await failure(
        http.postJson(`${base}/status/404${q}`, body, { headers: { authorization: `Bearer ${SECRET_SENTINEL}` } }),
      ),
      await failure(http.postForm(`${base}/status/503${q}`, body)),
      await failure(http.getJson(`${base}/not-json${q}`)),
      await failure(http.getJson(`${base}/never${q}`, { timeoutS: 0.2 })),
      await failure(http.getJson(`${base}/big${q}`, { maxBytes: 10 })),
      await failure(http.getJson(`${base}/redirect${q}`)),
      await failure(http.getJson(`http://user:${SECRET_SENTINEL}@127.0.0.1:1/${PAYLOAD_SENTINEL}${q}`)),
    ];
    const logged = lines.slice(before);
    expect(logged.length).toBeGreaterThanOrEqual(7);
    for (const text of [...errors.map((e) => e.message), ...logged]) {
      expect(text).not.toContain(SECRET_SENTINEL);
      expect(text).not.toContain(PAYLOAD_SENTINEL);
      expect(text).not.toContain("/status");
      expect(text).not.toContain("?");
    }
  });

  test("a log line says the method, host, status and duration", async () => {
    await http.getJson(`${base}/json${q}`);
    expect(lines.at(-1)).toBe(`GET ${host}: http 200 (0 ms)`);
  });
});

describe("pacing", () => {
  test("every request waits on the pacer first", async () => {
    let release = () => {};
    let waits = 0;
    const pacer: Pacer = {
      wait() {
        waits++;
        return new Promise((r) => (release = r));
      },
    };
    const paced = createHttp({ pacer });
    const before = hits;
    const pending = paced.getJson(`${base}/json`);
    // wait() is called before anything else happens, so the request is held at it.
    expect(waits).toBe(1);
    release();
    expect(await pending).toEqual({ ok: true, n: 1 });
    expect(hits).toBe(before + 1);
  });
});
