// Splices the shared passages of docs/partials/ into every bobbin's SETUP.md and AGENTS.md. A
// passage sits between `<!-- partial:<name> -->` and `<!-- /partial:<name> -->`: the lines
// between the two are rewritten from docs/partials/<name>.md with its {{placeholders}} filled,
// and everything outside them is the bobbin's own text. `make docs` runs it, and
// test/docs-partials.test.ts fails when a marked region differs from what it would write or a
// document lacks a passage it must have.
//
// A partial opens with a frontmatter: `for` (SETUP.md or AGENTS.md), `required` (all: every
// bobbin includes it or says why not with `<!-- partial:<name> omitted: <why> -->`; webhook: every
// bobbin with a [source]; no: used where it fits) and `about`. A placeholder's value comes from
// bobbin.toml or a default (see `defaults`), then from the document's one
// `<!-- partials: key=value ... -->` line, then from the opening marker's own key=value pairs.
// The passage is written with the opening marker's indentation, so it can sit inside a list
// item; a passage that is itself a numbered item gets {{step}}, one more than the item above it,
// and its closing marker is indented into the item so the item's own lines can follow it.
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parse as parseToml } from "smol-toml";

const ROOT = join(import.meta.dir, "..");
export const BOBBINS_DIR = join(ROOT, "bobbins");
export const PARTIALS_DIR = join(ROOT, "docs", "partials");

export const DOC_FILES = ["SETUP.md", "AGENTS.md"] as const;
export type DocFile = (typeof DOC_FILES)[number];

export interface Partial {
  name: string;
  for: DocFile;
  /** Who must include it or say why not: every bobbin, those with a [source], or none. */
  required: "all" | "webhook" | "no";
  about: string;
  body: string;
}

/** What a document's placeholders are filled from: its bobbin's manifest. */
export interface BobbinInfo {
  /** `<vendor>/<product>`, the directory under bobbins/. */
  dir: string;
  name: string;
  vendor: string;
  /** The manifest has a [source]: the bobbin takes webhooks. */
  webhook: boolean;
}

const OPEN = /^([ \t]*)<!-- partial:([a-z0-9-]+)((?:\s+[a-z_]+=(?:"[^"]*"|[^\s"]+))*)\s*-->$/;
const CLOSE = /^([ \t]*)<!-- \/partial:([a-z0-9-]+) -->$/;
const OMITTED = /^[ \t]*<!-- partial:([a-z0-9-]+) omitted: (\S.*?) -->$/;
const VALUES = /^<!-- partials:((?:\s+[a-z_]+=(?:"[^"]*"|[^\s"]+))+)\s*-->$/;
const ANY_MARKER = /<!-- \/?partials?[:\s]/;
const PAIR = /([a-z_]+)=(?:"([^"]*)"|([^\s"]+))/g;
const PLACEHOLDER = /\{\{([a-z_]+)\}\}/g;

/** The partials under `dir` that are for a bobbin document (a frontmatter with `for`). */
export function loadPartials(dir = PARTIALS_DIR): Map<string, Partial> {
  const out = new Map<string, Partial>();
  for (const file of readdirSync(dir).sort()) {
    if (!file.endsWith(".md")) continue;
    const text = readFileSync(join(dir, file), "utf8");
    const m = /^---\n([\s\S]*?)\n---\n/.exec(text);
    if (!m) continue; // another kind of partial (template-source.md is docs/config.md's)
    const fm = new Map(
      m[1].split("\n").map((l) => [l.slice(0, l.indexOf(":")).trim(), l.slice(l.indexOf(":") + 1).trim()]),
    );
    const name = file.slice(0, -3);
    const target = fm.get("for");
    if (target === undefined) continue;
    if (!(DOC_FILES as readonly string[]).includes(target))
      throw new Error(`docs/partials/${file}: for is ${JSON.stringify(target)}, not one of ${DOC_FILES.join(", ")}`);
    const required = fm.get("required") ?? "no";
    if (required !== "all" && required !== "webhook" && required !== "no")
      throw new Error(`docs/partials/${file}: required is ${JSON.stringify(required)}, not all, webhook or no`);
    const body = text.slice(m[0].length).replace(/^\n+/, "").replace(/\n+$/, "");
    if (!body) throw new Error(`docs/partials/${file}: the passage is empty`);
    if (ANY_MARKER.test(body)) throw new Error(`docs/partials/${file}: a partial cannot hold a partial's marker`);
    out.set(name, { name, for: target as DocFile, required, about: fm.get("about") ?? "", body });
  }
  return out;
}

