// Mail rules: how a mail bobbin recognises a message by its sender and subject, turns it into an
// output event type and pulls named values out of it. A bobbin ships its rules as rule packs
// (`rule-packs/<name>.toml`) and reads the files itself; everything here is pure: parseRulePack
// checks a pack's text and reports every problem with the key it is at, classify picks the rule
// a message matches. Patterns come from files anyone may edit, so each is held to limits that
// keep a hostile or careless one from stalling the poller.
import { parse as parseToml } from "smol-toml";

/** The parts of a message a rule may look at: header fields only, and the snippet when a rule needs it. */
export interface MailMessage {
  from: string; // the From header as sent, e.g. "Dentist Office <noreply@dentist.example>"
  subject: string;
  listId?: string; // the List-Id header, if any
  headers?: Record<string, string>; // other headers by lower-case name
  snippet?: string; // a short text preview; only present when a rule needs it
}

export interface MailRule {
  /** Unique in a pack: [a-z][a-z0-9_-]{0,63}. */
  name: string;
  // What the message must match: from, subject, subject_re, list_id, header; every given one must hold (AND).
  /**
   * Address or domain patterns: "noreply@dentist.example", "@dentist.example", "*.bank.example" (any subdomain); any
   * one matches.
   */
  from?: string[];
  /** Case-insensitive substrings of the subject; any one matches. */
  subject?: string[];
  /** A regular expression (JS syntax, always case-insensitive), matched against the subject. */
  subject_re?: string;
  /** Exact List-Id values (case-insensitive, angle brackets ignored); any one matches. */
  list_id?: string[];
  /** Lower-case header name -> exact value (case-insensitive); all must hold. */
  header?: Record<string, string>;
  /** The output event type a match becomes. */
  output: string;
  /**
   * Named values to pull out: name -> a regular expression with exactly one capture group, applied to `from` (the
   * subject by default).
   */
  extract?: Record<string, { from?: "subject" | "snippet"; re: string }>;
  /** Higher runs first; default 0. Ties: file order. */
  priority?: number;
}

export const PACK_STATUSES = ["active", "draft", "retired"] as const;
export interface RulePack {
  name: string;
  status: (typeof PACK_STATUSES)[number];
  rules: MailRule[];
}
/** A problem with a pack, at its key path ("" for the file as a whole). */
export interface RuleProblem {
  key: string;
  message: string;
}

export const RULE_NAME = /^[a-z][a-z0-9_-]{0,63}$/;
const EVENT_TYPE_TOKEN = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$/;
const MAX_RULES = 500;
const MAX_PATTERN = 200;
/** Subject and snippet are cut to this before any pattern runs, so no pattern sees more. */
const MAX_TEXT = 1000;
const MAX_VALUE = 200;

const RULE_KEYS = ["name", "from", "subject", "subject_re", "list_id", "header", "output", "extract", "priority"];
const CONDITIONS = ["from", "subject", "subject_re", "list_id", "header"];
const DOMAIN = /^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$/;
const ADDRESS = /^[^\s@<>",;]+@[^\s@<>",;]+$/;

type Table = Record<string, unknown>;
const isTable = (v: unknown): v is Table =>
  typeof v === "object" && v !== null && !Array.isArray(v) && !(v instanceof Date);
const tomlKey = (k: string) => (/^[A-Za-z0-9_-]+$/.test(k) ? k : JSON.stringify(k));

/** The address inside a From header ("A <a@b.example>" -> "a@b.example"), lower-cased; "" when there is none. */
export function addressOf(from: string): string {
  // Quoted names and comments may hold anything, "<" and "@" included.
  const bare = from.replace(/"(?:[^"\\]|\\.)*"/g, " ").replace(/\([^()]*\)/g, " ");
  const bracketed = /<([^<>]*)>/.exec(bare);
  const candidates = bracketed ? [bracketed[1].trim()] : bare.split(/[\s,;]+/);
  return candidates.find((c) => ADDRESS.test(c))?.toLowerCase() ?? "";
}

/** What a From pattern is, or null when it is none of the three forms. */
function fromPattern(p: string): { kind: "address" | "domain" | "suffix"; value: string } | null {
  const v = p.trim().toLowerCase();
  if (v.startsWith("*.")) return DOMAIN.test(v.slice(2)) ? { kind: "suffix", value: v.slice(2) } : null;
  if (v.startsWith("@")) return DOMAIN.test(v.slice(1)) ? { kind: "domain", value: v.slice(1) } : null;
  return ADDRESS.test(v) && DOMAIN.test(v.slice(v.lastIndexOf("@") + 1)) ? { kind: "address", value: v } : null;
}

