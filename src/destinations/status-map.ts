// How an HTTP answer or a failed request becomes an Outcome, shared by hermes and http (the
// table in docs/receiving.md). Reasons are fixed short phrases and details hold only a status,
// a standard reason phrase and an error code: never a URL, a header value, a response body (a
// receiver may echo our payload) or a secret.
import { outcome, type Outcome } from "../delivery.ts";

/** hermes maps a 3xx to config (its base URL is wrong), http to permanent. */
export type Flavor = "http" | "hermes";

// Standard phrases only: the receiver's own status text could carry anything, so it is never used.
const PHRASES: Record<number, string> = {
  200: "ok",
  201: "created",
  202: "accepted",
  204: "no content",
  301: "moved permanently",
  302: "found",
  303: "see other",
  307: "temporary redirect",
  308: "permanent redirect",
  400: "bad request",
  401: "unauthorized",
  403: "forbidden",
  404: "not found",
  405: "method not allowed",
  408: "request timeout",
  409: "conflict",
  410: "gone",
  413: "content too large",
  415: "unsupported media type",
  422: "unprocessable content",
  429: "too many requests",
  500: "internal server error",
  502: "bad gateway",
  503: "service unavailable",
  504: "gateway timeout",
};

/** "HTTP 503 (service unavailable)": the status and a standard phrase, nothing the receiver chose. */
export function statusLine(status: number): string {
  const phrase = PHRASES[status];
  return phrase ? `HTTP ${status} (${phrase})` : `HTTP ${status}`;
}

/**
 * Seconds to wait from a Retry-After value: delay-seconds or an HTTP date relative to `now`.
 * Null when absent, unreadable, or not in the future: "Retry-After: 0" or a past date is no
 * hint at all (taken as one, it would retry every poll for ever), so the backoff schedule
 * applies, and a 503 without a usable hint is a transport failure that feeds the breaker. The
 * dispatcher caps a hint at 1 h.
 */
export function parseRetryAfter(value: string | null, now: number): number | null {
  if (value === null) return null;
  const s = value.trim();
  let seconds: number;
  if (/^\d{1,10}$/.test(s)) seconds = Number(s);
  else {
    // HTTP dates always name a weekday or month; requiring letters keeps Date.parse from reading
    // "1.5" or "2024" as a date.
    if (!/[A-Za-z]{3}/.test(s)) return null;
    const t = Date.parse(s);
    if (Number.isNaN(t)) return null;
    seconds = t / 1000 - now;
  }
  return seconds > 0 ? seconds : null;
}

/** The outcome of a received status; hermes adds its own reasons on top. */
export function outcomeForStatus(status: number, retryAfter: string | null, flavor: Flavor, now: number): Outcome {
  const reason = `http ${status}`;
  const line = statusLine(status);
  if (status >= 200 && status < 300) return outcome({ kind: "ok", reason, status, detail: line });
  if (status >= 300 && status < 400) {
    // Redirects are never followed. On http the receiver moved (permanent, per Standard
    // Webhooks); on hermes it is our base_url that is wrong, which a config change fixes.
    const klass = flavor === "http" ? "permanent" : "config";
    return outcome({
      kind: klass === "permanent" ? "dead" : "retry",
      klass,
      reason,
      status,
      detail: `${line}; redirect not followed`,
    });
  }
  if (status === 429) {
    const after = parseRetryAfter(retryAfter, now);
    return outcome({
      kind: "retry",
      klass: "throttle",
      reason,
      status,
      retryAfterS: after,
      detail: after === null ? line : `${line}; retry after ${Math.round(after)} s`,
    });
  }
  if (status === 408) return outcome({ kind: "retry", klass: "transport", reason, status, detail: line });
  if (status === 400 || status === 413 || status === 415 || status === 422) {
    // The document itself is rejected, which no config change alters.
    return outcome({ kind: "dead", klass: "permanent", reason, status, detail: line });
  }
  if (status >= 400 && status < 500) {
    // 401/403/404/405/410 and every 4xx the table does not name (409, 418, ...): a person must
    // look, and the batch must never be dropped for it.
    return outcome({ kind: "retry", klass: "config", reason, status, detail: line });
  }
  if (status === 503) {
    const after = parseRetryAfter(retryAfter, now);
    if (after !== null)
      return outcome({
        kind: "retry",
        klass: "throttle",
        reason,
        status,
        retryAfterS: after,
        detail: `${line}; retry after ${Math.round(after)} s`,
      });
  }
  // Other 5xx, and anything outside 200-599 a broken receiver might send.
  return outcome({ kind: "retry", klass: "transport", reason, status, detail: line });
}

// Codes of certificate failures (BoringSSL/OpenSSL names as Bun reports them, plus Node's).
const CERT_CODE = /CERT|SELF_SIGNED|UNABLE_TO_VERIFY|UNABLE_TO_GET_ISSUER|ALTNAME|HOSTNAME_MISMATCH|ERR_TLS_CERT/;

/** A short, safe token from an error's code or name (never its message, which may hold a URL). */
function errorCode(e: unknown): string {
  const err = e as { code?: unknown; name?: unknown } | null;
  const raw = typeof err?.code === "string" ? err.code : typeof err?.name === "string" ? err.name : "error";
  return raw.replace(/[^A-Za-z0-9_]/g, "").slice(0, 48) || "error";
}

/** The outcome of a request that got no answer: refused, reset, DNS, TLS. */
export function outcomeForError(e: unknown): Outcome {
  const code = errorCode(e);
  const transport = (reason: string) =>
    outcome({ kind: "retry", klass: "transport", reason, detail: `${reason} (${code})` });
  // A certificate the system does not trust is the operator's to fix: config, not transport.
  if (CERT_CODE.test(code))
    return outcome({
      kind: "retry",
      klass: "config",
      reason: "tls certificate rejected",
      detail: `tls certificate rejected (${code})`,
    });
  switch (code) {
    case "ECONNREFUSED":
      return transport("connection refused");
    case "ECONNRESET":
    case "EPIPE":
    case "ECONNABORTED":
    case "ConnectionClosed":
      return transport("connection reset");
    case "ENOTFOUND":
    case "EAI_AGAIN":
    case "EAI_NONAME":
    case "EAI_FAIL":
    case "DNSException":
      return transport("dns failure");
    case "ETIMEDOUT":
    case "ConnectionTimeout":
      return transport("connect timeout");
    case "EHOSTUNREACH":
    case "ENETUNREACH":
    case "EHOSTDOWN":
      return transport("host unreachable");
  }
  if (/TLS|SSL|HANDSHAKE/i.test(code)) return transport("tls error");
  return transport("request failed");
}
