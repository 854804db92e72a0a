// Only the fields a route needs: a route's (or a bobbin output's) `expose` list, checked, and the
// payload it lets through. The list is fixed when the event is routed (its trace keeps it, with
// the names of what it dropped), and the delivered document applies each event's own, so a
// reload never widens what an event's route narrowed. The spool keeps the whole payload.
import type { Config } from "./types.ts";

/** The marking that delivers a value as text inside {"untrusted": ...}, for a template to fence. */
export const UNTRUSTED = ":untrusted";
/** An expose list's bounds: entries, characters per entry, keys per path. */
export const EXPOSE_LIMITS = { paths: 200, chars: 256, depth: 32 } as const;
/** The trace names at most this many dropped paths, each cut to `nameChars` characters. */
export const DROPPED_LIMITS = { names: 50, nameChars: 100 } as const;
/** The dropped name of a payload that is not a JSON object: all of it. */
export const WHOLE_PAYLOAD = "$";

/** What an event's trace keeps of its route's expose: the rule, and names only, never values. */
export interface ExposeTrace {
  /** The list as the route gave it when the event was routed. */
  paths: string[];
  /** The shallowest paths the payload had and the rule left out, at most DROPPED_LIMITS.names. */
  dropped?: string[];
  /** How many more were dropped than `dropped` names. */
  dropped_more?: number;
  /** Listed paths the payload did not have. */
  missing?: string[];
}

/** One entry's path: its keys and whether it is delivered as text. */
function entryOf(entry: string): { keys: string[]; untrusted: boolean; path: string } {
  const untrusted = entry.endsWith(UNTRUSTED);
  const path = untrusted ? entry.slice(0, -UNTRUSTED.length) : entry;
  return { keys: path.split("."), untrusted, path };
}

/** Why one entry is refused, or null: keys joined by dots, then at most the :untrusted marking. */
function entryProblem(entry: unknown): string | null {
  if (typeof entry !== "string") return "expected a string";
  if (entry === "") return "an empty path";
  if (entry.length > EXPOSE_LIMITS.chars) return `a path is at most ${EXPOSE_LIMITS.chars} characters`;
  if (/[\u0000-\u001f\u007f]/.test(entry)) return "a path may not hold a control character";
  const { keys, path } = entryOf(entry);
  if (path.includes(":")) return `"${entry}": the only marking a path may end with is ${UNTRUSTED}`;
  if (keys.some((k) => k === "")) return `"${entry}": keys joined by single dots, none empty`;
  if (keys.length > EXPOSE_LIMITS.depth) return `"${entry}": at most ${EXPOSE_LIMITS.depth} keys deep`;
  return null;
}

/** An expose list's problems: each with the entry it is about (null: the list itself). */
export function exposeProblems(list: unknown): { at: number | null; message: string; hint?: string }[] {
  if (!Array.isArray(list)) return [{ at: null, message: "expected an array of paths" }];
  if (list.length === 0)
    return [
      {
        at: null,
        message: "an empty expose list would deliver {} for every event",
        hint: "remove expose to deliver whole payloads",
      },
    ];
  if (list.length > EXPOSE_LIMITS.paths) return [{ at: null, message: `at most ${EXPOSE_LIMITS.paths} paths` }];
  const out: { at: number; message: string; hint?: string }[] = [];
  const seen = new Map<string, boolean>();
  list.forEach((entry, at) => {
    const why = entryProblem(entry);
    if (why)
      return out.push({
        at,
        message: why,
        hint: 'keys joined by dots, e.g. "pull_request.title", optionally ending in :untrusted',
      });
    const { path, untrusted } = entryOf(entry as string);
    if (seen.has(path)) return out.push({ at, message: `"${path}" is listed twice` });
    seen.set(path, untrusted);
  });
  // Under a listed path only an :untrusted one means something (whole, with that value as text);
  // nothing may be listed under an :untrusted path, which is delivered as text already.
  for (const [path, untrusted] of seen) {
    const keys = path.split(".");
    for (let n = 1; n < keys.length; n++) {
      const above = keys.slice(0, n).join(".");
      if (!seen.has(above)) continue;
      const at = list.findIndex((e) => typeof e === "string" && entryOf(e).path === path);
      if (seen.get(above))
        out.push({ at, message: `"${path}" is under "${above}${UNTRUSTED}", which is delivered as text` });
      else if (!untrusted) out.push({ at, message: `"${path}" is under "${above}", which is exposed whole` });
      break;
    }
  }
  return out.sort((a, b) => a.at - b.at);
}