/** A quantifier at `i` ("*", "+", "?", "{n}", "{n,}", "{n,m}"): its length and most repeats; null when none. */
function quantifierAt(re: string, i: number): { len: number; max: number } | null {
  const c = re[i];
  if (c === "*" || c === "+") return { len: 1, max: Infinity };
  if (c === "?") return { len: 1, max: 1 };
  const m = /^\{(\d+)(,(\d*))?\}/.exec(re.slice(i));
  if (!m) return null;
  return { len: m[0].length, max: m[2] === undefined ? Number(m[1]) : m[3] === "" ? Infinity : Number(m[3]) };
}

/**
 * Whether a group that may repeat holds an unbounded quantifier: `(a+)+`, `(a*)*`, `(.+)*`,
 * `((a)+){2,}`. Those are the patterns that backtrack exponentially on a near-miss; refusing them
 * is cheap and rules out the common case without running anything.
 */
export function hasNestedQuantifier(re: string): boolean {
  const open: boolean[] = []; // per enclosing group: whether its body so far holds an unbounded quantifier
  let body = false;
  let closedUnbounded = false; // the atom just before is a group whose body holds one
  for (let i = 0; i < re.length; i++) {
    const c = re[i];
    const q = quantifierAt(re, i);
    if (c === "\\") i++;
    else if (c === "[") for (i++; i < re.length && re[i] !== "]"; i++) i += re[i] === "\\" ? 1 : 0;
    else if (c === "(") {
      open.push(body);
      body = false;
    } else if (c === ")") {
      closedUnbounded = body;
      body = (open.pop() ?? false) || body;
      continue;
    } else if (q) {
      if (closedUnbounded && q.max > 1) return true;
      if (q.max === Infinity) body = true;
      i += q.len - 1;
      if (re[i + 1] === "?") i++; // lazy
    }
    closedUnbounded = false;
  }
  return false;
}

