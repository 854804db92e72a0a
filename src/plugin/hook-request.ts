// The request a source plugin sees, built from what arrived on the wire (or, for an emit or
// `hookspool enqueue`, from a payload): headers by lower-case name, the query, the body and its
// text and JSON, parsed once.
import { readFileSync } from "node:fs";
import { BadPayload, type HookRequest } from "./types.ts";

export interface WireRequest {
  method: string;
  /** Path and query string, e.g. "/hooks/github?token=..." */
  url: string;
  headers: Iterable<[string, string]>;
  body: Uint8Array;
  /**
   * A large body kept in a file, in place of `body`: read from the file when first asked for, and
   * let go of once text() has decoded it, so a 25 MB body is held as bytes and text, then as text
   * and payload, never as all three (a plugin that asks for the bytes again gets them read back).
   * `path` is asked each time: the file is renamed to its hash before the commit.
   */
  bodyFile?: { path: () => string; size: number };
  /** The TCP peer (or "unix" for a Unix socket). */
  peer: string;
  now: number;
}

const LOOPBACK = /^(127\.\d+\.\d+\.\d+|::1|::ffff:127\.\d+\.\d+\.\d+|unix)$/;

export function isLoopback(addr: string): boolean {
  return LOOPBACK.test(addr);
}

const utf8 = new TextDecoder("utf-8", { fatal: true });

/** Whether a body starts with UTF-8's byte-order mark (which text() reads past). */
function hasBom(body: Uint8Array): boolean {
  return body.length >= 3 && body[0] === 0xef && body[1] === 0xbb && body[2] === 0xbf;
}

/** What is known of a request's body without reading it again. */
export interface BodyShape {
  size: number;
  /** Whether the body is kept in a file (WireRequest.bodyFile): its raw copy is the file's. */
  inFile: boolean;
  /** Whether it starts with a byte-order mark: known without a read once text() has run. */
  bom(): boolean;
}

const shapes = new WeakMap<HookRequest, BodyShape>();

/** The shape of a request's body: hookRequest's own record of a kept body, or the body itself. */
export function bodyShape(req: HookRequest): BodyShape {
  return shapes.get(req) ?? { size: req.body.length, inFile: false, bom: () => hasBom(req.body) };
}

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
  const file = w.bodyFile;
  let bytes: Uint8Array | null = file ? null : w.body;
  const readBytes = (): Uint8Array => {
    bytes ??= file ? readFileSync(file.path()) : w.body;
    return bytes;
  };
  let bom: boolean | undefined;
  const req: HookRequest = {
    method: w.method.toUpperCase(),
    path,
    query,
    rawQuery: q < 0 ? "" : w.url.slice(q + 1),
    headers,
    header: (name) => headers[name.toLowerCase()] ?? null,
    get body() {
      return readBytes();
    },
    routeHint: headers["x-hookspool-route"] ?? null,
    remoteAddr: remote,
    now: w.now,
    text() {
      if (text === undefined) {
        const b = readBytes();
        bom = hasBom(b);
        try {
          text = utf8.decode(b);
        } catch {
          throw new BadPayload("the body is not valid UTF-8", "not_utf8");
        }
        // The text stands for a kept body from here on; its bytes are in the file still.
        if (file) bytes = null;
      }
      return text;
    },
    json() {
      if (parsed === undefined) {
        const t = this.text();
        // The bytes a kept body was decoded from are garbage now: collected before the parse
        // makes the payload, so that takes their memory rather than more.
        if (file) Bun.gc(true);
        try {
          parsed = { value: JSON.parse(t) };
        } catch {
          throw new BadPayload("the body is not valid JSON", "not_json");
        }
      }
      return parsed.value;
    },
  };
  // Only a kept body needs a record: one in memory is its own (bodyShape reads it).
  if (file)
    shapes.set(req, {
      size: file.size,
      inFile: true,
      bom: () => {
        bom ??= hasBom(readBytes());
        return bom;
      },
    });
  return req;
}
