// hookspool check: load the config as strictly as an operator's pre-flight should, then run
// every rule over it. Each problem names the key to fix and how; nothing here ever prints a
// secret's value.
import { readFileSync, statSync, type Stats } from "node:fs";
import { dirname, isAbsolute, join, resolve } from "node:path";
import { parse as parseToml } from "smol-toml";
import { codePathProblem } from "../bobbin/code-path.ts";
import { BUILTIN_PREFIX, builtinModule, readBobbinManifest } from "../bobbin/registry.ts";
import { isHookspoolError } from "../errors.ts";
import { isPublic, NON_LOOPBACK_HINT, readListen } from "../config/listen.ts";
import { loadSources } from "../config/sources.ts";
import { checkStore } from "../store/open.ts";
import { destinationPaces, type PluginFacts, routeProblems } from "./routes.ts";
import { ConfigError, DEFAULT_HOME, type Env, expandPath, loadConfig, parseConfig } from "../config/load.ts";
import { isTable, quoteKey } from "../config/parse.ts";
import { userProblems } from "../config/provenance.ts";
import { describeSecretRef, resolveSecret } from "../config/secrets.ts";
import type { Config, ConfigProblem, LoadedConfig, Paths, SecretRef } from "../config/types.ts";
import type { Pace } from "../delivery.ts";

export interface CheckDeps {
  /** The environment the services run with: { env } secret refs, HOME for ~. */
  env: Env;
  cwd: string;
  /** The user hookspool runs as: code loaded by path must be owned by root or this uid. */
  uid: number;
  /** Leave out the database's rules (the dispatcher runs its own quick_check at start). */
  skipDatabase?: boolean;
}

export interface CheckInput {
  config: Config;
  paths: Paths;
  /** The TOML document as written, without defaults: which keys the operator set. */
  raw: Record<string, unknown>;
}

export interface CheckFileOptions {
  /** --home, --config */
  home?: string;
  config?: string;
  env?: Env;
  cwd?: string;
  uid?: number;
  skipDatabase?: boolean;
}

export interface CheckReport {
  /** The config file checked (it may not exist), or null when none is at the default place. */
  file: string | null;
  /** Errors first, then warnings. */
  problems: ConfigProblem[];
  /**
   * Whether each webhook source's sender retries a failed delivery (null: not said). A sender
   * that does not retry loses what hookspool could not take, unless a sweep recovers it.
   */
  senders: Record<string, boolean | null>;
  /** Each destination's rate and where it comes from (null: not paced), as the dispatcher will read it. */
  paces: Record<string, Pace | null>;
}

const problem = (level: ConfigProblem["level"], key: string, message: string, hint?: string): ConfigProblem => ({
  level,
  key,
  message,
  hint,
});

/**
 * Check the config a command with these flags would load. Loading problems (TOML, types,
 * unknown keys, validate.ts's rules) are all reported; the other rules need a config that
 * loads, so they run only then.
 */
export async function checkConfigFile(opts: CheckFileOptions = {}): Promise<CheckReport> {
  const env = opts.env ?? process.env;
  const cwd = opts.cwd ?? process.cwd();
  const deps: CheckDeps = { env, cwd, uid: opts.uid ?? process.getuid?.() ?? 0, skipDatabase: opts.skipDatabase };
  let loaded: LoadedConfig;
  try {
    loaded = loadConfig({ home: opts.home, config: opts.config, env, cwd });
  } catch (e) {
    if (e instanceof ConfigError)
      return { file: e.file ?? null, problems: finish(everyLoadProblem(e)), senders: {}, paces: {} };
    if (isHookspoolError(e))
      return {
        file: e.file ?? null,
        problems: [problem("error", e.key ?? e.file ?? "config", e.message, e.hint)],
        senders: {},
        paces: {},
      };
    throw e;
  }
  const file = loaded.paths.config;
  const raw = file ? rawDocument(file) : {};
  // The services would run on defaults alone, which is never what an operator set up: say
  // where the file was looked for, since that is usually the mistake (--home, HOOKSPOOL_HOME).
  const looked = join(resolve(cwd, opts.home ?? env.HOOKSPOOL_HOME ?? DEFAULT_HOME), "config.toml");
  const notes = file
    ? []
    : [
        problem(
          "error",
          "config",
          `no config file at ${looked}`,
          "hookspool init writes a starter config there; or point --home, --config or HOOKSPOOL_CONFIG at yours",
        ),
      ];
  const senders: Record<string, boolean | null> = {};
  const rules = await checkConfig({ config: loaded.config, paths: loaded.paths, raw }, deps, senders);
  return {
    file: file ?? opts.config ?? null,
    problems: finish([...loaded.problems.map(relevel), ...notes, ...rules]),
    senders,
    paces: destinationPaces(loaded.config, env),
  };
}

