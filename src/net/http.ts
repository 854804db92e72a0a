// The one way a bobbin reaches the network: every request is paced, bounded in time (the body
// included) and in size, never follows a redirect unless asked, and fails with a typed error
// that names the method, the host and the status, and never a path, a query, a header value
// or a body, since any of those can carry a token.
import { type Clock, systemClock } from "../clock.ts";
import { Permanent, Retryable } from "../plugin/types.ts";
import type { Pacer } from "./pace.ts";

export interface RequestOptions {
  headers?: Record<string, string>;
  /** seconds; default 30 */
  timeoutS?: number;
  /** response bytes kept; more is a Retryable "response too large" (default 10 MiB) */
  maxBytes?: number;
  /** default false: redirect "manual", and a 3xx answer is Permanent "redirect not followed" (for the typed helpers) */
  followRedirects?: boolean;
}

export interface HttpResponse {
  status: number;
  /** names lower-cased */
  headers: Record<string, string>;
  text: string;
}

export type SendOptions = RequestOptions & { body?: string | Uint8Array };
export type ConditionalOptions = RequestOptions & { etag?: string; lastModified?: string };
export interface TextAnswer {
  status: 200 | 304;
  text: string;
  headers: Record<string, string>;
}

export interface Http {
  /**
   * Any status answered; throws Retryable only for transport failure, timeout, or the size cap (and Permanent for a URL
   * that is not http(s)).
   */
  request(method: string, url: string, opts?: SendOptions): Promise<HttpResponse>;
  /** 2xx -> parsed JSON (non-JSON body: Permanent "response is not JSON"); otherwise throws per the status rule. */
  getJson<T = unknown>(url: string, opts?: RequestOptions): Promise<T>;
  postJson<T = unknown>(url: string, body: unknown, opts?: RequestOptions): Promise<T>;
  /** application/x-www-form-urlencoded POST, JSON answer (the OAuth token endpoint). */
  postForm<T = unknown>(url: string, form: Record<string, string>, opts?: RequestOptions): Promise<T>;
  /**
   * Conditional GET: sends If-None-Match / If-Modified-Since when given; 304 answers with an empty text, any 2xx as 200
   * with its text.
   */
  getText(url: string, opts?: ConditionalOptions): Promise<TextAnswer>;
}

export const DEFAULT_TIMEOUT_S = 30;
export const DEFAULT_MAX_BYTES = 10 * 1024 * 1024;
/** The longest Retry-After honoured: a sender asking for more is asked again within the hour. */
export const MAX_RETRY_AFTER_S = 3600;

/** A Retryable from the network; retryAfterS is the sender's Retry-After when it gave one. */
export class RetryLater extends Retryable {
  constructor(
    message: string,
    readonly retryAfterS: number | null = null,
    /** The answer's status; null when there was no answer (transport, timeout). */
    readonly status: number | null = null,
  ) {
    super(message);
  }
}

/** A status that will not change on retry (a 4xx, a redirect not followed). */
export class HttpStatusError extends Permanent {
  constructor(
    message: string,
    readonly status: number,
  ) {
    super(message);
  }
}

/** The host (and port) of url for a message: never its user info, path or query. */
export function hostOf(url: string): string {
  try {
    return new URL(url).host;
  } catch {
    return "invalid URL";
  }
}

/**
 * Seconds a Retry-After asks for (delta-seconds or an HTTP date read against now), capped; null when absent or
 * unreadable.
 */
export function retryAfterSeconds(value: string | undefined, now: number): number | null {
  if (value === undefined) return null;
  const v = value.trim();
  let s: number;
  if (/^\d+$/.test(v)) s = Number(v);
  else {
    // Every HTTP-date form starts with the day's name; Date.parse alone would take "-5" as a year.
    const at = /^[A-Za-z]/.test(v) ? Date.parse(v) : Number.NaN;
    if (Number.isNaN(at)) return null;
    s = Math.max(0, at / 1000 - now);
  }
  return Math.min(s, MAX_RETRY_AFTER_S);
}

/** Why a 403 is a rate limit rather than a refusal (Google's APIs answer "rateLimitExceeded" so). */
const RATE_LIMIT_REASONS = new Set(["rateLimitExceeded", "userRateLimitExceeded", "RATE_LIMIT_EXCEEDED"]);