/** The manifest values of the bobbin in `dir` (`<vendor>/<product>`). */
export function bobbinInfo(dir: string, root = BOBBINS_DIR): BobbinInfo {
  const m = parseToml(readFileSync(join(root, dir, "bobbin.toml"), "utf8")) as {
    name?: string;
    provider?: { vendor?: string };
    source?: unknown;
  };
  return {
    dir,
    name: m.name ?? dir.replace("/", "."),
    vendor: m.provider?.vendor ?? dir.split("/")[0],
    webhook: m.source !== undefined,
  };
}

function pairs(text: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const m of text.matchAll(PAIR)) out.set(m[1], m[2] ?? m[3]);
  return out;
}

/**
 * The values a document's placeholders start from. A default may name other values; the
 * document's and the marker's pairs replace any of them (`name=trello` renames the instance,
 * its path and its example URL at once).
 */
function defaults(b: BobbinInfo, file: DocFile): Map<string, string> {
  const setup = file === "SETUP.md";
  return new Map([
    ["bobbin", b.name],
    ["vendor", b.vendor],
    // The example instance name: the vendor's directory, which most documents use.
    ["name", b.dir.split("/")[0]],
    ["instance", "{{name}}"],
    ["path", "/{{instance}}"],
    ["host", "hooks.example.com"],
    ["example_url", "https://{{host}}/{{name}}"],
    ["url", setup ? "https://{{host}}{{path}}" : "<PUBLIC_HOOK_URL>"],
    ["example_destination", "hermes:{{name}}"],
    ["destination", setup ? "{{example_destination}}" : "<DESTINATION>"],
    ["where", "in {{vendor}}"],
    ["secret_file", "/etc/hookspool/secrets/{{instance}}"],
    ["secret_what", "the secret"],
    ["bytes", "32"],
  ]);
}

function fill(template: string, values: Map<string, string>, where: string, depth = 0): string {
  if (depth > 8) throw new Error(`${where}: the values name each other in a loop`);
  return template.replace(PLACEHOLDER, (_, key: string) => {
    const v = values.get(key);
    if (v === undefined) throw new Error(`${where}: no value for {{${key}}} (give ${key}=... on the marker)`);
    return fill(v, values, where, depth + 1);
  });
}

