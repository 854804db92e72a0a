// `--where`: conditions on an event's stored payload, as list, export, replay --dead, route test
// and the dashboard's batch list take them, parsed and checked here once; each dialect compiles
// them to SQL over the payload column with every value bound (sqlite/where.ts, pg/where.ts). A
// batch matches when one of its events matches every condition. The payload indexes a bobbin
// declares (`indexed`) are named here, so both dialects name them alike and drop what no
// bobbin declares any more.
//
// What a condition means, on both backends:
// - `path = v`: the value there is the string v, or a number equal to v when v reads as a JSON
//   number (42 matches 42, 42.0 and "42"; 42.0 the numbers and the string "42.0"), or the
//   boolean when v is true or false (and the string "true"). A "quoted" value is a string
//   only: "42" matches the string "42" alone. An object, an array or null never equals
//   anything.
// - `path in (a, b)`: = one of them. `path != v`: the path holds a string, number or boolean,
//   and it is not = v (an event without the path does not match).
// - `path ~ s`: the path holds a string that contains s, case-sensitively (no wildcards).
// - `path exists`: the path holds a value other than null.
// A payload the database cannot read as JSON matches no condition (SQLite's reader stops at
// 1000 levels of nesting; PostgreSQL's jsonb refuses a \u0000 escape and a lone surrogate).
import { createHash } from "node:crypto";
import { HookspoolError } from "../errors.ts";
import { payloadPathProblem } from "../plugin/get-path.ts";

export const WHERE_OPS = ["=", "!=", "in", "~", "exists"] as const;
export type WhereOp = (typeof WHERE_OPS)[number];

/** One checked condition: the path, its keys, the operator and its values (none for exists). */
export interface PayloadCondition {
  path: string;
  keys: string[];
  op: WhereOp;
  values: Candidate[];
}

/** A value as given, and what it may equal: the string always; a number or a boolean when bare and it reads as one. */
export interface Candidate {
  text: string;
  /** The value as a JSON number's text (finite as a double), or null. */
  number: string | null;
  boolean: boolean | null;
}

const JSON_NUMBER = /^-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?$/;

/** A value's candidate: a quoted one is a string only. */
export function candidateOf(text: string, quoted = false): Candidate {
  if (quoted) return { text, number: null, boolean: null };
  return {
    text,
    number: JSON_NUMBER.test(text) && Number.isFinite(Number(text)) ? text : null,
    boolean: text === "true" ? true : text === "false" ? false : null,
  };
}

/** How many conditions a filter takes, values an `in` list, and characters a value. */
export const WHERE_LIMITS = { conditions: 16, values: 100, chars: 1024 } as const;

/** The grammar in one line, for --help, a refusal's hint and the dashboard's form. */
export const WHERE_GRAMMAR =
  'PATH = V, PATH != V, PATH in (A, B), PATH ~ TEXT, PATH exists; "quote" a value to keep spaces';

/** A value: "quoted" (\" and \\ inside) or bare (the rest, its spaces at either end trimmed). */
function valueIn(text: string, at: string): Candidate {
  const t = text.trim();
  if (t === "") throw usage(at, "a value after the operator");
  if (!t.startsWith('"')) return candidateOf(t);
  const q = quoted(t, 0, at);
  if (t.slice(q.end).trim() !== "") throw usage(at, "nothing may follow a quoted value");
  return candidateOf(q.value, true);
}

/** The quoted string starting at text[from] (a double quote): its value and the index after it. */
function quoted(text: string, from: number, at: string): { value: string; end: number } {
  let value = "";
  for (let i = from + 1; i < text.length; i++) {
    const c = text[i];
    if (c === "\\") {
      const next = text[i + 1];
      if (next !== '"' && next !== "\\") throw usage(at, 'inside quotes a backslash comes before " or \\ only');
      value += next;
      i++;
    } else if (c === '"') return { value, end: i + 1 };
    else value += c;
  }
  throw usage(at, "a quoted value is never closed");
}

