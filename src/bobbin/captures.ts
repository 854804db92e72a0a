// A bobbin's conformance captures: captured requests (.http files, the format `hookspool source
// test --request` reads) with the outcome each must have, and captures/kit.toml, the example
// instance they were made for and the test secrets they are signed with.
import { parse as parseToml } from "smol-toml";

export interface CapturedRequest {
  method: string;
  url: string;
  headers: [string, string][];
  body: Uint8Array;
}

/** Parse a captured request (.http: start line, headers, blank line, body) for `source test`. */
export function parseHttpCapture(text: string): {
  method: string;
  url: string;
  headers: [string, string][];
  body: Uint8Array;
} {
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

/**
 * What a capture must get: `# expect: 202 queued`, `# expect-key: ...`, `# expect-event-type: ...`,
 * `# expect-version: ...` (the version the event is stored with, as a number: epoch seconds for a time).
 */
export interface Expectation {
  status: number;
  /** The {"status": word} of the answer (queued, ignored, quarantined, duplicate), if any. */
  word?: string;
  key?: string;
  eventType?: string;
  version?: number;
}

export interface Capture {
  /** Its path inside the bobbin (captures/accepted.http). */
  file: string;
  request: CapturedRequest;
  expect: Expectation;
  /** `# settings: { ... }`: the instance settings it was made for, in place of the kit's. */
  settings?: Record<string, unknown>;
}

/** `# expect-version: <number>`, read as the number it says. */
function versionOf(file: string, text: string | undefined): { version?: number } {
  if (text === undefined) return {};
  const version = Number(text);
  if (text === "" || !Number.isFinite(version)) throw new Error(`${file}: "# expect-version: ${text}" is not a number`);
  return { version };
}

/** Read a capture and the comment lines that say what it must get. */
export function parseCapture(file: string, text: string): Capture {
  const comments = text
    .replace(/\r\n/g, "\n")
    .split("\n")
    .filter((l) => l.startsWith("#"))
    .map((l) => l.slice(1).trim());
  const value = (name: string) =>
    comments
      .find((c) => c.startsWith(`${name}:`))
      ?.slice(name.length + 1)
      .trim();
  const expect = value("expect");
  if (expect === undefined) throw new Error(`${file}: no "# expect: <status> [word]" line`);
  const m = /^(\d{3})(?:\s+([a-z_]+))?$/.exec(expect);
  if (!m) throw new Error(`${file}: "# expect: ${expect}" is not <status> [word]`);
  let settings: Record<string, unknown> | undefined;
  const s = value("settings");
  if (s !== undefined) {
    try {
      settings = parseToml(`s = ${s}`).s as Record<string, unknown>;
    } catch (e) {
      throw new Error(`${file}: "# settings:" is not an inline TOML table (${(e as Error).message.split("\n")[0]})`);
    }
  }
  return {
    file,
    request: parseHttpCapture(text),
    expect: {
      status: Number(m[1]),
      word: m[2],
      key: value("expect-key"),
      eventType: value("expect-event-type"),
      ...versionOf(file, value("expect-version")),
    },
    ...(settings ? { settings } : {}),
  };
}

/** captures/kit.toml: the example instance and the test values its captures are signed with. */
export interface Kit {
  /** The Unix time the captures' timestamps are valid at, when the scheme has timestamps. */
  now?: number;
  instance: { name: string; settings: Record<string, unknown> };
  secrets: Record<string, string>;
  /** What the kit cannot read from a code source: its scheme carries a timestamp (default false)... */
  timestamped?: boolean;
  /** ...and its signature covers the body (default true; false for a token). */
  body_signed?: boolean;
  /** The answers a processor's HTTP gets in the kit ([[http]]: method, url, status, body, headers). */
  http: { method?: string; url: string; status?: number; body?: string; headers?: Record<string, string> }[];
}

export function parseKit(text: string): Kit {
  const doc = parseToml(text) as Record<string, unknown>;
  const instance = (doc.instance ?? {}) as Record<string, unknown>;
  if (typeof instance.name !== "string")
    throw new Error("captures/kit.toml: [instance] needs name, the captures' /hooks/<name>");
  const secrets = (doc.secrets ?? {}) as Record<string, unknown>;
  for (const [k, v] of Object.entries(secrets))
    if (typeof v !== "string") throw new Error(`captures/kit.toml: secrets.${k} is not a string`);
  if (doc.now !== undefined && typeof doc.now !== "number")
    throw new Error("captures/kit.toml: now is not a Unix time");
  for (const k of ["timestamped", "body_signed"])
    if (doc[k] !== undefined && typeof doc[k] !== "boolean")
      throw new Error(`captures/kit.toml: ${k} is not true or false`);
  for (const k of Object.keys(doc))
    if (!["now", "instance", "secrets", "timestamped", "body_signed", "http"].includes(k))
      throw new Error(`captures/kit.toml: unknown key ${k}`);
  const http = (doc.http ?? []) as Kit["http"];
  if (!Array.isArray(http) || !http.every((h) => typeof h === "object" && h !== null && typeof h.url === "string"))
    throw new Error("captures/kit.toml: each [[http]] needs a url");
  return {
    ...(typeof doc.now === "number" ? { now: doc.now } : {}),
    ...(typeof doc.timestamped === "boolean" ? { timestamped: doc.timestamped } : {}),
    ...(typeof doc.body_signed === "boolean" ? { body_signed: doc.body_signed } : {}),
    instance: { name: instance.name, settings: (instance.settings ?? {}) as Record<string, unknown> },
    secrets: secrets as Record<string, string>,
    http,
  };
}

/** Every capture a bobbin carries (captures/*.http, captures/schemes/*.http), by file name. */
export function capturesOf(files: ReadonlyMap<string, string>): Capture[] {
  return [...files.entries()]
    .filter(([f]) => f.startsWith("captures/") && f.endsWith(".http"))
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([f, text]) => parseCapture(f, text));
}