/** A 403 that says it is a rate limit: Google's error.errors[].reason, or error.status. */
function rateLimited403(res: HttpResponse): boolean {
  if (res.status !== 403) return false;
  const body = tryJson(res.text) as { error?: { status?: unknown; errors?: { reason?: unknown }[] } } | undefined;
  const e = body?.error;
  if (!e || typeof e !== "object") return false;
  if (typeof e.status === "string" && RATE_LIMIT_REASONS.has(e.status)) return true;
  return (
    Array.isArray(e.errors) && e.errors.some((x) => typeof x?.reason === "string" && RATE_LIMIT_REASONS.has(x.reason))
  );
}

/**
 * The status rule: null for a 2xx; 408, 425, 429, 5xx and a 403 that says it is a rate limit
 * are worth another try (RetryLater, with the answer's Retry-After); anything else will answer
 * the same again (HttpStatusError).
 */
export function statusError(
  method: string,
  url: string,
  res: HttpResponse,
  clock: Clock = systemClock,
): RetryLater | HttpStatusError | null {
  const s = res.status;
  if (s >= 200 && s < 300) return null;
  const where = `${method} ${hostOf(url)}`;
  if (s === 408 || s === 425 || s === 429 || s >= 500 || rateLimited403(res))
    return new RetryLater(`${where}: http ${s}`, retryAfterSeconds(res.headers["retry-after"], clock.now()), s);
  if (s >= 300 && s < 400 && s !== 304) return new HttpStatusError(`${where}: redirect not followed (http ${s})`, s);
  return new HttpStatusError(`${where}: http ${s}`, s);
}

/** JSON.parse, or undefined when the text is not JSON. */
export function tryJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** The parsed body of a 2xx answer, or the status rule's error (204: null). */
export function jsonOf<T>(method: string, url: string, res: HttpResponse, clock: Clock = systemClock): T {
  const err = statusError(method, url, res, clock);
  if (err) throw err;
  if (res.status === 204) return null as T;
  const json = tryJson(res.text);
  if (json === undefined) throw new Permanent(`${method} ${hostOf(url)}: response is not JSON`);
  return json as T;
}

class TooLarge extends Error {}

/** The body as text, at most maxBytes of it; one byte more cancels the stream and throws TooLarge. */
async function readCapped(res: Response, maxBytes: number): Promise<string> {
  const declared = Number(res.headers.get("content-length") ?? "");
  if (!res.body || declared > maxBytes) {
    await res.body?.cancel().catch(() => {});
    if (declared > maxBytes) throw new TooLarge();
    return "";
  }
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      size += value.byteLength;
      if (size > maxBytes) throw new TooLarge();
      chunks.push(value);
    }
  } finally {
    reader.cancel().catch(() => {});
  }
  return new TextDecoder().decode(Buffer.concat(chunks));
}

const TIMED_OUT = Symbol("timed out");

let network: typeof fetch | null = null;

/**
 * Answer the requests of every client made without a fetch of its own from `f` until the
 * returned function is called: `hookspool bobbin check` serves a source's API calls (a key
 * fetch) from the kit's stubs this way. Nothing else calls it.
 */
export function useNetwork(f: typeof fetch): () => void {
  const previous = network;
  network = f;
  return () => {
    network = previous;
  };
}

