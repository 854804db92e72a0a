// The plugin Request (spec 14.1) built from what arrived on the wire.
import { BadPayload, type Request } from "../plugin/types.ts";

export interface WireRequest {
  method: string;
  /** Path and query string, e.g. "/hooks/github?token=..." */
  url: string;
  headers: Iterable<[string, string]>;
  body: Uint8Array;
  /** The TCP peer (or "unix" for a Unix socket). */
  peer: string;
  now: number;
}

const LOOPBACK = /^(127\.\d+\.\d+\.\d+|::1|::ffff:127\.\d+\.\d+\.\d+|unix)$/;

export function isLoopback(addr: string): boolean {
  return LOOPBACK.test(addr);
}

const utf8 = new TextDecoder("utf-8", { fatal: true });

export function makeRequest(w: WireRequest): Request {
  const headers: Record<string, string> = {};
  for (const [k, v] of w.headers) headers[k.toLowerCase()] = v;
  const q = w.url.indexOf("?");
  const path = q < 0 ? w.url : w.url.slice(0, q);
  const query: Record<string, string> = {};
  if (q >= 0) {
    for (const [k, v] of new URLSearchParams(w.url.slice(q + 1))) if (!(k in query)) query[k] = v;
  }
  // X-Forwarded-For is the reverse proxy's word, believed only from loopback and only for logs.
  let remote = w.peer;
  const xff = headers["x-forwarded-for"];
  if (xff && isLoopback(w.peer)) remote = xff.split(",").pop()?.trim() || w.peer;
  let text: string | undefined;
  let parsed: { value: unknown } | undefined;
  return {
    method: w.method.toUpperCase(),
    path,
    query,
    headers,
    header: (name) => headers[name.toLowerCase()] ?? null,
    body: w.body,
    routeHint: headers["x-hookspool-route"] ?? null,
    remoteAddr: remote,
    now: w.now,
    text() {
      if (text === undefined) {
        try {
          text = utf8.decode(w.body);
        } catch {
          throw new BadPayload("the body is not valid UTF-8", "not_utf8");
        }
      }
      return text;
    },
    json() {
      if (parsed === undefined) {
        const t = this.text();
        try {
          parsed = { value: JSON.parse(t) };
        } catch {
          throw new BadPayload("the body is not valid JSON", "not_json");
        }
      }
      return parsed.value;
    },
  };
}

/** Query parameters that may carry a secret (a push token, a key, a signature, an OAuth code). */
const SECRET_PARAM = /token|key|secret|sig|auth|pass|code|credential/i;

/**
 * The path and query string worth keeping with a quarantined request: every parameter that
 * may carry a secret (the source's own token parameter, and any whose name looks like one)
 * left out, so a replay sees the rest of the query as the plugin did.
 */
export function storableUrl(url: string, secretParams: readonly string[]): string {
  const q = url.indexOf("?");
  if (q < 0) return url;
  const drop = new Set(secretParams);
  const kept = [...new URLSearchParams(url.slice(q + 1))].filter(([k]) => !drop.has(k) && !SECRET_PARAM.test(k));
  return kept.length ? `${url.slice(0, q)}?${new URLSearchParams(kept).toString()}` : url.slice(0, q);
}

/** Parse a captured request (.http: start line, headers, blank line, body) for `source test`. */
export function parseHttpCapture(text: string): { method: string; url: string; headers: [string, string][]; body: Uint8Array } {
  const normalized = text.replace(/\r\n/g, "\n");
  const split = normalized.indexOf("\n\n");
  const head = split < 0 ? normalized : normalized.slice(0, split);
  const body = split < 0 ? "" : normalized.slice(split + 2);
  const lines = head.split("\n").filter((l) => !l.startsWith("#"));
  const start = (lines.shift() ?? "").trim().split(/\s+/);
  if (start.length < 2) throw new Error("the first line must be METHOD PATH [HTTP/1.1]");
  const headers: [string, string][] = [];
  for (const line of lines) {
    if (line.trim() === "") continue;
    const c = line.indexOf(":");
    if (c <= 0) throw new Error(`not a header line: ${line.slice(0, 40)}`);
    headers.push([line.slice(0, c).trim(), line.slice(c + 1).trim()]);
  }
  // A capture's body ends at the file's end; a single trailing newline is the file's, not the body's.
  return { method: start[0], url: start[1], headers, body: new TextEncoder().encode(body.replace(/\n$/, "")) };
}
