// The request a source plugin sees, built from what arrived on the wire (or, for an emit or
// `hookspool enqueue`, from a payload): headers by lower-case name, the query, the body and its
// text and JSON, parsed once.
import { BadPayload, type HookRequest } from "./types.ts";

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

/** The HookRequest for a request as it arrived. */
export function hookRequest(w: WireRequest): HookRequest {
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
    rawQuery: q < 0 ? "" : w.url.slice(q + 1),
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