/** Unknown keys are errors in check (warnings at run time); other warnings stay warnings. */
function relevel(p: ConfigProblem): ConfigProblem {
  return p.level === "warning" && p.message === "unknown key" ? { ...p, level: "error" } : p;
}

/**
 * A failed load lists only its errors. Loading again with strict: true lists the warnings too
 * (escalated); the ones the first load did not call errors are put back to warnings.
 */
function everyLoadProblem(e: ConfigError): ConfigProblem[] {
  const errors = new Set(e.problems.map((p) => `${p.key}\n${p.message}`));
  let all = e.problems;
  try {
    parseConfig(readFileSync(e.file as string, "utf8"), e.file as string, { strict: true });
  } catch (strict) {
    if (strict instanceof ConfigError) all = strict.problems;
  }
  return all.map((p) => (errors.has(`${p.key}\n${p.message}`) ? p : relevel({ ...p, level: "warning" })));
}

function rawDocument(file: string): Record<string, unknown> {
  try {
    const doc = parseToml(readFileSync(file, "utf8"));
    return isTable(doc) ? doc : {};
  } catch {
    return {};
  }
}

/** One problem per key and message (the worse level wins), errors first, in the order found. */
function finish(problems: ConfigProblem[]): ConfigProblem[] {
  const seen = new Map<string, ConfigProblem>();
  for (const p of problems) {
    const id = `${p.key}\n${p.message}`;
    const had = seen.get(id);
    if (!had) seen.set(id, p);
    else if (had.level === "warning" && p.level === "error")
      seen.set(id, { ...had, level: "error", hint: had.hint ?? p.hint });
  }
  const all = [...seen.values()];
  return [...all.filter((p) => p.level === "error"), ...all.filter((p) => p.level === "warning")];
}

/** Every check rule over a loaded config. Reads files and the database; changes nothing. */
export async function checkConfig(
  input: CheckInput,
  deps: CheckDeps,
  senders: Record<string, boolean | null> = {},
): Promise<ConfigProblem[]> {
  const { config, paths } = input;
  const configDir = paths.config ? dirname(paths.config) : deps.cwd;
  const code = codePathRules(config, configDir, deps);
  const plugins = await loadPlugins(config, configDir, paths.config ?? "config.toml", code.unsafe, deps);
  // Config's word on the sender, else the source plugin's (a template's sender_retries).
  for (const [name, src] of Object.entries(config.sources)) {
    if (src.kind === "poll" || (!src.module && !src.template)) continue;
    senders[name] = src.sender_retries ?? plugins.facts.get(name)?.senderRetries ?? null;
  }
  // The rules name the expanded tables; the operator wrote the instances.
  return finish(
    userProblems(config, [
      ...code.problems,
      ...plugins.problems,
      ...secretRules(config, deps),
      ...routeProblems(config, plugins.facts, deps),
      ...intakeRules(config, input.raw),
      // Modes first: opening the database below creates and removes a -wal of its own.
      ...spoolModeRules(paths),
      ...processorStateRules(config, deps),
      ...processorModuleRules(config, deps),
      ...(deps.skipDatabase ? [] : await checkStore(config, { spoolFile: paths.spoolFile, env: deps.env })),
    ]),
  );
}

