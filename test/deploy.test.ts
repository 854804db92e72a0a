// Keeps deploy/ and docs/operations/ true: the systemd units run the right verbs, the proxy
// examples match the intake's defaults, every `hookspool <verb>` and flag they show is in the
// verb table below, and every config key they name is in the config schema.
import { describe, expect, test } from "bun:test";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import type { ArgsDef, CommandDef } from "citty";
import { parse as parseToml } from "smol-toml";
import type { Io } from "../src/cli/context.ts";
import { makeCli } from "../src/cli/context.ts";
import { rootCommand } from "../src/cli/root.ts";
import { CONFIG_FIELDS, type Field, type Fields } from "../src/config/schema.ts";

const ROOT = join(import.meta.dir, "..");
const DEPLOY = join(ROOT, "deploy");
const OPS = join(ROOT, "docs", "operations");

function filesUnder(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? filesUnder(path) : [path];
  });
}

const DOCS = readdirSync(OPS)
  .filter((f) => f.endsWith(".md"))
  .map((f) => join(OPS, f));
const DEPLOY_FILES = filesUnder(DEPLOY);
const ALL = [...DOCS, ...DEPLOY_FILES];
const rel = (path: string) => relative(ROOT, path);

// ---------------------------------------------------------------------------------------------
// The whole CLI, verbs this build lacks included: each verb and its flags. Globals go before or
// after the verb.

interface VerbSpec {
  flags: string[];
  subs?: Record<string, string[]>;
}

const v = (...flags: string[]): VerbSpec => ({ flags });
const SPEC16: Record<string, VerbSpec> = {
  intake: v(),
  dispatch: v(),
  run: v(),
  status: v(),
  list: v("state", "source", "destination", "reason", "key", "status", "since", "until", "where", "before", "limit"),
  show: v("events", "payload", "attempts"),
  replay: v("dead", "delivered", "destination", "source", "since", "reason", "where", "plan"),
  retry: v(),
  split: v("max-events", "max-bytes", "at"),
  exclude: v("yes"),
  drop: v("yes"),
  pause: v("reason"),
  resume: v("budget"),
  outcome: v("reason", "permanent"),
  issues: { flags: [], subs: { list: [], ack: [], resolve: [], ignore: [] } },
  enqueue: v("source", "key", "destination", "event-type", "dedup-id", "file"),
  bobbin: { flags: [], subs: { list: [], show: [], expand: [], new: ["poll"], check: [] } },
  source: { flags: [], subs: { test: ["request"], arm: ["for"] } },
  check: v(),
  reload: v(),
  migrate: v("dry-run"),
  "migrate-store": v("to", "url-env"),
  prune: v("vacuum"),
  export: v("state", "source", "destination", "reason", "key", "status", "since", "until", "where"),
  watch: v("source", "destination", "key", "since", "count", "for"),
  // The web view on loopback.
  dashboard: v("listen"),
  metrics: v(),
  send: v("data", "file", "capture", "event-type", "url", "count", "follow", "handshake"),
  route: { flags: [], subs: { test: ["since", "source", "where", "request", "limit"] } },
  // Recover what a sender failed to deliver (github.repo, stripe.events, paddle.billing).
  sweep: v("repo", "hook", "endpoint", "param", "since", "dry-run", "api-url"),
  // The verb that writes a starter home.
  init: v("force"),
  // A developer's consumer of a pull destination.
  pull: v("from", "destination", "token-file", "to", "script", "hermes", "consumer"),
};
const GLOBAL_FLAGS = new Set(["home", "config", "json", "help"]);
const GLOBAL_WITH_VALUE = new Set(["--home", "--config"]);

/** A fenced code block in markdown, indented or not. */
const FENCE = /^[ \t]*```([^\n]*)\n([\s\S]*?)^[ \t]*```[ \t]*$/gm;

interface Chunk {
  text: string;
  /** Only the binary's path (/usr/local/bin/hookspool <verb>) counts as a command here. */
  pathOnly: boolean;
}