export function createHttp(
  opts: { clock?: Clock; fetch?: typeof fetch; pacer?: Pacer; log?: (line: string) => void } = {},
): Http {
  const clock = opts.clock ?? systemClock;
  // Read at each request: the kit may stand in for the network after a client was made.
  const doFetch: typeof fetch =
    opts.fetch ??
    (((input: string | URL | Request, init?: RequestInit) => (network ?? fetch)(input, init)) as typeof fetch);
  const log = opts.log ?? (() => {});

  async function request(method: string, url: string, o: SendOptions = {}): Promise<HttpResponse> {
    const where = `${method} ${hostOf(url)}`;
    let parsed: URL;
    try {
      parsed = new URL(url);
    } catch {
      throw new Permanent(`${method}: invalid URL`);
    }
    if (parsed.protocol !== "https:" && parsed.protocol !== "http:")
      throw new Permanent(`${where}: not an http(s) URL`);
    if (opts.pacer) await opts.pacer.wait();

    const timeoutS = o.timeoutS ?? DEFAULT_TIMEOUT_S;
    const maxBytes = o.maxBytes ?? DEFAULT_MAX_BYTES;
    const started = clock.now();
    const ctrl = new AbortController();
    let timer: ReturnType<typeof setTimeout> | undefined;
    // The watchdog: whatever fetch does with the abort (a DNS lookup may not heed it), the call returns at the timeout.
    const watchdog = new Promise<typeof TIMED_OUT>((resolve) => {
      timer = setTimeout(() => {
        ctrl.abort();
        resolve(TIMED_OUT);
      }, timeoutS * 1000);
    });
    const work = (async (): Promise<HttpResponse> => {
      const res = await doFetch(url, {
        method,
        headers: o.headers,
        body: o.body,
        redirect: o.followRedirects ? "follow" : "manual",
        signal: ctrl.signal,
        // Explicit, so NODE_TLS_REJECT_UNAUTHORIZED in the environment cannot turn verification off.
        tls: { rejectUnauthorized: true },
      });
      const text = await readCapped(res, maxBytes);
      const headers: Record<string, string> = {};
      for (const [k, v] of res.headers) headers[k.toLowerCase()] = v;
      return { status: res.status, headers, text };
    })();
    work.catch(() => {}); // settles after the watchdog won: nobody is waiting for it then

    let outcome: HttpResponse | RetryLater | typeof TIMED_OUT;
    try {
      outcome = await Promise.race([work, watchdog]);
    } catch (e) {
      // The transport's own message is never used: it can quote the URL.
      if (e instanceof TooLarge) outcome = new RetryLater(`${where}: response too large`);
      else outcome = ctrl.signal.aborted ? TIMED_OUT : new RetryLater(`${where}: connection failed`);
    } finally {
      clearTimeout(timer);
    }
    if (outcome === TIMED_OUT) outcome = new RetryLater(`${where}: timeout after ${timeoutS} s`);
    if (outcome instanceof RetryLater) {
      log(`${outcome.message} (${ms(clock.now() - started)})`);
      throw outcome;
    }
    log(`${where}: http ${outcome.status} (${ms(clock.now() - started)})`);
    return outcome;
  }

  const json = (headers: Record<string, string> | undefined, extra: Record<string, string> = {}) =>
    mergeHeaders({ accept: "application/json", ...extra }, headers);

  return {
    request,
    async getJson<T>(url: string, o: RequestOptions = {}) {
      return jsonOf<T>("GET", url, await request("GET", url, { ...o, headers: json(o.headers) }), clock);
    },
    async postJson<T>(url: string, body: unknown, o: RequestOptions = {}) {
      const res = await request("POST", url, {
        ...o,
        headers: json(o.headers, { "content-type": "application/json" }),
        body: JSON.stringify(body),
      });
      return jsonOf<T>("POST", url, res, clock);
    },
    async postForm<T>(url: string, form: Record<string, string>, o: RequestOptions = {}) {
      const body = new URLSearchParams(form).toString();
      const res = await request("POST", url, {
        ...o,
        headers: json(o.headers, { "content-type": "application/x-www-form-urlencoded" }),
        body,
      });
      return jsonOf<T>("POST", url, res, clock);
    },
    async getText(url: string, o: ConditionalOptions = {}) {
      const conditional: Record<string, string> = {};
      if (o.etag !== undefined) conditional["if-none-match"] = o.etag;
      if (o.lastModified !== undefined) conditional["if-modified-since"] = o.lastModified;
      const res = await request("GET", url, { ...o, headers: mergeHeaders(conditional, o.headers) });
      if (res.status === 304) return { status: 304, text: "", headers: res.headers };
      const err = statusError("GET", url, res, clock);
      if (err) throw err;
      return { status: 200, text: res.text, headers: res.headers };
    },
  };
}

/** Later names win, case-insensitively (a caller's "Accept" replaces the default "accept"). */
export function mergeHeaders(...sets: (Record<string, string> | undefined)[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const set of sets) for (const [k, v] of Object.entries(set ?? {})) out[k.toLowerCase()] = v;
  return out;
}

function ms(seconds: number): string {
  return `${Math.round(seconds * 1000)} ms`;
}