// ---------------------------------------------------------------------------------------------
// Plugins and code loaded by path

function statOrNull(path: string): Stats | null {
  try {
    return statSync(path);
  } catch {
    return null;
  }
}

function codePathRules(
  config: Config,
  configDir: string,
  deps: CheckDeps,
): { problems: ConfigProblem[]; unsafe: Set<string> } {
  const problems: ConfigProblem[] = [];
  const unsafe = new Set<string>();
  for (const [name, src] of Object.entries(config.sources)) {
    // A built-in bobbin's code is compiled into the binary, not loaded by path.
    if (!src.module || src.module.startsWith("builtin:")) continue;
    // A relative module is resolved against the config file's directory, as the intake does.
    const path = isAbsolute(src.module) ? src.module : resolve(configDir, src.module);
    const bad = codePathProblem(path, "file", deps.uid);
    if (bad) {
      problems.push(problem("error", `sources.${quoteKey(name)}.module`, bad.message, bad.hint));
      unsafe.add(name);
    }
  }
  config.spool.bobbin_path.forEach((entry, i) => {
    const key = `spool.bobbin_path[${i}]`;
    const path = entry.startsWith("~") ? expandPath(entry, deps.cwd, deps.env) : entry;
    if (!isAbsolute(path))
      return problems.push(
        problem("error", key, `${entry} is not an absolute path`, "code is loaded by absolute path only"),
      );
    const bad = codePathProblem(path, "directory", deps.uid);
    if (bad) problems.push(problem("error", key, bad.message, bad.hint));
  });
  return { problems, unsafe };
}

/** Import every plugin, one source at a time so one broken module does not hide the others. */
async function loadPlugins(
  config: Config,
  configDir: string,
  file: string,
  skip: Set<string>,
  deps: CheckDeps,
): Promise<{ problems: ConfigProblem[]; facts: Map<string, PluginFacts> }> {
  const problems: ConfigProblem[] = [];
  const facts = new Map<string, PluginFacts>();
  for (const [name, src] of Object.entries(config.sources)) {
    if (skip.has(name)) continue;
    try {
      const loaded = await loadSources({ ...config, sources: { [name]: src } }, { configDir, env: deps.env, file });
      const source = loaded.get(name);
      const plugin = source?.plugin;
      if (!plugin) continue;
      facts.set(name, {
        keepHeaders: source?.keepHeaders.length ?? 0,
        action: typeof plugin.action === "string" ? plugin.action : undefined,
        dynamicAction: typeof plugin.action === "function",
        span: plugin.span,
        eventHeader: plugin.eventHeader,
        senderRetries: plugin.senderRetries,
      });
    } catch (e) {
      if (!(e instanceof ConfigError)) throw e;
      problems.push(...e.problems.map((p) => ({ ...p, level: "error" as const })));
    }
  }
  return { problems, facts };
}

// ---------------------------------------------------------------------------------------------
// Secrets

/** A secret reference, or (ref null) a script's env_file, which holds secrets too. */
interface SecretUse {
  key: string;
  ref: SecretRef | null;
  path?: string;
  resolve: boolean;
  /** A secret the source learns from its handshake: no file yet is a warning, not an error. */
  learned?: string;
}

