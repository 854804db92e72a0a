// The commented config.toml that `hookspool init` writes, and the reference in docs/config.md,
// both rendered from the schema table so neither can drift from the loader.
import { DEFAULT_SPANS, type Field, type Fields, CONFIG_FIELDS } from "./schema.ts";
import { renderTemplateSection } from "./template-docs.ts";

/** A default as TOML. */
export function tomlValue(v: unknown): string {
  if (typeof v === "string") return JSON.stringify(v);
  if (typeof v === "number" || typeof v === "boolean") return String(v);
  if (Array.isArray(v)) return `[${v.map(tomlValue).join(", ")}]`;
  if (v && typeof v === "object") {
    return `{ ${Object.entries(v)
      .map(([k, x]) => `${k} = ${tomlValue(x)}`)
      .join(", ")} }`;
  }
  return '""';
}

/** A section with its defaults commented out; `active` keys are written live. */
function commentedSection(name: string, field: Field, out: string[], active: Record<string, unknown> = {}): void {
  if (field.type.kind !== "section") return;
  const live = Object.keys(active).length > 0;
  out.push(`# ${field.doc}`, live ? `[${name}]` : `# [${name}]`);
  for (const [key, v] of Object.entries(active)) out.push(`${key} = ${tomlValue(v)}`);
  const nested: [string, Field][] = [];
  for (const [key, f] of Object.entries(field.type.fields)) {
    if (key in active) continue;
    if (f.type.kind === "section") {
      nested.push([key, f]);
      continue;
    }
    const env = f.env ? `; ${f.env} overrides` : "";
    // A key without a default has no line to switch on: it is named, unset, with its meaning.
    if (f.default === undefined) out.push(`# (${key}: unset)`.padEnd(48) + ` # ${f.doc}${env}`);
    else out.push(`# ${key} = ${tomlValue(f.default)}`.padEnd(48) + ` # ${f.doc}${env}`);
  }
  for (const [key, f] of nested) {
    if (f.type.kind !== "section") continue;
    const inline = Object.fromEntries(Object.entries(f.type.fields).map(([k, x]) => [k, x.default]));
    out.push(`# ${key} = ${tomlValue(inline)}`.padEnd(48) + ` # ${f.doc}`);
  }
  out.push("");
}

/** Paths as the starter config writes them: relative to its own directory, where they can be. */
export interface StarterOptions {
  /** spool.home: "." is the config's own directory. */
  home: string;
  /** The demo source's signing secret file. */
  secretFile: string;
  /** The demo script that appends each batch to a file. */
  scriptFile: string;
}

/** config.toml for a new home: every section with its defaults commented, and a working demo. */
export function renderStarterConfig(o: StarterOptions): string {
  const out: string[] = [
    "# hookspool configuration (reference: docs/config.md).",
    "# Every key below is shown with its default, commented out; uncomment a line to change it.",
    "# An unknown key (a typo) is an error: `hookspool check` and the services refuse it;",
    "# the other commands warn, so list, show and status still read the spool.",
    "# Relative paths are relative to this file's directory, so the home can move as a whole.",
    "",
  ];
  for (const [name, field] of Object.entries(CONFIG_FIELDS)) {
    if (field.type.kind === "section") commentedSection(name, field, out, name === "spool" ? { home: o.home } : {});
  }
  out.push('# Coalesce presets; a source names one with span = "...". Add your own under [spans].');
  for (const [name, w] of Object.entries(DEFAULT_SPANS)) out.push(`# spans.${name} = ${tomlValue(w)}`);
  out.push(
    "",
    "# The demo: POST /hooks/demo with a JSON body signed with HMAC-SHA256 (`hookspool send demo`",
    '# makes one). Events with the same "topic" coalesce for 5 s of quiet (at most 30 s) and each',
    "# batch is handed to a script that appends it to batches.jsonl in this directory.",
    "[sources.demo]",
    'template = { scheme = "hmac-sha256-hex", header = "X-Demo-Signature", ' +
      'prefix = "sha256=", key = "topic", event_type = "type" }',
    `secrets.secret = { file = ${tomlValue(o.secretFile)} }`,
    "quiet_s = 5",
    "max_s = 30",
    'action = "script:demo-log"',
    "",
    '[destinations."script:demo-log"]',
    `argv = [${tomlValue(o.scriptFile)}]`,
    'cwd = "."',
    "timeout_s = 30",
    "",
  );
  return out.join("\n");
}