/** The pieces of a file that are commands or config: code blocks and `code spans`, and in
 * deploy files every line that is not a comment (there only the binary's path is a command,
 * since a Description= is prose). Comments and markdown prose are not scanned. */
function chunksOf(path: string): Chunk[] {
  const text = readFileSync(path, "utf8");
  const chunks: Chunk[] = [];
  let prose = text;
  if (path.endsWith(".md")) {
    prose = text.replace(FENCE, (_m, _lang: string, body: string) => {
      // A shell line continued with a backslash is one command.
      for (const line of body.replace(/\\\n\s*/g, " ").split("\n")) chunks.push({ text: line, pathOnly: false });
      return "";
    });
  } else {
    for (const line of text.split("\n")) if (!/^\s*#/.test(line)) chunks.push({ text: line, pathOnly: true });
  }
  for (const m of prose.matchAll(/`([^`\n]+)`/g)) chunks.push({ text: m[1], pathOnly: false });
  return chunks;
}

const codeChunks = (path: string): string[] => chunksOf(path).map((c) => c.text);

interface Mention {
  file: string;
  verb: string;
  sub: string | null;
  flags: string[];
  text: string;
}

const SHELL_END = /^(\||\|\||&&|;|>|>>|<|2>&1|#.*)$/;

/** Every `hookspool <verb> ...` in a chunk of code. */
function mentions(file: string, { text: chunk, pathOnly }: Chunk): Mention[] {
  const out: Mention[] = [];
  for (const m of chunk.matchAll(/hookspool/g)) {
    const at = m.index ?? 0;
    const before = chunk.slice(0, at);
    const prev = before.slice(-1);
    if (pathOnly && !before.endsWith("bin/")) continue;
    // Part of a longer name (hookspool-intake, my_hookspool, .hookspool) or a path that is not
    // the binary's (/var/lib/hookspool); /usr/local/bin/hookspool is the binary.
    if (prev && /[\w.-]/.test(prev)) continue;
    if (prev === "/" && !before.endsWith("bin/")) continue;
    // The user name as an option's value: sudo -u hookspool, install -o hookspool -g hookspool.
    if (/(^|\s)(-u|-g|-o|--user|--group|--owner)[ =]$/.test(before)) continue;
    const after = chunk.slice(at + "hookspool".length);
    if (!/^[ \t]/.test(after)) continue;
    const tokens = after.trim().split(/\s+/);
    let i = 0;
    const flags: string[] = [];
    // Global flags may stand before the verb.
    while (i < tokens.length && tokens[i].startsWith("--")) {
      const t = tokens[i];
      flags.push(t);
      i += GLOBAL_WITH_VALUE.has(t) ? 2 : 1;
    }
    const verb = tokens[i];
    if (!verb || !/^[a-z]/.test(verb)) continue; // `hookspool --version`, `hookspool <verb>`
    i++;
    let sub: string | null = null;
    if (SPEC16[verb]?.subs && tokens[i] && /^[a-z]/.test(tokens[i])) sub = tokens[i++];
    for (; i < tokens.length && !SHELL_END.test(tokens[i]); i++) {
      const t = tokens[i].replace(/^[[(]+/, "");
      if (/^--[a-z][a-z-]*(=|$)/.test(t)) flags.push(t);
    }
    out.push({
      file,
      verb: verb.replace(/[^a-z-].*$/, ""),
      sub,
      flags,
      text: `hookspool ${after.trim()}`.slice(0, 100),
    });
  }
  return out;
}

const MENTIONS = ALL.flatMap((f) => chunksOf(f).flatMap((c) => mentions(rel(f), c)));

/** The flags the CLI accepts today for a verb (null when the verb is not built yet). */
function cliFlags(verb: string, sub: string | null): Set<string> | null {
  const io: Io = { out() {}, err() {}, readStdin: async () => new Uint8Array(), env: {}, cwd: ROOT, isTTY: false };
  const root = rootCommand(makeCli(io, { json: false }));
  const subs = root.subCommands as Record<string, CommandDef> | undefined;
  let cmd = subs?.[verb];
  if (!cmd) return null;
  if (sub) {
    const nested = cmd.subCommands as Record<string, CommandDef> | undefined;
    if (!nested?.[sub]) return null;
    cmd = nested[sub];
  }
  const names = new Set<string>(["help"]);
  for (const [name, def] of Object.entries((cmd.args ?? {}) as ArgsDef)) {
    if (def.type === "positional") continue;
    names.add(name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`));
    for (const a of ([] as string[]).concat((def as { alias?: string | string[] }).alias ?? [])) names.add(a);
  }
  return names;
}