function secretUses(config: Config): SecretUse[] {
  const out: SecretUse[] = [];
  const learns = (source: string, secret: string) =>
    secret === "secret" && typeof config.sources[source]?.template?.learn === "string" ? source : undefined;
  for (const [name, src] of Object.entries(config.sources)) {
    for (const [s, ref] of Object.entries(src.secrets ?? {}))
      out.push({
        key: `sources.${quoteKey(name)}.secrets.${quoteKey(s)}`,
        ref,
        resolve: true,
        learned: learns(name, s),
      });
  }
  for (const [name, b] of Object.entries(config.bobbins)) {
    for (const [s, ref] of Object.entries(b.secrets ?? {}))
      out.push({
        key: `bobbins.${quoteKey(name)}.secrets.${quoteKey(s)}`,
        ref,
        resolve: true,
        learned: learns(name, s),
      });
  }
  // A destination's check() resolves its own secrets (and knows whsec_); here only mode and env.
  for (const [name, d] of Object.entries(config.destinations)) {
    const key = `destinations.${quoteKey(name)}`;
    if (d.secret) out.push({ key: `${key}.secret`, ref: d.secret, resolve: false });
    const previous =
      d.secret_previous === undefined ? [] : Array.isArray(d.secret_previous) ? d.secret_previous : [d.secret_previous];
    previous.forEach((ref, i) =>
      out.push({
        key: Array.isArray(d.secret_previous) ? `${key}.secret_previous[${i}]` : `${key}.secret_previous`,
        ref,
        resolve: false,
      }),
    );
    if (d.env_file) out.push({ key: `${key}.env_file`, ref: null, path: d.env_file, resolve: false });
  }
  return out;
}

function readableNonEmpty(path: string): boolean {
  try {
    return readFileSync(path, "utf8").trim() !== "";
  } catch {
    return false;
  }
}

