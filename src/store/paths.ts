// What a payload holds at the paths the payload indexes cover, read by the writing process from
// the payload's text, so PostgreSQL's index need not parse the payload again: jsonb's parse of a 6 KB
// GitHub push costs the server about 110 µs, most of what an enqueued event costs it with one
// payload index. The server reads a path from these values only when they are there
// (pg/where.ts); so a value given must be exactly what jsonb reads from the payload text at that
// path, and where that is not certain, none is given and the server parses the payload as it
// always did. SQLite's index reads its path from the payload in a few microseconds and never
// uses these.
/** Nesting deeper than this leaves the reading to the server (jsonb refuses nesting past its stack). */
const MAX_DEPTH = 64;
/** A number token longer than this, or with an exponent beyond ±this, likewise (far inside what numeric takes). */
const MAX_NUMBER = 300;

/** A \u0000 escape, or one of a surrogate (\ud800 to \udfff), in any case. */
const REFUSED_ESCAPE = /\\u(?:0000|[dD][89a-fA-F])/;

/**
 * Whether jsonb certainly reads `text` (valid JSON, as JSON.parse took it) as JSON.parse does:
 * no byte-order mark (the server skips one, JSON.parse refuses it), no \u0000 escape (jsonb
 * refuses it), no surrogate escape (jsonb refuses a lone one; a pair is left to it too), nesting
 * no deeper than MAX_DEPTH, and no number long or far enough for numeric to refuse. The
 * escapes by one search of the whole text (a \\u0000, an escaped backslash before "u0000", is
 * taken for one: a doubt leaves the text to the server); the nesting and the numbers by one pass
 * outside the strings, each string skipped to its closing quote by a search.
 */
export function jsonbReadsAlike(text: string): boolean {
  if (text.charCodeAt(0) === 0xfeff || !text.isWellFormed() || REFUSED_ESCAPE.test(text)) return false;
  let depth = 0;
  let i = 0;
  const n = text.length;
  while (i < n) {
    const c = text.charCodeAt(i);
    if (c === 0x22) i = stringEnd(text, i + 1);
    else if (c === 0x7b || c === 0x5b) {
      if (++depth > MAX_DEPTH) return false;
      i++;
    } else if (c === 0x7d || c === 0x5d) {
      depth--;
      i++;
    } else if (c === 0x2d || (c >= 0x30 && c <= 0x39)) {
      // A number: its length and its exponent.
      const start = i;
      let e = -1;
      while (i < n) {
        const d = text.charCodeAt(i);
        if (d === 0x65 || d === 0x45) e = i;
        else if (!(d === 0x2d || d === 0x2b || d === 0x2e || (d >= 0x30 && d <= 0x39))) break;
        i++;
      }
      if (i - start > MAX_NUMBER) return false;
      if (e >= 0 && Math.abs(Number(text.slice(e + 1, i))) > MAX_NUMBER) return false;
    } else i++;
  }
  return true;
}

/** The index after the closing quote of the string whose text starts at `i` (after its opening quote). */
function stringEnd(text: string, i: number): number {
  for (;;) {
    const quote = text.indexOf('"', i);
    if (quote === -1) return text.length;
    // The quote closes the string unless an odd run of backslashes escapes it.
    let slashes = 0;
    while (text.charCodeAt(quote - 1 - slashes) === 0x5c) slashes++;
    if (slashes % 2 === 0) return quote + 1;
    i = quote + 1;
  }
}

/**
 * The values at `paths` of `value` (what JSON.parse gave for `text`), as a JSON object of each
 * path's value in a one-element array, [] for a path that is missing: only a string, a boolean
 * or null reached through objects alone, which jsonb holds exactly as JSON.parse does. A path
 * that ends at a number (numeric's precision is not a double's), an object or an array, or
 * crosses an array, is left out, for the server to read. Null when none is given, or when
 * jsonb might read the text otherwise (jsonbReadsAlike): then the server reads every path.
 */
export function pathValues(text: string, value: unknown, paths: readonly string[]): string | null {
  if (paths.length === 0 || !jsonbReadsAlike(text)) return null;
  // No prototype: a path named __proto__ is a key like any other.
  const out: Record<string, unknown[]> = Object.create(null);
  let given = 0;
  for (const path of paths) {
    const read = objectPath(value, path);
    if (read === "unsure") continue;
    out[path] = read;
    given++;
  }
  return given === 0 ? null : JSON.stringify(out);
}

/** The value at `path` as [value] or [] (missing), or "unsure" where jsonb's reading may differ. */
function objectPath(value: unknown, path: string): unknown[] | "unsure" {
  let cur: unknown = value;
  for (const key of path.split(".")) {
    if (cur === null || typeof cur !== "object") return [];
    if (Array.isArray(cur)) return "unsure";
    if (!Object.hasOwn(cur, key)) return [];
    cur = (cur as Record<string, unknown>)[key];
  }
  if (cur === null || typeof cur === "string" || typeof cur === "boolean") return [cur];
  return "unsure";
}

/** The same, parsing `text` first; null when it is not JSON (the server then reads it as it can). */
export function pathValuesOf(text: string, paths: readonly string[]): string | null {
  if (paths.length === 0) return null;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return null;
  }
  return pathValues(text, value, paths);
}