/** The number a list item at line `at` takes: one after the last numbered item above it in its section. */
function stepAt(lines: string[], at: number): string {
  let last = 0;
  let fence = false;
  for (let i = 0; i < at; i++) {
    if (/^\s*```/.test(lines[i])) fence = !fence;
    if (fence) continue;
    if (/^#{1,6}\s/.test(lines[i])) last = 0;
    const m = /^(\d+)\.\s/.exec(lines[i]);
    if (m) last = Number(m[1]);
  }
  return String(last + 1);
}

/** The nginx map line of `path` and `instance`, aligned as in deploy/nginx.example.conf. */
function mapEntry(values: Map<string, string>, where: string): string {
  const path = fill("{{path}}", values, where);
  return `${path.padEnd(18)} ${fill("{{instance}}", values, where)};`;
}

/** A partial's text as the marker at `lines[at]` gets it: filled, and indented like the marker. */
function render(p: Partial, values: Map<string, string>, indent: string, where: string): string[] {
  let text = fill(p.body, values, where);
  // A passage that is a numbered item of two digits indents its continuation one more.
  if (p.body.startsWith("{{step}}. ") && (values.get("step") ?? "").length > 1)
    text = text.replace(/\n {3}(?=\S| )/g, "\n    ");
  return text.split("\n").map((l) => (l === "" ? "" : indent + l));
}

export interface Expanded {
  text: string;
  problems: string[];
  /** The marked regions whose text is not what the partial gives (a hand edit, or a partial edited since). */
  drift: { name: string; line: number }[];
  /** The partials the document includes, and the ones it says it omits (with why). */
  used: Set<string>;
  omitted: Map<string, string>;
}

/** `text` with every marked region rewritten; `where` names the document in problems. */
export function expandDoc(
  text: string,
  file: DocFile,
  b: BobbinInfo,
  partials: Map<string, Partial>,
  where = `bobbins/${b.dir}/${file}`,
): Expanded {
  const lines = text.split("\n");
  const out: string[] = [];
  const problems: string[] = [];
  const drift: { name: string; line: number }[] = [];
  const used = new Set<string>();
  const omitted = new Map<string, string>();
  const base = defaults(b, file);
  const docValues = lines.map((l) => VALUES.exec(l)).filter((m) => m !== null);
  if (docValues.length > 1) problems.push(`${where}: more than one <!-- partials: ... --> line`);
  const known = new Set([...base.keys(), "step"]);
  const unknown = (attrs: string, at: string) => {
    for (const k of pairs(attrs).keys())
      if (!known.has(k)) problems.push(`${at}: ${k} is not a value a partial takes (one of ${[...known].join(", ")})`);
  };
  docValues.forEach((m) => unknown(m[1], where));
  for (const m of docValues) for (const [k, v] of pairs(m[1])) base.set(k, v);
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    const at = `${where}:${i + 1}`;
    const om = OMITTED.exec(line);
    if (om) {
      const p = partials.get(om[1]);
      if (!p) problems.push(`${at}: no partial named ${om[1]} in docs/partials/`);
      else if (p.required === "no") problems.push(`${at}: ${om[1]} is not required, so there is nothing to omit`);
      omitted.set(om[1], om[2]);
      out.push(line);
      continue;
    }
    const open = OPEN.exec(line);
    if (!open) {
      if (CLOSE.test(line)) problems.push(`${at}: a closing marker with no opening one`);
      else if (ANY_MARKER.test(line) && !VALUES.test(line))
        problems.push(`${at}: not a marker this generator reads: ${line.trim()}`);
      out.push(line);
      continue;
    }
    const [, indent, name, attrs] = open;
    unknown(attrs, at);
    let end = -1;
    for (let j = i + 1; j < lines.length; j++) {
      const c = CLOSE.exec(lines[j]);
      if (c) {
        if (c[2] === name) end = j;
        break;
      }
      if (OPEN.test(lines[j])) break;
    }
    if (end < 0) {
      problems.push(`${at}: <!-- partial:${name} --> has no <!-- /partial:${name} --> before the next marker`);
      out.push(line);
      continue;
    }
    const p = partials.get(name);
    if (!p) problems.push(`${at}: no partial named ${name} in docs/partials/`);
    else if (p.for !== file) problems.push(`${at}: ${name} is a passage for ${p.for}, not ${file}`);
    else {
      used.add(name);
      const values = new Map(base);
      values.set("step", stepAt(lines, i));
      for (const [k, v] of pairs(attrs)) values.set(k, v);
      values.set("map_entry", mapEntry(values, at));
      try {
        const body = render(p, values, indent, at);
        // A passage that is a list item closes inside the item, so the item's own lines that
        // follow the marker (a report, a check) stay in it.
        const item = /^[ \t]*(- |\d+\. )/.exec(body[0]);
        const region = [...body, `${indent}${item ? " ".repeat(item[1].length) : ""}<!-- /partial:${name} -->`];
        if (region.join("\n") !== lines.slice(i + 1, end + 1).join("\n")) drift.push({ name, line: i + 1 });
        out.push(line, ...region);
        i = end;
        continue;
      } catch (e) {
        problems.push((e as Error).message);
      }
    }
    out.push(...lines.slice(i, end + 1));
    i = end;
  }
  for (const [name, why] of omitted)
    if (used.has(name)) problems.push(`${where}: ${name} is both included and omitted (${why})`);
  return { text: out.join("\n"), problems, drift, used, omitted };
}

/** The partials `file` of bobbin `b` must include (or omit, saying why). */
export function requiredFor(file: DocFile, b: BobbinInfo, partials: Map<string, Partial>): string[] {
  return [...partials.values()]
    .filter((p) => p.for === file && (p.required === "all" || (p.required === "webhook" && b.webhook)))
    .map((p) => p.name);
}

/** Every bobbin directory (`<vendor>/<product>`) under `root` that has a bobbin.toml. */
export function bobbinDirs(root = BOBBINS_DIR): string[] {
  const out: string[] = [];
  for (const v of readdirSync(root, { withFileTypes: true })) {
    if (!v.isDirectory()) continue;
    for (const e of readdirSync(join(root, v.name), { withFileTypes: true })) {
      if (e.isDirectory() && existsSync(join(root, v.name, e.name, "bobbin.toml"))) out.push(`${v.name}/${e.name}`);
    }
  }
  return out.sort();
}

export interface DocState {
  /** `bobbins/<vendor>/<product>/<file>`. */
  where: string;
  path: string;
  old: string;
  expanded: Expanded;
  /** Malformed markers and missing passages: what `make docs` cannot mend by itself. */
  problems: string[];
  /** The regions that differ from what their partial gives: `make docs` rewrites them. */
  drifted: string[];
}

/** Each SETUP.md and AGENTS.md under `root`, with what the generator would write and what is wrong. */
export function scanDocs(root = BOBBINS_DIR, partials = loadPartials()): DocState[] {
  const out: DocState[] = [];
  for (const dir of bobbinDirs(root)) {
    const b = bobbinInfo(dir, root);
    for (const file of DOC_FILES) {
      const path = join(root, dir, file);
      if (!existsSync(path)) continue;
      const old = readFileSync(path, "utf8");
      const where = `bobbins/${dir}/${file}`;
      const expanded = expandDoc(old, file, b, partials, where);
      const problems = [...expanded.problems];
      for (const name of requiredFor(file, b, partials)) {
        if (!expanded.used.has(name) && !expanded.omitted.has(name))
          problems.push(
            `${where}: does not include ${name} (add <!-- partial:${name} --> and <!-- /partial:${name} -->, ` +
              `or <!-- partial:${name} omitted: <why> -->)`,
          );
      }
      const drifted = expanded.drift.map(
        (d) =>
          `${where}:${d.line}: the ${d.name} region is not what docs/partials/${d.name}.md gives: ` +
          "edit the partial or the text outside the markers, then run make docs",
      );
      out.push({ where, path, old, expanded, problems, drifted });
    }
  }
  return out;
}

if (import.meta.main) {
  // --check writes nothing: it lists what is wrong, drifted regions too, and exits 1.
  const check = process.argv.includes("--check");
  let bad = 0;
  let wrote = 0;
  for (const d of scanDocs()) {
    const problems = check ? [...d.problems, ...d.drifted] : d.problems;
    for (const p of problems) console.error(p);
    bad += problems.length;
    if (!check && !d.expanded.problems.length && d.expanded.text !== d.old) {
      writeFileSync(d.path, d.expanded.text);
      wrote++;
    }
  }
  if (!check) console.error(`bobbin docs: ${wrote} file(s) rewritten from docs/partials/`);
  if (bad) process.exit(1);
}