/** Every reference resolves (readable, non-empty); files are private; env refs do not rotate. */
function secretRules(config: Config, deps: CheckDeps): ConfigProblem[] {
  const out: ConfigProblem[] = [];
  for (const { key, ref, path: envFile, resolve: read, learned } of secretUses(config)) {
    // Not learned yet: the intake must start (and reload) to take the handshake that teaches it.
    if (learned && ref && "file" in ref && !readableNonEmpty(ref.file)) {
      out.push(
        problem(
          "warning",
          key,
          `no secret learned yet in ${ref.file}: events are answered 503 until the handshake comes`,
          `hookspool source arm ${learned}, then create the webhook at the provider`,
        ),
      );
      continue;
    }
    if (read && ref) {
      try {
        resolveSecret(ref, deps.env);
      } catch (e) {
        // resolveSecret's message names the reference, never the value.
        if (!isHookspoolError(e)) throw e;
        out.push(problem("error", key, e.message, e.hint));
        continue;
      }
    }
    if (ref && "env" in ref) {
      out.push(
        problem(
          "warning",
          key,
          `${describeSecretRef(ref)}: env references do not rotate without a restart`,
          "use { file = ... } or { env_file = ..., key = ... } to rotate without a restart",
        ),
      );
      continue;
    }
    const path = ref === null ? (envFile as string) : "file" in ref ? ref.file : ref.env_file;
    const st = statOrNull(path);
    if (st && st.mode & 0o077) {
      out.push(
        problem(
          "warning",
          key,
          `${path} is readable by group/other (mode ${(st.mode & 0o777).toString(8).padStart(4, "0")})`,
          `chmod 600 ${path}`,
        ),
      );
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// The intake: loopback only; intake.threads is accepted and ignored

function intakeRules(config: Config, raw: Record<string, unknown>): ConfigProblem[] {
  const out: ConfigProblem[] = [];
  const { listen, allow_non_loopback } = config.intake;
  try {
    const l = readListen(listen);
    if (isPublic(l)) {
      if (allow_non_loopback)
        out.push(
          problem(
            "warning",
            "intake.listen",
            `${l.hostname} is not a loopback address: the reverse proxy should own the network`,
            "bind 127.0.0.1 behind the proxy",
          ),
        );
      else
        out.push(
          problem(
            "error",
            "intake.listen",
            `${l.hostname} is not a loopback address; the intake refuses to bind it`,
            NON_LOOPBACK_HINT,
          ),
        );
    }
  } catch (e) {
    if (!isHookspoolError(e)) throw e;
    out.push(problem("error", "intake.listen", e.message));
  }
  const intake = raw.intake;
  if (isTable(intake) && Object.hasOwn(intake, "threads")) {
    out.push(
      problem(
        "warning",
        "intake.threads",
        "is accepted and ignored: Bun serves every request on one event loop",
        "remove the key",
      ),
    );
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// The state directory's modes: the spool holds every payload, so only hookspool may read it

/**
 * A bobbin processor's state directory holds OAuth access tokens and rotated refresh tokens in
 * clear text: once it exists it must be mode 0700 and the service user's. (A missing one is
 * created so at the first batch.)
 */
function processorStateRules(config: Config, deps: CheckDeps): ConfigProblem[] {
  const out: ConfigProblem[] = [];
  for (const d of Object.values(config.destinations)) {
    if (d.processor === undefined || d.state_dir === undefined) continue;
    const st = statOrNull(d.state_dir);
    if (st === null) continue;
    const key = `bobbins.${quoteKey(d.processor)}.state_dir`;
    if (!st.isDirectory()) out.push(problem("error", key, `${d.state_dir} is not a directory`));
    else if (st.mode & 0o077)
      out.push(
        problem(
          "error",
          key,
          `${d.state_dir} is open to group/other (mode ${(st.mode & 0o777).toString(8).padStart(4, "0")}); the processor keeps tokens there`,
          `chmod 700 ${d.state_dir}`,
        ),
      );
    else if (st.uid !== deps.uid)
      out.push(
        problem(
          "error",
          key,
          `${d.state_dir} is owned by uid ${st.uid}, not the user hookspool runs as (uid ${deps.uid})`,
          `chown <the hookspool user> ${d.state_dir}`,
        ),
      );
  }
  return out;
}

/**
 * A bobbin instance's processor must be there to run: compiled in, or a file under its private
 * bobbin's directory that the owner/mode rule lets the runtime load.
 */
function processorModuleRules(config: Config, deps: CheckDeps): ConfigProblem[] {
  const out: ConfigProblem[] = [];
  for (const d of Object.values(config.destinations)) {
    const env = d.env ?? {};
    if (d.processor === undefined || !env.HOOKSPOOL_BOBBIN_DIR) continue;
    const key = `bobbins.${quoteKey(d.processor)}`;
    const dir = env.HOOKSPOOL_BOBBIN_DIR;
    const manifest = readBobbinManifest(dir);
    const module = manifest?.processor?.module ?? manifest?.poll?.module;
    if (!module) continue;
    if (dir.startsWith(BUILTIN_PREFIX)) {
      if (builtinModule(`${dir}/${module}`) === undefined)
        out.push(problem("error", key, `the built-in ${env.HOOKSPOOL_BOBBIN} has no ${module} module`));
      continue;
    }
    const bad = codePathProblem(join(dir, `${module}.ts`), "file", deps.uid);
    if (bad) out.push(problem("error", key, `its processor: ${bad.message}`, bad.hint));
  }
  return out;
}

/** Warn about a home directory not 0700, or a spool database (or its -wal) not 0600. */
function spoolModeRules(paths: Paths): ConfigProblem[] {
  const out: ConfigProblem[] = [];
  const mode = (st: Stats) => (st.mode & 0o777).toString(8).padStart(4, "0");
  const home = statOrNull(paths.home);
  if (home?.isDirectory() && home.mode & 0o077) {
    out.push(
      problem(
        "warning",
        "spool.home",
        `${paths.home} is open to group/other (mode ${mode(home)}); it holds the spool`,
        `chmod 700 ${paths.home}`,
      ),
    );
  }
  for (const file of [paths.spoolFile, `${paths.spoolFile}-wal`]) {
    const st = statOrNull(file);
    if (st?.isFile() && st.mode & 0o077) {
      out.push(
        problem(
          "warning",
          "spool.db",
          `${file} is open to group/other (mode ${mode(st)}); it holds every payload`,
          `chmod 600 ${file}`,
        ),
      );
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// The database: check is the intake's ExecStartPre, so corruption stops the start
