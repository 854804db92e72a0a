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

/**
 * A header value as the sender wrote it. HTTP hands header bytes over one character per byte
 * (Latin-1), so a UTF-8 value ("café") would read "cafÃ©": bytes that are valid UTF-8 are read as
 * UTF-8; any other value stays as it came. ASCII, every signature and id, is the same either way.
 */
export function headerText(v: string): string {
  if (!/[^\u0000-\u007f]/.test(v) || /[^\u0000-\u00ff]/.test(v)) return v;
  try {
    return utf8.decode(Buffer.from(v, "latin1"));
  } catch {
    return v;
  }
}

/** The HookRequest for a request as it arrived. */
/** Who sent a request: X-Forwarded-For is the reverse proxy's word, believed only from loopback and only for logs. */
export function remoteAddress(peer: string, xff: string | null): string {
  if (!xff || !isLoopback(peer)) return peer;
  return (xff.split(",").pop()?.trim() || peer).slice(0, 256);
}

export function hookRequest(w: WireRequest): HookRequest {
  const headers: Record<string, string> = {};
  for (const [k, v] of w.headers) headers[k.toLowerCase()] = headerText(v);
  const q = w.url.indexOf("?");
  const path = q < 0 ? w.url : w.url.slice(0, q);
  const query: Record<string, string> = {};
  if (q >= 0) {
    for (const [k, v] of new URLSearchParams(w.url.slice(q + 1))) if (!(k in query)) query[k] = v;
  }
  const remote = remoteAddress(w.peer, headers["x-forwarded-for"] ?? null);
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
