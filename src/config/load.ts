// Loading config.toml: TOML via smol-toml, defaults from the schema, and path precedence
// (flag -> env -> config -> default).
import { existsSync, readFileSync, statSync } from "node:fs";
import { homedir } from "node:os";
import { dirname, isAbsolute, join, resolve } from "node:path";
import { parse as parseToml, TomlError } from "smol-toml";
import { findBobbins } from "../bobbin/registry.ts";
import { HookspoolError } from "../errors.ts";
import { expandBobbins } from "./expand.ts";
import { Problems, isTable, parseFields } from "./parse.ts";
import { BOBBIN_INSTANCE_FIELDS, CONFIG_FIELDS, DEFAULT_SPANS } from "./schema.ts";
import type { Config, ConfigProblem, LoadedConfig, Paths, SecretRef, SourceSecret } from "./types.ts";
import { validateConfig, validateStale } from "./validate.ts";

export const DEFAULT_HOME = "/var/lib/hookspool";

export type Env = Record<string, string | undefined>;

export interface LoadOptions {
  /** --home */
  home?: string;
  /** --config */
  config?: string;
  env?: Env;
  cwd?: string;
  /** `check`: unknown keys are errors, not warnings. */
  strict?: boolean;
}

/** A config error: the first problem as the message, every problem in `problems`. */
export class ConfigError extends HookspoolError {
  readonly problems: ConfigProblem[];
  constructor(file: string, problems: ConfigProblem[]) {
    const first = problems[0];
    super("E_CONFIG", first.message, { file, key: first.key, hint: first.hint });
    this.problems = problems;
  }
}

/** Expand a leading ~ and make a path absolute against `base`. */
export function expandPath(p: string, base: string, env: Env = process.env): string {
  let out = p;
  if (out === "~" || out.startsWith("~/")) out = join(env.HOME || homedir(), out.slice(1));
  return isAbsolute(out) ? out : resolve(base, out);
}

/**
 * Parse config text (already read from `file`). Throws ConfigError on any error; returns
 * the config and its warnings. Pure apart from reading nothing: paths are left as written.
 */
export interface ParseOptions {
  strict?: boolean;
  /** The state directory the config will run with (default: its spool.home, relative to the file). */
  home?: (config: Config) => string;
  env?: Env;
}

export function parseConfig(
  text: string,
  file: string,
  opts: ParseOptions = {},
): { config: Config; problems: ConfigProblem[] } {
  let doc: unknown;
  try {
    doc = parseToml(text);
  } catch (e) {
    if (e instanceof TomlError) {
      // The library's message quotes the offending line; keep only its first line so a
      // value typed into the wrong place is not echoed into logs.
      const what = e.message.split("\n")[0];
      throw new ConfigError(file, [
        { level: "error", key: `line ${e.line}, column ${e.column}`, message: `invalid TOML: ${what}` },
      ]);
    }
    throw e;
  }
  const p = new Problems();
  if (!isTable(doc))
    throw new ConfigError(file, [{ level: "error", key: "(top)", message: "expected a TOML document" }]);
  rejectDottedBobbins(doc, p);
  const config = parseFields(doc, CONFIG_FIELDS, "", p) as unknown as Config;
  // A copy: a loaded config must never be able to change the presets of the next one.
  config.spans = { ...structuredClone(DEFAULT_SPANS), ...config.spans };
  if (p.errors.length === 0) {
    validateConfig(config, p);
    const home = opts.home ? opts.home(config) : expandPath(config.spool.home, dirname(resolve(file)), opts.env);
    expandInstances(config, p, home);
    validateStale(config, p);
  }
  const problems = opts.strict ? p.list.map((x) => ({ ...x, level: "error" as const })) : p.list;
  const errors = problems.filter((x) => x.level === "error");
  if (errors.length > 0) throw new ConfigError(file, errors);
  return { config, problems };
}

/**
 * Expand the [bobbins.*] instances, with the bobbins this build carries and those under
 * spool.bobbin_path (read again on every load). A broken bobbin no instance uses is a warning.
 */