describe("hookspool commands in deploy/ and docs/operations/", () => {
  test("the scan finds the commands these pages are about", () => {
    const verbs = new Set(MENTIONS.map((m) => m.verb));
    for (const verb of [
      "intake",
      "dispatch",
      "check",
      "migrate",
      "status",
      "export",
      "prune",
      "replay",
      "issues",
      "show",
    ]) {
      expect(verbs).toContain(verb);
    }
  });

  test("every verb is one of the table's", () => {
    const bad = MENTIONS.filter((m) => !(m.verb in SPEC16)).map((m) => `${m.file}: ${m.text}`);
    expect(bad).toEqual([]);
  });

  test("every sub-command is one the table gives its verb (issues, bobbin, source)", () => {
    const bad = MENTIONS.filter((m) => m.sub !== null && !(m.sub in (SPEC16[m.verb]?.subs ?? {}))).map(
      (m) => `${m.file}: ${m.text}`,
    );
    expect(bad).toEqual([]);
  });

  test("every flag is one the table gives the verb, or a global flag", () => {
    const bad: string[] = [];
    for (const m of MENTIONS) {
      const spec = SPEC16[m.verb];
      if (!spec) continue;
      const allowed = new Set([...spec.flags, ...(m.sub ? (spec.subs?.[m.sub] ?? []) : []), ...GLOBAL_FLAGS]);
      for (const f of m.flags) {
        const name = f.slice(2).split("=")[0];
        if (!allowed.has(name)) bad.push(`${m.file}: ${f} in ${m.text}`);
      }
    }
    expect(bad).toEqual([]);
  });

  test("every flag shown is accepted by the CLI, for the verbs it has already", () => {
    const bad: string[] = [];
    for (const m of MENTIONS) {
      const accepted = cliFlags(m.verb, m.sub);
      if (!accepted) continue;
      for (const f of m.flags) {
        const name = f.slice(2).split("=")[0];
        if (!accepted.has(name) && !GLOBAL_FLAGS.has(name)) bad.push(`${m.file}: ${f} in ${m.text}`);
      }
    }
    expect(bad).toEqual([]);
  });
});

// ---------------------------------------------------------------------------------------------
// The sections of config.toml, and the keys the pages name.

const SPEC15_SECTIONS = [
  "spool",
  "intake",
  "dispatch",
  "coalesce",
  "limits",
  "retention",
  "alerts",
  "hermes",
  "spans",
  "sources",
  "routes",
  "destinations",
  "bobbins",
];
/** Singular/plural slips of a section name (`alert.argv`, `[source.github]`). */
const SLIPS = new Map(SPEC15_SECTIONS.map((s) => [s.endsWith("s") ? s.slice(0, -1) : `${s}s`, s]));
/** `name.ext` that is a file, not a key. */
const FILE_EXT = new Set([
  "toml",
  "md",
  "db",
  "lock",
  "json",
  "jsonl",
  "sock",
  "conf",
  "service",
  "sh",
  "py",
  "ts",
  "log",
  "pem",
  "example",
]);

function fieldsOf(field: Field): Fields | null {
  const t = field.type;
  if (t.kind === "section") return t.fields;
  if (t.kind === "map" || t.kind === "array") return t.entry;
  return null;
}