/** The expose a bobbin instance gives one of its outputs (the key of its outputs table), if any. */
export function outputExpose(config: Config, instance: string, output: string): string[] | undefined {
  const table = Object.hasOwn(config.bobbins, instance) ? config.bobbins[instance].expose : undefined;
  if (!table) return undefined;
  return Object.hasOwn(table, output) ? table[output] : Object.hasOwn(table, "*") ? table["*"] : undefined;
}

/** The expose rule a stored trace holds; null when its route had none. Unreadable: expose nothing. */
export function tracedExpose(trace: unknown): string[] | null {
  let t = trace;
  if (typeof t === "string") {
    try {
      t = JSON.parse(t);
    } catch {
      // A trace is written by hookspool; one that does not read is never taken as "everything".
      return [];
    }
  }
  if (typeof t !== "object" || t === null) return null;
  const e = (t as { expose?: unknown }).expose;
  if (e === undefined) return null;
  const paths = (e as { paths?: unknown } | null)?.paths;
  return Array.isArray(paths) ? paths.filter((p): p is string => typeof p === "string") : [];
}

interface Node {
  /** The path as listed (without its marking), when this node was listed itself. */
  listed: string | null;
  untrusted: boolean;
  children: Map<string, Node>;
}

const node = (): Node => ({ listed: null, untrusted: false, children: new Map() });

/** An expose list made into the tree the projection walks. */
export interface ExposeRule {
  root: Node;
  listed: string[];
}

export function compileExpose(paths: readonly string[]): ExposeRule {
  const root = node();
  const listed: string[] = [];
  for (const entry of paths) {
    const { keys, untrusted, path } = entryOf(entry);
    let n = root;
    for (const k of keys) {
      let next = n.children.get(k);
      if (!next) n.children.set(k, (next = node()));
      n = next;
    }
    if (n.listed === null) listed.push(path);
    n.listed = path;
    n.untrusted ||= untrusted;
  }
  return { root, listed };
}

/** A payload as one route delivers it: the text, and the names of what it left out. */
export interface Exposed {
  text: string;
  dropped: string[];
  droppedMore: number;
  missing: string[];
}

const SPACE = new Set([0x20, 0x09, 0x0a, 0x0d]);

/**
 * `payload` (JSON text, as stored) with only the rule's paths. Each kept value is the stored text
 * of it, byte for byte (no number is re-encoded), in the payload's own key order; an object the
 * rule walks through is written without the whitespace between its members. A path through an
 * array or a scalar names nothing: it is missing. A payload that is not a JSON object delivers {}.
 */