function expandInstances(config: Config, p: Problems, home: string): void {
  const { bobbins, problems } = findBobbins({
    bobbinPath: config.spool.bobbin_path.filter((d) => isAbsolute(d)),
    presets: Object.keys(config.spans),
  });
  expandBobbins(config, p, { bobbins, bobbinProblems: problems, home });
  const used = new Set(Object.values(config.bobbins).map((b) => b.bobbin?.replace(".", "/")));
  for (const b of problems) {
    if ([...used].some((u) => u !== undefined && b.file.includes(`${u}/bobbin.toml`))) continue;
    p.warn("spool.bobbin_path", `${b.file}: ${b.key ? `${b.key}: ` : ""}${b.message}`, b.hint);
  }
}

/** [bobbins.google.gmail] parses as a nested table; say what to write instead. */
function rejectDottedBobbins(doc: Record<string, unknown>, p: Problems): void {
  const bobbins = doc.bobbins;
  if (!isTable(bobbins)) return;
  for (const [vendor, entry] of Object.entries(bobbins)) {
    if (!isTable(entry) || "bobbin" in entry) continue;
    const product = Object.keys(entry).find((k) => !(k in BOBBIN_INSTANCE_FIELDS) && isTable(entry[k]));
    if (product === undefined) continue;
    p.error(
      `bobbins.${vendor}.${product}`,
      `[bobbins.${vendor}.${product}] is read by TOML as a nested table`,
      `write [bobbins.${product}] with bobbin = "${vendor}.${product}"`,
    );
    delete bobbins[vendor];
  }
}

/** Resolve where home, the config file and the database are (flag -> env -> config -> default). */
function resolveConfigFile(
  opts: LoadOptions,
  env: Env,
  cwd: string,
): { file: string; explicit: boolean; homeGuess: string } {
  const homeGuess = opts.home ?? env.HOOKSPOOL_HOME ?? DEFAULT_HOME;
  if (opts.config) return { file: resolve(cwd, opts.config), explicit: true, homeGuess };
  if (env.HOOKSPOOL_CONFIG) return { file: resolve(cwd, env.HOOKSPOOL_CONFIG), explicit: true, homeGuess };
  return { file: join(resolve(cwd, homeGuess), "config.toml"), explicit: false, homeGuess };
}

/**
 * Load the config for a command. A missing config file is an error when it was named
 * (--config, HOOKSPOOL_CONFIG); at the default place it means "all defaults".
 */
export function loadConfig(opts: LoadOptions = {}): LoadedConfig {
  const env = opts.env ?? process.env;
  const cwd = opts.cwd ?? process.cwd();
  const { file, explicit } = resolveConfigFile(opts, env, cwd);
  let text = "";
  let mtimeMs: number | null = null;
  let found = false;
  if (existsSync(file)) {
    try {
      text = readFileSync(file, "utf8");
      mtimeMs = statSync(file).mtimeMs;
      found = true;
    } catch (e) {
      throw new HookspoolError(
        "E_CONFIG",
        `cannot read the config file (${(e as NodeJS.ErrnoException).code ?? "error"})`,
        { file },
      );
    }
  } else if (explicit) {
    throw new HookspoolError("E_CONFIG", "no config file here", {
      file,
      hint: "check --config / HOOKSPOOL_CONFIG, or run hookspool init",
    });
  }
  const configDir = found ? dirname(file) : cwd;
  const homeOf = (c: Config) => resolvePaths(c, { ...opts, env, cwd }, found ? file : null).home;
  const { config, problems } = parseConfig(text, file, { strict: opts.strict, home: homeOf, env });
  // HOOKSPOOL_BACKEND overrides spool.backend (a unit file can move a host without editing the config).
  const backend = env.HOOKSPOOL_BACKEND;
  if (backend !== undefined && backend !== "") {
    // Its value is not repeated: a URL pasted here by mistake may hold a password.
    if (backend !== "sqlite" && backend !== "postgres")
      throw new HookspoolError("E_CONFIG", "HOOKSPOOL_BACKEND must be sqlite or postgres", { key: "spool.backend" });
    config.spool.backend = backend;
  }
  anchorPaths(config, configDir, env);
  const paths = resolvePaths(config, { ...opts, env, cwd }, found ? file : null);
  return { config, paths, problems, mtimeMs };
}