/** Problems with one dotted key path (section first) against the schema. */
function checkPath(parts: string[]): string | null {
  const [section, ...rest] = parts;
  const field = CONFIG_FIELDS[section];
  if (!field) return `[${section}] is not a section of config.toml`;
  const kind = field.type.kind;
  // A named table (sources.github, destinations."script:x"): the name is free, the key after it is not.
  let keys = kind === "map" ? rest.slice(1) : rest;
  let fields = fieldsOf(field);
  while (keys.length && fields) {
    const f = fields[keys[0]];
    if (!f) return `${keys[0]} is not a key there`;
    fields = fieldsOf(f);
    keys = f.type.kind === "map" ? keys.slice(2) : keys.slice(1);
  }
  return null;
}

/** Every `section.key` and `[section...]` a file names, with where it was found. */
function keyMentions(path: string): { where: string; parts: string[] }[] {
  const out: { where: string; parts: string[] }[] = [];
  // Deploy files name keys in their comments too; docs name them in code.
  const chunks = path.endsWith(".md") ? codeChunks(path) : [readFileSync(path, "utf8")];
  for (const chunk of chunks) {
    for (const m of chunk.matchAll(/(?<![\w/.-])([a-z_]+)((?:\.(?:"[^"]+"|[a-z_][a-z0-9_]*))+)/g)) {
      const head = m[1];
      const parts = [head, ...[...m[2].matchAll(/\.("[^"]+"|[a-z_][a-z0-9_]*)/g)].map((p) => p[1].replace(/"/g, ""))];
      if (FILE_EXT.has(parts[parts.length - 1])) continue;
      if (SPEC15_SECTIONS.includes(head) || SLIPS.has(head)) out.push({ where: `${rel(path)}: ${m[0]}`, parts });
    }
    for (const m of chunk.matchAll(/\[\[?\s*([a-z_]+)((?:\.(?:"[^"]+"|[a-z_][\w-]*))*)\s*\]\]?/g)) {
      const head = m[1];
      const parts = [head, ...[...m[2].matchAll(/\.("[^"]+"|[a-z_][\w-]*)/g)].map((p) => p[1].replace(/"/g, ""))];
      if (SPEC15_SECTIONS.includes(head) || SLIPS.has(head)) out.push({ where: `${rel(path)}: ${m[0]}`, parts });
    }
  }
  return out;
}

/** The TOML examples in the docs, as text. */
function tomlBlocks(path: string): string[] {
  const text = readFileSync(path, "utf8");
  return [...text.matchAll(FENCE)].filter((m) => m[1].trim() === "toml").map((m) => m[2]);
}

/** Walk a parsed TOML document against the schema. */
function checkDoc(doc: Record<string, unknown>, fields: Fields, at: string[], bad: string[]): void {
  for (const [key, value] of Object.entries(doc)) {
    const f = fields[key];
    const here = [...at, key].join(".");
    if (!f) {
      bad.push(`${here} is not a config key`);
      continue;
    }
    const t = f.type;
    if (t.kind === "section" && value && typeof value === "object")
      checkDoc(value as Record<string, unknown>, t.fields, [...at, key], bad);
    if (t.kind === "map" && value && typeof value === "object") {
      for (const [name, entry] of Object.entries(value as Record<string, unknown>)) {
        if (entry && typeof entry === "object")
          checkDoc(entry as Record<string, unknown>, t.entry, [...at, key, name], bad);
      }
    }
    if (t.kind === "array" && Array.isArray(value)) {
      for (const entry of value)
        if (entry && typeof entry === "object") checkDoc(entry as Record<string, unknown>, t.entry, [...at, key], bad);
    }
  }
}

describe("config keys in deploy/ and docs/operations/", () => {
  test("the schema has every section config.toml may have", () => {
    for (const s of SPEC15_SECTIONS) expect(Object.keys(CONFIG_FIELDS)).toContain(s);
  });

  test("the scan finds the keys these pages are about", () => {
    const found = new Set(ALL.flatMap(keyMentions).map((k) => k.parts.slice(0, 2).join(".")));
    for (const key of [
      "intake.max_body_bytes",
      "intake.listen",
      "alerts.argv",
      "alerts.rate_limit_s",
      "retention.delivered_days",
      "limits.min_free_bytes",
    ]) {
      expect(found).toContain(key);
    }
  });

  test("every section and section.key named exists in CONFIG_FIELDS", () => {
    const bad: string[] = [];
    for (const k of ALL.flatMap(keyMentions)) {
      if (SLIPS.has(k.parts[0])) {
        bad.push(`${k.where}: no section "${k.parts[0]}" (did you mean "${SLIPS.get(k.parts[0])}"?)`);
        continue;
      }
      const problem = checkPath(k.parts);
      if (problem) bad.push(`${k.where}: ${problem}`);
    }
    expect(bad).toEqual([]);
  });

  test("every TOML example parses and uses only keys of the schema", () => {
    const bad: string[] = [];
    let blocks = 0;
    for (const file of DOCS) {
      for (const block of tomlBlocks(file)) {
        blocks++;
        let doc: Record<string, unknown>;
        try {
          doc = parseToml(block) as Record<string, unknown>;
        } catch (e) {
          bad.push(`${rel(file)}: ${(e as Error).message.split("\n")[0]}`);
          continue;
        }
        const problems: string[] = [];
        checkDoc(doc, CONFIG_FIELDS, [], problems);
        bad.push(...problems.map((p) => `${rel(file)}: ${p}`));
      }
    }
    expect(blocks).toBeGreaterThan(0);
    expect(bad).toEqual([]);
  });
});

// ---------------------------------------------------------------------------------------------
// The systemd units.

/** Directives of a unit file, comments left out: name -> every value, in order. */
function unit(name: string): Map<string, string[]> {
  const path = join(DEPLOY, "systemd", name);
  expect(existsSync(path)).toBe(true);
  const out = new Map<string, string[]>();
  for (const line of readFileSync(path, "utf8").split("\n")) {
    const m = /^([A-Za-z]+)=(.*)$/.exec(line.trim());
    if (m) out.set(m[1], [...(out.get(m[1]) ?? []), m[2]]);
  }
  return out;
}

const BIN = "/usr/local/bin/hookspool";

describe("deploy/systemd", () => {
  for (const [file, verb] of [
    ["hookspool-intake.service", "intake"],
    ["hookspool-dispatch.service", "dispatch"],
  ] as const) {
    test(`${file} checks, then runs hookspool ${verb}, as the hookspool user`, () => {
      const u = unit(file);
      expect(u.get("ExecStartPre")).toEqual([`${BIN} check`]);
      expect(u.get("ExecStart")).toEqual([`${BIN} ${verb}`]);
      expect(u.get("User")).toEqual(["hookspool"]);
      expect(u.get("Group")).toEqual(["hookspool"]);
      expect(u.get("Environment")).toContain("HOOKSPOOL_HOME=/var/lib/hookspool");
      expect(u.get("StateDirectory")).toEqual(["hookspool"]);
      expect(u.get("StateDirectoryMode")).toEqual(["0700"]);
      expect(u.get("UMask")).toEqual(["0077"]);
      expect(u.get("Restart")).toEqual(["on-failure"]);
      expect(u.get("KillSignal")).toEqual(["SIGTERM"]);
      expect(u.get("ReadWritePaths")).toContain("/var/lib/hookspool");
    });

    test(`${file} is hardened, and leaves Bun's JIT room to run`, () => {
      const u = unit(file);
      for (const [key, value] of [
        ["NoNewPrivileges", "true"],
        ["ProtectSystem", "strict"],
        ["ProtectHome", "read-only"],
        ["PrivateTmp", "true"],
        ["PrivateDevices", "true"],
        ["ProtectKernelTunables", "true"],
        ["ProtectKernelModules", "true"],
        ["ProtectKernelLogs", "true"],
        ["ProtectControlGroups", "true"],
        ["RestrictAddressFamilies", "AF_UNIX AF_INET AF_INET6"],
        ["RestrictNamespaces", "true"],
        ["LockPersonality", "true"],
        ["MemoryDenyWriteExecute", "false"],
        ["SystemCallArchitectures", "native"],
      ]) {
        expect(u.get(key)).toEqual([value]);
      }
    });
  }

  test("hookspool-sweep@.service runs hookspool sweep for the instance its env file names, the home writable", () => {
    const u = unit("hookspool-sweep@.service");
    // $SWEEP_ARGS unbraced, so systemd splits it into the kind's own flags.
    expect(u.get("ExecStart")).toEqual([`${BIN} sweep \${INSTANCE} $SWEEP_ARGS`]);
    expect(u.get("EnvironmentFile")).toEqual(["/etc/hookspool/sweep/%i.env"]);
    expect(u.get("User")).toEqual(["hookspool"]);
    expect(u.get("Type")).toEqual(["oneshot"]);
    expect(u.get("ProtectSystem")).toEqual(["strict"]);
    // A sweep that enqueues writes the spool, as the intake does; nothing else.
    expect(u.get("ReadWritePaths")).toEqual(["/var/lib/hookspool"]);
    expect(unit("hookspool-sweep@.timer").get("OnCalendar")).toEqual(["*:0/15"]);
  });

  test("a held dispatch.lock (exit 3) is not restarted in a loop; the intake has no such rule", () => {
    expect(unit("hookspool-dispatch.service").get("RestartPreventExitStatus")).toEqual(["3"]);
    expect(unit("hookspool-intake.service").get("RestartPreventExitStatus")).toBeUndefined();
  });

  test("the dispatcher's stop timeout outlasts a script destination's default timeout_s (300 s)", () => {
    const [stop] = unit("hookspool-dispatch.service").get("TimeoutStopSec") ?? ["0"];
    expect(Number(stop)).toBeGreaterThan(300);
  });
});

// ---------------------------------------------------------------------------------------------
// The reverse proxy examples against the intake's defaults.

function fieldDefault(section: string, key: string): unknown {
  const f = CONFIG_FIELDS[section].type;
  if (f.kind !== "section") throw new Error(`${section} is not a section`);
  return f.fields[key].default;
}
const MAX_BODY = fieldDefault("intake", "max_body_bytes") as number;
const LISTEN = fieldDefault("intake", "listen") as string;

function nginxSize(s: string): number {
  const m = /^(\d+)([kKmMgG]?)$/.exec(s);
  if (!m) throw new Error(`not an nginx size: ${s}`);
  return Number(m[1]) * ({ "": 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3 } as Record<string, number>)[m[2].toLowerCase()];
}

function caddySize(s: string): number {
  const m = /^(\d+)(B|KiB|MiB|GiB|KB|MB|GB)?$/.exec(s);
  if (!m) throw new Error(`not a Caddy size: ${s}`);
  const unit = { B: 1, KiB: 1024, MiB: 1024 ** 2, GiB: 1024 ** 3, KB: 1e3, MB: 1e6, GB: 1e9 }[m[2] ?? "B"] as number;
  return Number(m[1]) * unit;
}

/** A file without its comment lines. */
function directives(path: string): string {
  return readFileSync(path, "utf8")
    .split("\n")
    .filter((l) => !/^\s*#/.test(l))
    .join("\n");
}

describe("deploy/nginx.example.conf", () => {
  const conf = directives(join(DEPLOY, "nginx.example.conf"));

  test("buffers requests, and caps bodies at intake.max_body_bytes", () => {
    expect(conf).toMatch(/^\s*proxy_request_buffering on;/m);
    const sizes = [...conf.matchAll(/client_max_body_size\s+(\S+);/g)].map((m) => nginxSize(m[1]));
    expect(sizes.length).toBeGreaterThan(0);
    for (const s of sizes) expect(s).toBe(MAX_BODY);
  });

  test("proxies to the intake's default listen address and sets the route header and X-Forwarded-For", () => {
    expect(conf).toContain(`server ${LISTEN};`);
    expect(conf).toMatch(/proxy_set_header X-Hookspool-Route \S+;/);
    expect(conf).toMatch(/proxy_set_header X-Forwarded-For \S+;/);
    expect(conf).toMatch(/proxy_pass http:\/\/\S+\/hooks\/[a-z]/);
  });

  test("rate-limits with 429", () => {
    expect(conf).toMatch(/limit_req_zone \S+ zone=\S+/);
    expect(conf).toMatch(/limit_req zone=/);
    expect(conf).toMatch(/limit_req_status 429;/);
  });

  test("never logs a query string", () => {
    const formats = [...conf.matchAll(/log_format\s+(\S+)([^;]*);/g)];
    expect(formats.length).toBeGreaterThan(0);
    for (const [, , body] of formats) expect(body).not.toMatch(/\$(request|request_uri|args|query_string|arg_\w+)\b/);
    const names = new Set(formats.map((f) => f[1]));
    const logs = [...conf.matchAll(/access_log\s+(\S+)(?:\s+(\S+))?;/g)];
    expect(logs.length).toBeGreaterThan(0);
    for (const [, target, format] of logs)
      if (target !== "off") expect(names).toContain(format?.replace(/;$/, "") ?? "combined");
  });

  test("keeps /healthz and /metrics inside", () => {
    for (const path of ["/healthz", "/metrics"]) {
      const block = new RegExp(`location = ${path} \\{([^}]*)\\}`).exec(conf);
      expect(block).not.toBeNull();
      expect(block?.[1]).toMatch(/allow 127\.0\.0\.1;/);
      expect(block?.[1]).toMatch(/deny all;/);
    }
  });
});

describe("deploy/Caddyfile.example", () => {
  const conf = directives(join(DEPLOY, "Caddyfile.example"));

  test("caps bodies at intake.max_body_bytes and buffers every accepted body whole", () => {
    const max = /max_size\s+(\S+)/.exec(conf);
    expect(max).not.toBeNull();
    expect(caddySize(max?.[1] ?? "")).toBe(MAX_BODY);
    const buffers = [...conf.matchAll(/request_buffers\s+(\S+)/g)].map((m) => caddySize(m[1]));
    expect(buffers.length).toBeGreaterThan(0);
    for (const b of buffers) expect(b).toBeGreaterThan(MAX_BODY);
  });

  test("proxies to the intake's default listen address, maps paths to sources, keeps /healthz inside", () => {
    expect(conf).toContain(`reverse_proxy ${LISTEN}`);
    expect(conf).toMatch(/header_up X-Hookspool-Route \S+/);
    expect(conf).toMatch(/^\s*@\w+ path \/\S+$/m);
    expect(conf).toMatch(/rewrite \* \/hooks\/[a-z]/);
    expect(conf).toMatch(/path \/healthz \/metrics\s+remote_ip 127\.0\.0\.1/);
  });

  test("says that rate limiting needs a plugin", () => {
    expect(readFileSync(join(DEPLOY, "Caddyfile.example"), "utf8")).toMatch(/caddy-ratelimit/);
  });
});

// ---------------------------------------------------------------------------------------------

describe("docs/operations links", () => {
  test("every relative link points at a file that exists", () => {
    const bad: string[] = [];
    for (const file of DOCS) {
      for (const m of readFileSync(file, "utf8").matchAll(/\]\(([^)#\s]+)(?:#[^)]*)?\)/g)) {
        const target = m[1];
        if (/^[a-z]+:/.test(target)) continue;
        if (!existsSync(resolve(dirname(file), target))) bad.push(`${rel(file)}: ${target}`);
      }
    }
    expect(bad).toEqual([]);
  });

  test("the index lists every page", () => {
    const index = readFileSync(join(OPS, "README.md"), "utf8");
    for (const file of DOCS) if (!file.endsWith("README.md")) expect(index).toContain(`(${relative(OPS, file)})`);
  });
});