/** `(a, "b, c", d)`: the list's values, each bare (no , ( ) or ") or quoted. */
function listOf(text: string, at: string): Candidate[] {
  const t = text.trim();
  if (!t.startsWith("(") || !t.endsWith(")")) throw usage(at, "in takes a list in parentheses: in (a, b)");
  const inner = t.slice(1, -1);
  const out: Candidate[] = [];
  let i = 0;
  for (;;) {
    while (inner[i] === " " || inner[i] === "\t") i++;
    let item: Candidate;
    if (inner[i] === '"') {
      const q = quoted(inner, i, at);
      item = candidateOf(q.value, true);
      i = q.end;
      while (inner[i] === " " || inner[i] === "\t") i++;
    } else {
      const next = inner.slice(i).search(/[,()"]/);
      const stop = next === -1 ? inner.length : i + next;
      if (stop < inner.length && inner[stop] !== ",") throw usage(at, 'a value with , ( ) or " in a list is "quoted"');
      const bare = inner.slice(i, stop).trim();
      if (bare === "") throw usage(at, 'an empty value in the list (quote it: "")');
      item = candidateOf(bare);
      i = stop;
    }
    out.push(item);
    if (i >= inner.length) break;
    if (inner[i] !== ",") throw usage(at, "values in a list are separated by commas");
    i++;
  }
  if (out.length > WHERE_LIMITS.values) throw usage(at, `a list holds at most ${WHERE_LIMITS.values} values`);
  return out;
}

function usage(at: string, what: string): HookspoolError {
  return new HookspoolError("E_USAGE", `${at}: ${what}`, { hint: WHERE_GRAMMAR });
}

/**
 * One condition as given (`pull_request.number = 42`), checked. A refusal is one line naming
 * the condition by its place and, once it is a path, its path; never its values, which may be
 * a person's data.
 */
export function parseWhere(text: string, at = "--where"): PayloadCondition {
  const m = /^\s*([^\s=!~()]+)\s*(.*)$/s.exec(text);
  if (!m) throw usage(at, "a condition starts with a payload path");
  const [, path, rest] = m;
  const problem = payloadPathProblem(path);
  if (problem) throw usage(at, problem);
  const where = `${at} (${path})`;
  const keys = path.split(".");
  let op: WhereOp;
  let values: Candidate[];
  if (rest.startsWith("==")) throw usage(where, "equality is a single =");
  if (rest.startsWith("!=")) [op, values] = ["!=", [valueIn(rest.slice(2), where)]];
  else if (rest.startsWith("=")) [op, values] = ["=", [valueIn(rest.slice(1), where)]];
  else if (rest.startsWith("~")) [op, values] = ["~", [valueIn(rest.slice(1), where)]];
  else if (/^in\b/i.test(rest)) [op, values] = ["in", listOf(rest.slice(2), where)];
  else if (/^exists\s*$/i.test(rest)) [op, values] = ["exists", []];
  else throw usage(where, "after the path: =, !=, ~, in (...) or exists");
  if (values.some((v) => v.text.length > WHERE_LIMITS.chars))
    throw usage(where, `a value is at most ${WHERE_LIMITS.chars} characters`);
  return { path, keys, op, values };
}

/** Every condition of a filter (`at` 1, 2, ... names each), at most WHERE_LIMITS.conditions. */
export function parseWheres(texts: readonly string[], at = "--where"): PayloadCondition[] {
  if (texts.length > WHERE_LIMITS.conditions)
    throw new HookspoolError("E_USAGE", `${at}: at most ${WHERE_LIMITS.conditions} conditions`);
  return texts.map((t, i) => parseWhere(t, texts.length > 1 ? `${at} ${i + 1}` : at));
}

/**
 * The SQL a dialect gives for conditions: over one events row's payload column (route test
 * reads events), and as a term of a batches query (a batch with an event matching them all).
 * Values go into `params` under names only this module's `param` makes.
 */
export interface PayloadSql {
  event(conds: readonly PayloadCondition[], column: string, params: Record<string, string | number>): string;
  batches(conds: readonly PayloadCondition[], params: Record<string, string | number>): string;
}

/** A fresh parameter name for `params` (letters only: PostgreSQL's numbering reads [a-z_]+). */
export function param(params: Record<string, string | number>, value: string | number): string {
  let n = Object.keys(params).length;
  let name: string;
  do {
    let s = "";
    let k = n++;
    do {
      s = String.fromCharCode(97 + (k % 26)) + s;
      k = Math.floor(k / 26) - 1;
    } while (k >= 0);
    name = `where_${s}`;
  } while (Object.hasOwn(params, name));
  params[name] = value;
  return `$${name}`;
}

/** The prefix of every payload index's name: an index of events named so is this module's to drop. */
export const INDEX_PREFIX = "events_where_";

/**
 * A payload index's name, from its path and the dialect's expression version: readable, unique
 * by a hash (a-b and a_b read alike), and changed when the expression does, so a migrate that
 * finds the old one drops it and builds the new. At most 63 characters (PostgreSQL's limit).
 */
export function indexName(path: string, version: number): string {
  const hash = createHash("sha256").update(`${version}\n${path}`).digest("hex").slice(0, 10);
  const slug = path.replace(/[^A-Za-z0-9_]/g, "_").slice(0, 63 - INDEX_PREFIX.length - hash.length - 1);
  return `${INDEX_PREFIX}${slug}_${hash}`;
}

/** What a migrate does to the payload indexes: those it built (by path) and dropped (by name). */
export interface IndexChanges {
  created: { path: string; name: string }[];
  dropped: string[];
  /** PostgreSQL: another process was changing them; this one left them as they are. */
  busy?: boolean;
}

/** The indexes to build and drop, from the paths wanted and the payload indexes there. */
export function indexPlan(
  paths: readonly string[],
  existing: readonly string[],
  version: number,
): { create: { path: string; name: string }[]; drop: string[] } {
  const wanted = new Map([...new Set(paths)].sort().map((p) => [indexName(p, version), p]));
  return {
    create: [...wanted].filter(([name]) => !existing.includes(name)).map(([name, path]) => ({ path, name })),
    drop: existing.filter((name) => name.startsWith(INDEX_PREFIX) && !wanted.has(name)).sort(),
  };
}