/** What is wrong with a pattern, or null; `groups` asks for that many capture groups. */
function patternProblem(re: string, groups?: number): string | null {
  if (re.length > MAX_PATTERN) return `longer than ${MAX_PATTERN} characters`;
  if (/^\/.*\/[a-z]*$/s.test(re))
    return "write the pattern bare, without /.../ or flags: patterns always match case-insensitively";
  for (const m of re.matchAll(/(?<!\\)(?:\\\\)*\(\?([a-z-]+):/g))
    if (/[^i-]/.test(m[1])) return `has flags (?${m[1]}:...): only i may be set or cleared inside a pattern`;
  let compiled: RegExp;
  try {
    compiled = new RegExp(re, "i");
  } catch (e) {
    return `does not compile: ${(e as Error).message}`;
  }
  if (hasNestedQuantifier(re))
    return (
      "a repeated group holds an unbounded quantifier (like (a+)+), " +
      "which can take exponential time; rewrite it without the nesting"
    );
  const count = (new RegExp(`${compiled.source}|`, "i").exec("")?.length ?? 1) - 1;
  if (groups !== undefined && count !== groups) return `needs exactly ${groups} capture group, has ${count}`;
  return null;
}

/**
 * Parse and check a pack (`rule-packs/<name>.toml`): `name`, `status`, and [[rules]] tables. Returns the pack only when
 * it has no problem.
 */
export function parseRulePack(name: string, text: string): { pack: RulePack | null; problems: RuleProblem[] } {
  const problems: RuleProblem[] = [];
  const err = (key: string, message: string) => problems.push({ key, message });
  let doc: Table;
  try {
    doc = parseToml(text) as Table;
  } catch (e) {
    err("", `not valid TOML: ${(e as Error).message.split("\n")[0]}`);
    return { pack: null, problems };
  }
  for (const k of Object.keys(doc)) if (!["name", "status", "rules"].includes(k)) err(k, "unknown key");
  if (!RULE_NAME.test(name))
    err("name", `"${name}" is not a pack name (lower-case letters, digits, _ and -, starting with a letter)`);
  if (doc.name !== undefined && doc.name !== name)
    err("name", `${JSON.stringify(doc.name)} is not the name of its file ${name}.toml`);
  const status = doc.status ?? "active";
  if (!(PACK_STATUSES as readonly unknown[]).includes(status))
    err("status", `${JSON.stringify(status)} is not one of ${PACK_STATUSES.join(", ")}`);

  const list = doc.rules ?? [];
  if (!Array.isArray(list)) err("rules", "expected [[rules]] tables");
  else if (list.length === 0) err("rules", "a pack needs at least one [[rules]]");
  else if (list.length > MAX_RULES) err("rules", `${list.length} rules: at most ${MAX_RULES} in a pack`);

  const strings = (v: unknown, at: string): string[] | undefined => {
    if (!Array.isArray(v) || !v.every((x) => typeof x === "string" && x.trim() !== ""))
      err(at, "expected a list of non-empty strings");
    else if (v.length === 0) err(at, "an empty list matches nothing");
    else return v as string[];
    return undefined;
  };
  const pattern = (v: unknown, at: string, groups?: number): string | undefined => {
    const p =
      typeof v !== "string" || v === "" ? "expected a regular expression as a string" : patternProblem(v, groups);
    if (p) err(at, p);
    return p ? undefined : (v as string);
  };

  const seen = new Set<string>();
  const rules: MailRule[] = [];
  for (const [i, t] of (Array.isArray(list) ? list : []).entries()) {
    const at = `rules[${i}]`;
    if (!isTable(t)) {
      err(at, "expected a table");
      continue;
    }
    for (const k of Object.keys(t)) if (!RULE_KEYS.includes(k)) err(`${at}.${tomlKey(k)}`, "unknown key");
    const rule: MailRule = { name: typeof t.name === "string" ? t.name : "", output: "" };
    if (typeof t.name !== "string") err(`${at}.name`, "required: the rule's name");
    else if (!RULE_NAME.test(t.name))
      err(
        `${at}.name`,
        `"${t.name}" is not a rule name (lower-case letters, digits, _ and -, starting with a letter, at most 64)`,
      );
    else if (seen.has(t.name)) err(`${at}.name`, `"${t.name}" names an earlier rule too`);
    else seen.add(t.name);

    if (!CONDITIONS.some((k) => t[k] !== undefined))
      err(at, `a rule needs at least one condition: ${CONDITIONS.join(", ")}`);
    if (t.from !== undefined) {
      rule.from = strings(t.from, `${at}.from`);
      for (const [j, p] of (rule.from ?? []).entries())
        if (!fromPattern(p)) err(`${at}.from[${j}]`, `"${p}" is not an address, @domain or *.domain`);
    }
    if (t.subject !== undefined) rule.subject = strings(t.subject, `${at}.subject`);
    if (t.subject_re !== undefined) rule.subject_re = pattern(t.subject_re, `${at}.subject_re`);
    if (t.list_id !== undefined) rule.list_id = strings(t.list_id, `${at}.list_id`);
    if (t.header !== undefined) {
      if (!isTable(t.header) || Object.keys(t.header).length === 0)
        err(`${at}.header`, "expected a table of header name = value");
      else {
        rule.header = {};
        for (const [h, v] of Object.entries(t.header)) {
          const hat = `${at}.header.${tomlKey(h)}`;
          if (!/^[a-z0-9][a-z0-9-]*$/.test(h))
            err(hat, "a header name is written in lower case (letters, digits and -)");
          else if (["from", "subject", "list-id"].includes(h))
            err(hat, `match ${h} with the rule's ${h.replace("-", "_")} condition`);
          if (typeof v !== "string") err(hat, "expected the header's value as a string");
          else rule.header[h] = v;
        }
      }
    }

    if (typeof t.output !== "string") err(`${at}.output`, "required: the event type a match becomes");
    else if (!EVENT_TYPE_TOKEN.test(t.output))
      err(`${at}.output`, `"${t.output}" is not an event type (letters, digits, . _ : -, at most 64)`);
    else rule.output = t.output;

    if (t.extract !== undefined) {
      if (!isTable(t.extract)) err(`${at}.extract`, "expected a table of name = { re = ..., from = ... }");
      else {
        rule.extract = {};
        for (const [n, e] of Object.entries(t.extract)) {
          const eat = `${at}.extract.${tomlKey(n)}`;
          if (!/^[a-z][a-z0-9_]{0,63}$/.test(n))
            err(eat, "a value's name is a lower-case identifier (letters, digits, _)");
          if (!isTable(e)) {
            err(eat, "expected { re = ..., from = ... }");
            continue;
          }
          for (const k of Object.keys(e)) if (k !== "re" && k !== "from") err(`${eat}.${tomlKey(k)}`, "unknown key");
          const src = e.from ?? "subject";
          if (src !== "subject" && src !== "snippet") err(`${eat}.from`, 'expected "subject" or "snippet"');
          const re = pattern(e.re, `${eat}.re`, 1);
          if (re !== undefined) rule.extract[n] = { from: src as "subject" | "snippet", re };
        }
      }
    }

    if (t.priority !== undefined) {
      if (typeof t.priority !== "number" || !Number.isInteger(t.priority))
        err(`${at}.priority`, "expected a whole number");
      else rule.priority = t.priority;
    }
    rules.push(rule);
  }

  if (problems.length > 0) return { pack: null, problems };
  return { pack: { name, status: status as RulePack["status"], rules }, problems };
}

const compiled = new Map<string, RegExp>();
/** Each pattern compiled once (no g or y flag, so a RegExp holds no state between runs). */
const regex = (re: string): RegExp => compiled.get(re) ?? (compiled.set(re, new RegExp(re, "i")).get(re) as RegExp);

/** A List-Id without its phrase and angle brackets ("News <news.example>" -> "news.example"), lower-cased. */
const listIdOf = (v: string) => (/<([^<>]*)>/.exec(v)?.[1] ?? v).trim().toLowerCase();

/** Whether every condition of `rule` holds for the message (subject already cut). */
function matches(rule: MailRule, m: MailMessage, subject: string): boolean {
  if (rule.from) {
    const address = addressOf(m.from);
    const domain = address.slice(address.lastIndexOf("@") + 1);
    const hit = rule.from.some((p) => {
      const f = fromPattern(p);
      if (!f || !address) return false;
      if (f.kind === "address") return address === f.value;
      if (f.kind === "domain") return domain === f.value;
      return domain.endsWith(`.${f.value}`);
    });
    if (!hit) return false;
  }
  const lower = subject.toLowerCase();
  if (rule.subject && !rule.subject.some((s) => lower.includes(s.toLowerCase()))) return false;
  if (rule.subject_re !== undefined && !regex(rule.subject_re).test(subject)) return false;
  if (rule.list_id && (m.listId === undefined || !rule.list_id.map(listIdOf).includes(listIdOf(m.listId))))
    return false;
  for (const [h, v] of Object.entries(rule.header ?? {})) {
    const got = m.headers?.[h];
    if (got === undefined || got.trim().toLowerCase() !== v.trim().toLowerCase()) return false;
  }
  return true;
}

/**
 * The first rule (by priority, then order) of the active packs that matches, with its extracted values; null when none
 * does.
 */
export function classify(
  message: MailMessage,
  packs: readonly RulePack[],
): { rule: string; pack: string; output: string; values: Record<string, string> } | null {
  const text = { subject: message.subject.slice(0, MAX_TEXT), snippet: message.snippet?.slice(0, MAX_TEXT) };
  const ordered = packs
    .filter((p) => p.status === "active")
    .flatMap((pack) => pack.rules.map((rule) => ({ pack, rule })))
    .sort((a, b) => (b.rule.priority ?? 0) - (a.rule.priority ?? 0)); // a stable sort keeps file order in a tie
  const hit = ordered.find(({ rule }) => matches(rule, message, text.subject));
  if (!hit) return null;
  // A value whose pattern does not match (or whose source is missing) is left out, not an error:
  // the message still is what the rule says.
  const values: Record<string, string> = {};
  for (const [n, e] of Object.entries(hit.rule.extract ?? {})) {
    const source = text[e.from ?? "subject"];
    const v = source === undefined ? undefined : regex(e.re).exec(source)?.[1]?.trim().slice(0, MAX_VALUE);
    if (v) values[n] = v;
  }
  return { rule: hit.rule.name, pack: hit.pack.name, output: hit.rule.output, values };
}

/**
 * Whether any rule of these packs looks at the snippet (so the caller knows to fetch it); packs that never match do not
 * count.
 */
export function needsSnippet(packs: readonly RulePack[]): boolean {
  return packs.some(
    (p) =>
      p.status === "active" && p.rules.some((r) => Object.values(r.extract ?? {}).some((e) => e.from === "snippet")),
  );
}