/** A path of config, made absolute: ~ is HOME, anything else relative is relative to `dir`. */
function anchored<T extends string | undefined>(p: T, dir: string, env: Env): T {
  return (p === undefined ? p : expandPath(p, dir, env)) as T;
}

function anchorRef(ref: SecretRef, dir: string, env: Env): SecretRef {
  if ("file" in ref) return { file: anchored(ref.file, dir, env) };
  if ("env_file" in ref) return { env_file: anchored(ref.env_file, dir, env), key: ref.key };
  return ref;
}

/** A command's program, when it is a path ("scripts/run.sh"), not a name looked up on PATH. */
function anchorProgram(argv: string[] | undefined, dir: string, env: Env): string[] | undefined {
  if (!argv?.length || !argv[0].includes("/")) return argv;
  return [anchored(argv[0], dir, env), ...argv.slice(1)];
}

/**
 * Every file path in a config is relative to the directory of config.toml (not to wherever the
 * process happens to start), so a home that moves, with its config, keeps working: secret
 * references, env files, a script's cwd, program and state_dir, the Hermes subscriptions file,
 * code modules, and the alert command. ~ is the user's home directory.
 */
export function anchorPaths(config: Config, dir: string, env: Env): void {
  const anchor = (r: SourceSecret): SourceSecret =>
    Array.isArray(r)
      ? r.map((x) => ({ ...anchorRef(x, dir, env), ...(x.until !== undefined ? { until: x.until } : {}) }))
      : anchorRef(r, dir, env);
  const refs = (m: Record<string, SourceSecret> | undefined) =>
    m ? Object.fromEntries(Object.entries(m).map(([k, r]) => [k, anchor(r)])) : m;
  if (config.spool.url) config.spool.url = anchorRef(config.spool.url, dir, env);
  for (const src of Object.values(config.sources)) {
    src.secrets = refs(src.secrets);
    if (src.pull) src.pull.token = anchorRef(src.pull.token, dir, env);
    // A built-in bobbin's code is compiled in, not a path.
    if (!src.module?.startsWith("builtin:")) src.module = anchored(src.module, dir, env);
  }
  for (const b of Object.values(config.bobbins)) {
    b.secrets = refs(b.secrets);
    b.state_dir = anchored(b.state_dir, dir, env);
  }
  for (const d of Object.values(config.destinations)) {
    if (d.secret) d.secret = anchorRef(d.secret, dir, env);
    // A pull destination's tokens.
    if (d.token)
      d.token = Array.isArray(d.token) ? d.token.map((r) => anchorRef(r, dir, env)) : anchorRef(d.token, dir, env);
    if (d.secret_previous)
      d.secret_previous = Array.isArray(d.secret_previous)
        ? d.secret_previous.map((r) => anchorRef(r, dir, env))
        : anchorRef(d.secret_previous, dir, env);
    d.env_file = anchored(d.env_file, dir, env);
    d.cwd = anchored(d.cwd, dir, env);
    d.state_dir = anchored(d.state_dir, dir, env);
    // A relative program runs from the script's cwd, as it would from a shell there.
    d.argv = anchorProgram(d.argv, d.cwd ?? dir, env);
  }
  config.hermes.subscriptions_path = anchored(config.hermes.subscriptions_path, dir, env);
  config.alerts.argv = anchorProgram(config.alerts.argv, dir, env) ?? config.alerts.argv;
}

export function resolvePaths(
  config: Config,
  opts: LoadOptions & { env: Env; cwd: string },
  file: string | null,
): Paths {
  const { env, cwd } = opts;
  const configDir = file ? dirname(file) : cwd;
  const home = opts.home
    ? resolve(cwd, opts.home)
    : env.HOOKSPOOL_HOME
      ? resolve(cwd, env.HOOKSPOOL_HOME)
      : expandPath(config.spool.home, configDir, env);
  const db = env.HOOKSPOOL_DB ? resolve(cwd, env.HOOKSPOOL_DB) : expandPath(config.spool.db, home, env);
  // The lock protects the database, so it lives beside it (the state directory by default).
  return { home, config: file, spoolFile: db, lock: join(dirname(db), "dispatch.lock") };
}
