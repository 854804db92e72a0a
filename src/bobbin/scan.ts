// The "core-only" conformance check: a bobbin calls core, never re-implements it. Each `.ts`
// file of a bobbin is scanned for imports (only its own files and core's plugin API) and for
// tokens that reach around core (network, processes, files, timers, the environment, logging,
// code loading). A token counts only when it is in code: the transpiler's output (no types, no
// comments) must hold it, and it is looked for in the source with comments and string, template
// and regex bodies blanked, so a mention in a comment or a string is never a problem.
import { posix } from "node:path";

export interface ScanProblem {
  /** Relative to the bobbin directory (for scanVendorDir: `<vendor>/<name>`). */
  file: string;
  /** 1-based line in the original source; 0 when the problem is the file itself. */
  line: number;
  message: string;
  hint: string;
}

const transpiler = new Bun.Transpiler({ loader: "ts" });
type Imports = ReturnType<Bun.Transpiler["scanImports"]>;

// ---------------------------------------------------------------------------------------------
// Blanking comments, strings and regex bodies (offsets and newlines are kept)

/** Can a `/` after `prev` (the last significant character or word) start a regex literal? */
function regexCanStart(prev: string): boolean {
  return /^(?:|return|typeof|case|do|else|in|of|new|delete|void|throw|yield|await|[(,=:[!&|?{};+\-*%<>~^}])$/.test(
    prev,
  );
}

/** Index just past a comment starting at `i`: past its `*\/`, or at the end of its line. */
function commentEnd(text: string, i: number): number {
  const line = text[i + 1] === "/";
  const end = line ? text.indexOf("\n", i) : text.indexOf("*/", i + 2);
  if (end < 0) return text.length;
  return line ? end : end + 2;
}

/** The first index from `from` where `stops` holds, skipping backslash escapes (or the end). */
function scanTo(text: string, from: number, stops: (k: number) => boolean): number {
  let k = from;
  while (k < text.length && !stops(k)) k += text[k] === "\\" ? 2 : 1;
  return Math.min(k, text.length);
}

/** Index just past a quoted string starting at `i` (an unterminated one stops at its newline). */
function stringEnd(text: string, i: number): number {
  const stop = scanTo(text, i + 1, (k) => text[k] === text[i] || text[k] === "\n");
  return text[stop] === text[i] ? stop + 1 : stop;
}

/** From inside a template, the index of its closing backtick or of the `$` of its next `${`. */
const templateChunkEnd = (text: string, i: number) =>
  scanTo(text, i, (k) => text[k] === "`" || (text[k] === "$" && text[k + 1] === "{"));

/** Index just past a regex literal starting at `i` (flags included), or -1 when it is not one. */
function regexEnd(text: string, i: number): number {
  let inClass = false;
  for (let k = i + 1; k < text.length; k++) {
    const c = text[k];
    if (c === "\n") return -1;
    if (c === "\\") k++;
    else if (c === "[" || c === "]") inClass = c === "[";
    else if (c === "/" && !inClass) return k + 1 + (/^[a-z]*/.exec(text.slice(k + 1))?.[0].length ?? 0);
  }
  return -1;
}

/** `text` with comments and the bodies of strings, templates and regexes turned to spaces. */
function blankOut(text: string): string {
  const out = text.split("");
  const wipe = (from: number, to: number) => {
    for (let k = from; k < to; k++) if (out[k] !== "\n") out[k] = " ";
  };
  const templates: number[] = []; // the brace depth at each open `${`
  let [depth, prev, i] = [0, "", 0];
  while (i < text.length) {
    const c = text[i];
    if (c === "/" && (text[i + 1] === "/" || text[i + 1] === "*")) {
      const end = commentEnd(text, i);
      wipe(i, end);
      i = end;
      continue;
    }
    if (c === "`" || (c === "}" && templates.at(-1) === depth)) {
      if (c === "}") templates.pop();
      const stop = templateChunkEnd(text, i + 1);
      wipe(i + 1, stop);
      const opensExpression = text[stop] === "$";
      if (opensExpression) templates.push(depth);
      [i, prev] = opensExpression ? [stop + 2, "{"] : [stop + 1, "x"];
      continue;
    }
    // past a string or regex starting here, or -1
    const end = c === '"' || c === "'" ? stringEnd(text, i) : c === "/" && regexCanStart(prev) ? regexEnd(text, i) : -1;
    if (end > 0) {
      wipe(i + 1, end - 1);
      [i, prev] = [end, "x"];
      continue;
    }
    const word = /^[\w$]+/.exec(text.slice(i, i + 64))?.[0];
    depth += c === "{" ? 1 : c === "}" ? -1 : 0;
    if (word || !/\s/.test(c)) prev = word ?? c;
    i += word ? word.length : 1;
  }
  return out.join("");
}

const lineAt = (text: string, offset: number) => text.slice(0, offset).split("\n").length;

// ---------------------------------------------------------------------------------------------
// Imports

const RETRY_HINT = "raise Retryable (src/plugin/types.ts); the dispatcher retries with backoff";
const NET_HINT = "make outbound requests with ctx.http; intake serves inbound HTTP";
const PROCESS_HINT = "a bobbin starts no processes or threads; a script destination runs commands";
const WRITE_HINT = "a bobbin writes no files: what it produces goes back to core as events and outcomes";
const LOAD_HINT = "import statically at the top of the file; a bobbin's files are loaded by the runtime";
const hinted = (names: string[], hint: string) => Object.fromEntries(names.map((name) => [name, hint]));

/** Modules a bobbin never imports (node: ones with or without the prefix), with what to use instead. */
const BLOCKED_MODULES: Record<string, string> = {
  crypto: "check signatures with the plugin API's verify helpers (src/plugin/verify.ts)",
  ...hinted(["http", "https", "net", "tls", "dgram"], NET_HINT),
  ...hinted(["child_process", "worker_threads"], PROCESS_HINT),
  "bun:sqlite": "the spool is core's: keep state through the plugin context (ctx), never a database",
  "bun:ffi": "a bobbin runs only TypeScript; native code belongs in core",
};
const FS_MODULES = new Set(["fs", "fs/promises"]);
/** Pure helpers of the runtime: no I/O, nothing core already does. */
const PURE_MODULES = new Set(["path", "url", "buffer", "util", "querystring", "string_decoder"]);
const CORE_DIRS = ["/src/plugin/", "/src/net/", "/src/providers/"];

type Verdict = { message: string; hint: string } | null;
const otherBobbin = (spec: string): Verdict => ({
  message: `a bobbin never imports another bobbin (imports "${spec}")`,
  hint: "what two bobbins share belongs in core's plugin API (src/plugin/)",
});

/** Does a path relative to the bobbin directory land in another bobbin (of this vendor or another)? */
function reachesBobbin(resolved: string, siblings: readonly string[]): boolean {
  const parts = resolved.split("/");
  const ups = parts.filter((p) => p === "..").length;
  return (ups === 1 && (parts.length >= 3 || siblings.includes(parts[1]))) || (ups === 2 && parts.length >= 5);
}

function relativeVerdict(file: string, spec: string, siblings: readonly string[]): Verdict {
  const resolved = posix.normalize(posix.join(posix.dirname(file), spec));
  if (resolved !== ".." && !resolved.startsWith("../")) return null;
  if (CORE_DIRS.some((dir) => resolved.includes(dir))) return null;
  if (reachesBobbin(resolved, siblings)) return otherBobbin(spec);
  const hint = "import only the bobbin's own files and core's plugin API (src/plugin/)";
  return { message: `imports "${spec}", outside the bobbin's directory`, hint };
}

function importVerdict(file: string, spec: string, siblings: readonly string[]): Verdict {
  if (spec.startsWith(".")) return relativeVerdict(file, spec, siblings);
  const name = spec.replace(/^node:/, "");
  if (BLOCKED_MODULES[name]) return { message: `imports "${spec}"`, hint: BLOCKED_MODULES[name] };
  if (FS_MODULES.has(name)) return null; // reading only: see FS_WRITE_RULE
  if (spec.startsWith("node:") && PURE_MODULES.has(name)) return null;
  // The plugin API under its name for bobbins loaded by path.
  if (spec === "hookspool/plugin" || spec === "hookspool/providers") return null;
  if (siblings.includes(spec.split("/")[0])) return otherBobbin(spec);
  const message = `imports the package "${spec}": a bobbin imports only core and its own files`;
  return { message, hint: "use core's plugin API (src/plugin/); a dependency a bobbin needs belongs in core" };
}

/** An import or export statement up to its first string, on blanked code (the string is spaces). */
const STATEMENT = /(?<![.\w$])(import|export)(\s+type\b)?([^;"'`]*?)(["'])( *)\4/g;

/** Is an import clause (`{ type A, type B as C } from`) made of type specifiers only? */
function onlyTypes(clause: string): boolean {
  const braces = /^\s*(\{[^}]*\})\s*from\s*$/.exec(clause)?.[1];
  return (
    !!braces && /\btype\s/.test(braces) && braces.replace(/\btype\s+[\w$]+(\s+as\s+[\w$]+)?\s*,?|\s/g, "") === "{}"
  );
}

/** Lines of the value import/export statements naming each specifier, in source order. */
function importLines(text: string, code: string): Map<string, number[]> {
  const lines = new Map<string, number[]>();
  for (const m of code.matchAll(STATEMENT)) {
    const [all, , typeKeyword, clause, , blank] = m;
    if (typeKeyword || onlyTypes(clause) || !/^\s*$|\bfrom\s*$/.test(clause)) continue;
    const start = m.index + all.length - 1 - blank.length;
    const spec = text.slice(start, start + blank.length);
    lines.set(spec, [...(lines.get(spec) ?? []), lineAt(text, m.index)]);
  }
  return lines;
}

function importProblems(
  file: string,
  text: string,
  code: string,
  imports: Imports,
  siblings: readonly string[],
): ScanProblem[] {
  const lines = importLines(text, code);
  return imports
    .filter(({ kind }) => kind === "import-statement") // require( and import( are token problems
    .map(({ path }) => ({ line: lines.get(path)?.shift() ?? 1, verdict: importVerdict(file, path, siblings) }))
    .flatMap(({ line, verdict }) => (verdict ? [{ file, line, ...verdict }] : []));
}

// ---------------------------------------------------------------------------------------------
// Tokens

/** `why` is said after the token in the message. */
type TokenRule = { pattern: RegExp; hint: string; why?: string };

/** A token that is not a member of something else, optionally reached through `globalThis.`. */
const token = (body: string) => new RegExp(`(?<![.\\w$])(?:globalThis\\s*\\??\\.\\s*)?(?:${body})`, "g");
const member = (object: string, names: string) => token(`${object}\\s*\\??\\.\\s*(?:${names})\\b`);

const TOKEN_RULES: TokenRule[] = [
  { pattern: token("fetch\\s*\\("), hint: "make outbound requests with ctx.http" },
  { pattern: member("Bun", "spawnSync|spawn"), hint: PROCESS_HINT },
  { pattern: member("Bun", "write"), hint: WRITE_HINT },
  { pattern: member("Bun", "file"), hint: "read the bobbin's own files with node:fs read calls" },
  { pattern: member("Bun", "serve"), hint: "intake serves HTTP; a source handles the request core hands it" },
  { pattern: member("Bun", "sleep"), hint: RETRY_HINT },
  {
    pattern: member("(?:Bun|process)", "env"),
    hint: "take settings and secrets from the plugin context (ctx.secrets)",
  },
  {
    pattern: member("process", "exit"),
    hint: "throw Permanent or Retryable (src/plugin/types.ts); core owns the process",
  },
  {
    pattern: token("eval\\s*\\(|new\\s+Function\\b|Function\\s*\\("),
    hint: "a bobbin runs only its own code, never code from strings",
  },
  { pattern: token("(?:setTimeout|setInterval|setImmediate)\\b"), hint: RETRY_HINT },
  { pattern: token("console\\s*\\??(?:\\.\\s*[\\w$]*|\\[)"), hint: "log through ctx.log" },
  { pattern: token("require\\s*\\("), hint: LOAD_HINT },
  { pattern: token("import\\s*\\("), hint: LOAD_HINT, why: "a dynamic import" },
  // Bare or computed use (`globalThis["fetch"]`, `const { env } = process`); not a member
  // access, a call (a `process()` method), an object key, an assignment to a local or a typeof.
  {
    pattern: token("(?<!typeof\\s+)(?:globalThis|Bun|process)\\b(?!\\s*(?:\\??\\.|\\??:|\\(|=(?!=)))"),
    hint: "name what you use directly; core reaches a bobbin through ctx",
    why: "reaching globals indirectly",
  },
];

const FS_WRITES = [
  "writeFile|appendFile|mkdir|mkdtemp|rm|rmdir|unlink|rename|copyFile|cp|createWriteStream",
  "open|truncate|chmod|chown|symlink|link|utimes",
].join("|");
/** In a file importing node:fs: a write function called, taken off the module, or renamed on import. */
const FS_WRITE_RULE: TokenRule = {
  pattern: new RegExp(
    `(?<=\\.\\s*)(?:${FS_WRITES})(?:Sync)?\\b|(?<![.\\w$])(?:${FS_WRITES})(?:Sync)?(?=\\s*\\(|\\s+as\\b)`,
    "g",
  ),
  hint: WRITE_HINT,
  why: "node:fs is for reading only",
};

/**
 * Is the `name(` whose `(` is at `open` a function or method being defined (`fetch(x) {`,
 * `async fetch(x: T): R {`) rather than called? Then nothing is reached.
 */
function isDefinition(code: string, start: number, open: number): boolean {
  let [depth, close] = [0, open];
  for (; close < code.length; close++) {
    depth += code[close] === "(" ? 1 : code[close] === ")" ? -1 : 0;
    if (depth === 0) break;
  }
  const after = code.slice(close + 1).trimStart()[0];
  const declares = /(?:^|[{,;}*]|\b(?:async|static|get|set|function|public|private|protected|override))\s*$/.test(
    code.slice(0, start),
  );
  return declares && (after === "{" || after === ":");
}

function tokenProblems(
  file: string,
  text: string,
  code: string,
  transformed: string,
  rules: TokenRule[],
): ScanProblem[] {
  const problems: ScanProblem[] = [];
  for (const rule of rules) {
    if (transformed.search(rule.pattern) < 0) continue; // only in types, or in dead code
    for (const m of code.matchAll(rule.pattern)) {
      if (m[0].endsWith("(") && isDefinition(code, m.index, m.index + m[0].length - 1)) continue;
      const found = m[0].replace(/\s*([.[(])\s*/g, "$1").replace(/\s+/g, " ");
      const message = `uses \`${found}\`${rule.why ? ` (${rule.why})` : ""}`;
      problems.push({ file, line: lineAt(text, m.index), message, hint: rule.hint });
    }
  }
  return problems;
}

// ---------------------------------------------------------------------------------------------
// The scans

/** The transpiler throws a BuildMessage, or an AggregateError of them, each with a 1-based line. */
function parseFailure(file: string, err: unknown): ScanProblem {
  type BuildError = { message?: string; position?: { line?: number } };
  const first: BuildError = (err as { errors?: BuildError[] }).errors?.[0] ?? (err as BuildError);
  const message = `does not parse: ${first.message ?? String(err)}`;
  return {
    file,
    line: first.position?.line ?? 1,
    message,
    hint: "fix the syntax: a file that does not parse is neither checked nor loaded",
  };
}

/**
 * Scan one bobbin code file. `file` is its path relative to the bobbin directory (e.g. "source.ts");
 * `siblings` are the other products of the same vendor (directory names)
 */
export function scanModule(file: string, text: string, opts: { siblings?: readonly string[] } = {}): ScanProblem[] {
  let transformed: string;
  let imports: Imports;
  try {
    transformed = blankOut(transpiler.transformSync(text));
    imports = transpiler.scanImports(text);
  } catch (err) {
    return [parseFailure(file, err)];
  }
  const code = blankOut(text);
  const readsFs = imports.some(({ path }) => FS_MODULES.has(path.replace(/^node:/, "")));
  const rules = readsFs ? [...TOKEN_RULES, FS_WRITE_RULE] : TOKEN_RULES;
  const imported = importProblems(file, text, code, imports, opts.siblings ?? []);
  return [...imported, ...tokenProblems(file, text, code, transformed, rules)].sort((a, b) => a.line - b.line);
}

/**
 * The vendor directory holds no code: given the names of entries directly in <root>/<vendor>/
 * (with isDirectory flags), problems for each non-directory entry
 */
export function scanVendorDir(
  vendor: string,
  entries: readonly { name: string; isDirectory: boolean }[],
): ScanProblem[] {
  return entries
    .filter((entry) => !entry.isDirectory)
    .map(({ name }) => ({
      file: `${vendor}/${name}`,
      line: 0,
      message: `found the file "${name}": the vendor directory holds no code or files: only <product>/ directories`,
      hint: `move it into a product's directory (${vendor}/<product>/), or delete it`,
    }));
}
