// The shared status and error mapping.
import { describe, expect, test } from "bun:test";
import { outcomeForError, outcomeForStatus, parseRetryAfter } from "../../src/destinations/status-map.ts";
import { SENTINEL } from "./support.ts";

const NOW = 1_700_000_000;

describe("parseRetryAfter", () => {
  test("seconds or an HTTP date, relative to the injected clock", () => {
    expect(parseRetryAfter("120", NOW)).toBe(120);
    // Not in the future is no hint at all: the backoff schedule applies instead of a hot loop.
    expect(parseRetryAfter(" 0 ", NOW)).toBeNull();
    expect(parseRetryAfter(new Date((NOW + 90) * 1000).toUTCString(), NOW)).toBe(90);
    expect(parseRetryAfter(new Date((NOW - 90) * 1000).toUTCString(), NOW)).toBeNull();
    expect(parseRetryAfter(new Date(NOW * 1000).toUTCString(), NOW)).toBeNull();
  });

  test("absent or unreadable is null", () => {
    for (const v of [null, "", "1.5", "-3", "soon", "next Tuesday-ish"]) expect(parseRetryAfter(v, NOW)).toBeNull();
  });
});

describe("outcomeForStatus", () => {
  const cls = (status: number, flavor: "http" | "hermes" = "http", ra: string | null = null) => {
    const o = outcomeForStatus(status, ra, flavor, NOW);
    return `${o.kind}/${o.klass ?? "-"}`;
  };

  test("every row of the status table", () => {
    expect([200, 202, 204].map((s) => cls(s))).toEqual(["ok/-", "ok/-", "ok/-"]);
    expect([400, 413, 415, 422].map((s) => cls(s))).toEqual(Array(4).fill("dead/permanent"));
    expect([401, 403, 404, 405, 410, 409, 418, 451].map((s) => cls(s))).toEqual(Array(8).fill("retry/config"));
    expect(cls(408)).toBe("retry/transport");
    expect(cls(429)).toBe("retry/throttle");
    expect(cls(503, "http", "10")).toBe("retry/throttle");
    expect(cls(503, "http", "garbage")).toBe("retry/transport");
    expect([500, 502, 503, 504, 599, 600].map((s) => cls(s))).toEqual(Array(6).fill("retry/transport"));
  });

  test("a 3xx is permanent on http and config on hermes", () => {
    for (const s of [301, 302, 307, 308]) {
      expect(cls(s, "http")).toBe("dead/permanent");
      expect(cls(s, "hermes")).toBe("retry/config");
    }
  });

  test("429 carries Retry-After when given, null otherwise", () => {
    expect(outcomeForStatus(429, "30", "http", NOW).retryAfterS).toBe(30);
    expect(outcomeForStatus(429, null, "http", NOW).retryAfterS).toBeNull();
  });

  test("a Retry-After of 0 or in the past is no hint: 429 stays a throttle, 503 is a transport failure", () => {
    const past = new Date((NOW - 60) * 1000).toUTCString();
    for (const v of ["0", past]) {
      expect(outcomeForStatus(429, v, "http", NOW)).toMatchObject({
        kind: "retry",
        klass: "throttle",
        retryAfterS: null,
      });
      // Like a 503 without Retry-After, it feeds the breaker.
      expect(outcomeForStatus(503, v, "hermes", NOW)).toMatchObject({
        kind: "retry",
        klass: "transport",
        retryAfterS: null,
      });
    }
  });

  test("reasons and details are fixed phrases", () => {
    const o = outcomeForStatus(503, null, "http", NOW);
    expect(o).toMatchObject({ reason: "http 503", status: 503, detail: "HTTP 503 (service unavailable)" });
    expect(outcomeForStatus(499, null, "http", NOW).detail).toBe("HTTP 499");
  });
});

describe("outcomeForError", () => {
  const err = (code: string, message = `failed for https://h.example/x?token=${SENTINEL}`) =>
    Object.assign(new TypeError(message), { code });

  test("transport phrases for network failures", () => {
    expect(outcomeForError(err("ECONNREFUSED"))).toMatchObject({
      kind: "retry",
      klass: "transport",
      reason: "connection refused",
    });
    expect(outcomeForError(err("ECONNRESET")).reason).toBe("connection reset");
    expect(outcomeForError(err("ENOTFOUND")).reason).toBe("dns failure");
    expect(outcomeForError(err("EHOSTUNREACH")).reason).toBe("host unreachable");
    expect(outcomeForError(new Error("?")).reason).toBe("request failed");
  });

  test("a certificate failure is config", () => {
    for (const code of [
      "DEPTH_ZERO_SELF_SIGNED_CERT",
      "CERT_HAS_EXPIRED",
      "ERR_TLS_CERT_ALTNAME_INVALID",
      "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
      "SELF_SIGNED_CERT_IN_CHAIN",
    ]) {
      expect(outcomeForError(err(code))).toMatchObject({
        kind: "retry",
        klass: "config",
        reason: "tls certificate rejected",
      });
    }
  });

  test("an error's message (which may hold a URL and its query) never reaches the outcome", () => {
    for (const code of ["ECONNREFUSED", "WHATEVER", "DEPTH_ZERO_SELF_SIGNED_CERT"]) {
      const o = outcomeForError(err(code));
      expect(`${o.reason} ${o.detail}`).not.toContain(SENTINEL);
      expect(o.detail).not.toContain("token");
    }
  });
});