function describeType(f: Field): string {
  const t = f.type;
  switch (t.kind) {
    case "string":
      return t.choices ? `one of ${t.choices.map((c) => `\`${c}\``).join(", ")}` : "string";
    case "int":
      if (t.max !== undefined) return `integer ${t.min ?? 0}..${t.max}`;
      return t.min !== undefined ? `integer >= ${t.min}` : "integer";
    case "number":
      return t.min !== undefined ? `number >= ${t.min}` : "number";
    case "bool":
      return "boolean";
    case "strings":
      return "array of strings";
    case "stringMap":
      return "table of strings";
    case "scalarMap":
      return "table of strings, numbers or booleans";
    case "secret":
      return "secret reference";
    case "secrets":
      return "secret reference or array of them";
    case "secretMap":
      return "table of secret references";
    default:
      return "table";
  }
}

function referenceTable(fields: Fields, prefix: string, out: string[]): void {
  out.push("| key | type | default | meaning |", "| --- | --- | --- | --- |");
  const nested: [string, Field][] = [];
  for (const [key, f] of Object.entries(fields)) {
    if (f.type.kind === "section") {
      nested.push([key, f]);
      continue;
    }
    const def = f.default === undefined ? (f.required ? "required" : "unset") : `\`${tomlValue(f.default)}\``;
    const env = f.env ? ` (\`${f.env}\` overrides)` : "";
    out.push(`| \`${prefix}${key}\` | ${describeType(f)} | ${def} | ${f.doc}${env} |`);
  }
  for (const [key, f] of nested) {
    if (f.type.kind !== "section") continue;
    out.push("", `#### ${prefix}${key}`, "", f.doc, "");
    referenceTable(f.type.fields, `${prefix}${key}.`, out);
  }
}

/**
 * docs/config.md: the reference, generated from the schema table and the template source's
 * tables (scripts/gen-config-docs.ts). `templatePartial` is docs/partials/template-source.md,
 * the hand-written part of the template source section; its tables come from the code.
 */
export function renderConfigReference(templatePartial: string): string {
  const out = [
    "# config.toml reference",
    "",
    "Generated from `src/config/schema.ts`, `src/plugin/template.ts` and `docs/partials/template-source.md`",
    "by `bun scripts/gen-config-docs.ts`; do not edit by hand.",
    "Paths: CLI flag, then environment (`HOOKSPOOL_HOME`, `HOOKSPOOL_CONFIG`, `HOOKSPOOL_DB`), then",
    "config, then default. Window fields inherit per field: route, source, span preset, `[coalesce]`.",
    "Secrets are references (`{ file }`, `{ env }`, `{ env_file, key }`), read at use time, never stored.",
    "",
    "To describe a webhook sender in config (its signature scheme, coalesce key, dedup id and event",
    "type), see [the template source](#the-template-source); it ends with worked examples for GitHub,",
    "a Stripe-style sender, Standard Webhooks, static tokens, and Slack as a code source.",
    "",
  ];
  for (const [name, field] of Object.entries(CONFIG_FIELDS)) {
    const t = field.type;
    out.push(
      `## ${t.kind === "array" ? `[[${name}]]` : t.kind === "map" ? `[${name}.<name>]` : `[${name}]`}`,
      "",
      field.doc,
      "",
    );
    if (t.kind === "section") referenceTable(t.fields, "", out);
    else if (t.kind === "map" || t.kind === "array") referenceTable(t.entry, "", out);
    if (name === "spans") {
      out.push("", "Built-in presets:", "", "| preset | quiet_s | max_s |", "| --- | --- | --- |");
      for (const [n, w] of Object.entries(DEFAULT_SPANS)) out.push(`| \`${n}\` | ${w.quiet_s} | ${w.max_s} |`);
    }
    out.push("");
    if (name === "sources") out.push(renderTemplateSection(templatePartial), "");
  }
  return out.join("\n");
}