export function exposePayload(payload: string, rule: ExposeRule): Exposed {
  const s = payload;
  let i = 0;
  const dropped: string[] = [];
  let droppedMore = 0;
  const found = new Set<string>();

  const fail = (): never => {
    throw new SyntaxError("not JSON");
  };
  const ws = () => {
    while (SPACE.has(s.charCodeAt(i))) i++;
  };
  const skipString = () => {
    i++;
    for (;;) {
      const c = s.charCodeAt(i);
      if (c === 0x22) return void i++;
      if (Number.isNaN(c)) fail();
      i += c === 0x5c ? 2 : 1;
    }
  };
  // A value skipped whole: brackets counted outside strings, so a deep payload costs no stack.
  const skipValue = () => {
    const c = s.charCodeAt(i);
    if (c === 0x22) return skipString();
    if (c === 0x7b || c === 0x5b) {
      let depth = 0;
      do {
        const d = s.charCodeAt(i);
        if (Number.isNaN(d)) fail();
        if (d === 0x22) skipString();
        else {
          if (d === 0x7b || d === 0x5b) depth++;
          else if (d === 0x7d || d === 0x5d) depth--;
          i++;
        }
      } while (depth > 0);
      return;
    }
    const start = i;
    while (i < s.length && !SPACE.has(s.charCodeAt(i)) && !",]}".includes(s[i])) i++;
    if (i === start) fail();
  };
  const drop = (path: string) => {
    if (dropped.length < DROPPED_LIMITS.names)
      dropped.push(path.length > DROPPED_LIMITS.nameChars ? `${path.slice(0, DROPPED_LIMITS.nameChars - 3)}...` : path);
    else droppedMore++;
  };
  const rawValue = () => {
    const start = i;
    skipValue();
    return s.slice(start, i);
  };
  // The value of a member the rule names, or null to leave the member out.
  const memberValue = (n: Node, path: string): string | null => {
    if (n.untrusted) {
      const raw = rawValue();
      found.add(n.listed as string);
      // A string is the text as it is; anything else its JSON text as stored.
      return `{"untrusted":${raw.charCodeAt(0) === 0x22 ? raw : JSON.stringify(raw)}}`;
    }
    if (n.children.size > 0 && s.charCodeAt(i) === 0x7b) return object(n, path);
    if (n.listed !== null) {
      found.add(n.listed);
      return rawValue();
    }
    // A path through a value that is no object: the value goes, its listed paths are missing.
    skipValue();
    drop(path);
    return null;
  };
  const object = (n: Node, prefix: string): string => {
    if (n.listed !== null) found.add(n.listed);
    const whole = n.listed !== null;
    const parts: string[] = [];
    i++;
    ws();
    if (s.charCodeAt(i) === 0x7d) {
      i++;
      return "{}";
    }
    for (;;) {
      if (s.charCodeAt(i) !== 0x22) fail();
      const keyStart = i;
      skipString();
      const keyText = s.slice(keyStart, i);
      const key = JSON.parse(keyText) as string;
      ws();
      if (s.charCodeAt(i) !== 0x3a) fail();
      i++;
      ws();
      const path = prefix === "" ? key : `${prefix}.${key}`;
      const child = n.children.get(key);
      if (child) {
        const v = memberValue(child, path);
        if (v !== null) parts.push(`${keyText}:${v}`);
      } else if (whole) parts.push(`${keyText}:${rawValue()}`);
      else {
        skipValue();
        drop(path);
      }
      ws();
      const c = s.charCodeAt(i++);
      if (c === 0x7d) break;
      if (c !== 0x2c) fail();
      ws();
    }
    return `{${parts.join(",")}}`;
  };

  let text: string;
  try {
    // A stored body may start with a byte-order mark, which JSON cannot carry.
    if (s.charCodeAt(0) === 0xfeff) i = 1;
    ws();
    if (s.charCodeAt(i) !== 0x7b) fail();
    text = object(rule.root, "");
    ws();
    if (i !== s.length) fail();
  } catch {
    found.clear();
    dropped.length = 0;
    droppedMore = 0;
    dropped.push(WHOLE_PAYLOAD);
    text = "{}";
  }
  return { text, dropped, droppedMore, missing: rule.listed.filter((p) => !found.has(p)) };
}

/** What the trace keeps of one event's exposure: the rule, the names of what it dropped and missed. */
export function exposeTrace(paths: readonly string[], e: Exposed): ExposeTrace {
  const t: ExposeTrace = { paths: [...paths] };
  if (e.dropped.length) t.dropped = e.dropped;
  if (e.droppedMore) t.dropped_more = e.droppedMore;
  if (e.missing.length) t.missing = e.missing.slice(0, DROPPED_LIMITS.names);
  return t;
}

/** "expose 3 path(s), dropped repository sender +4 more": a stored trace's expose, names only. */
export function exposeSummary(e: unknown, shown = 5): string {
  if (typeof e !== "object" || e === null) return "";
  const x = e as { paths?: unknown; dropped?: unknown; dropped_more?: unknown };
  const paths = Array.isArray(x.paths) ? x.paths.length : 0;
  const dropped = Array.isArray(x.dropped) ? x.dropped.map(String) : [];
  const more =
    dropped.length - Math.min(dropped.length, shown) + (typeof x.dropped_more === "number" ? x.dropped_more : 0);
  if (!dropped.length) return `expose ${paths} path(s)`;
  return `expose ${paths} path(s), dropped ${dropped.slice(0, shown).join(" ")}${more > 0 ? ` +${more} more` : ""}`;
}