/**
 * A poll bobbin's capture, captures/poll-<name>.json: what one tick should find. `http` are the
 * answers the poller's requests get (a status of 304 is "not modified"), `now` the tick's time,
 * and `items`, when given, what the poller must return.
 */
export interface PollCapture {
  file: string;
  description: string;
  now?: number;
  items?: Record<string, unknown>[];
  http: Kit["http"];
}

export function parsePollCapture(file: string, text: string): PollCapture {
  let doc: Record<string, unknown>;
  try {
    doc = JSON.parse(text) as Record<string, unknown>;
  } catch {
    throw new Error(`${file}: not JSON`);
  }
  if (doc === null || typeof doc !== "object" || Array.isArray(doc)) throw new Error(`${file}: not a JSON object`);
  for (const k of Object.keys(doc))
    if (!["description", "now", "items", "http"].includes(k)) throw new Error(`${file}: unknown key ${k}`);
  if (typeof doc.description !== "string" || doc.description === "") throw new Error(`${file}: needs a description`);
  if (doc.now !== undefined && typeof doc.now !== "number") throw new Error(`${file}: now is not a Unix time`);
  if (
    doc.items !== undefined &&
    (!Array.isArray(doc.items) ||
      !doc.items.every(
        (i) => typeof i === "object" && i !== null && typeof (i as { event_type?: unknown }).event_type === "string",
      ))
  ) {
    throw new Error(`${file}: items is a list of {"event_type": ..., ...}`);
  }
  const http = (doc.http ?? []) as Kit["http"];
  if (!Array.isArray(http) || !http.every((h) => typeof h === "object" && h !== null && typeof h.url === "string"))
    throw new Error(`${file}: each http answer needs a url`);
  return {
    file,
    description: doc.description,
    ...(typeof doc.now === "number" ? { now: doc.now } : {}),
    ...(doc.items ? { items: doc.items as Record<string, unknown>[] } : {}),
    http,
  };
}

/** Every poll capture a bobbin carries (captures/poll-*.json), by file name. */
export function pollCapturesOf(files: ReadonlyMap<string, string>): PollCapture[] {
  return [...files.entries()]
    .filter(([f]) => /^captures\/poll-[^/]+\.json$/.test(f))
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([f, text]) => parsePollCapture(f, text));
}
