// hookspool check: load the config as strictly as an operator's pre-flight should, then run
// every rule over it. Each problem names the key to fix and how; nothing here ever prints a
// secret's value.
import { processClock } from "../clock.ts";
import { readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { parse as parseToml } from "smol-toml";
import { ConfigError, DEFAULT_HOME, type Env, loadConfig, parseConfig } from "../config/load.ts";
import { isTable } from "../config/parse.ts";
import { userProblems } from "../config/provenance.ts";
import type { Config, ConfigProblem, LoadedConfig, Paths } from "../config/types.ts";
import type { Pace } from "../delivery.ts";
import { isHookspoolError } from "../errors.ts";
import { checkStore } from "../store/open.ts";
import { intakeRules } from "./intake-rules.ts";
import { processorStateRules, spoolModeRules } from "./mode-rules.ts";
import { codePathRules, loadPlugins, processorModuleRules } from "./plugins.ts";
import { problem } from "./problem.ts";
import { destinationPaces, routeProblems } from "./routes.ts";
import { secretRules } from "./secret-rules.ts";

export interface CheckDeps {
  /** The environment the services run with: { env } secret refs, HOME for ~. */
  env: Env;
  cwd: string;
  /** The user hookspool runs as: code loaded by path must be owned by root or this uid. */
  uid: number;
  /** Leave out the database's rules (the dispatcher runs its own quick_check at start). */
  skipDatabase?: boolean;
  /** Now, for a rotation's entries past their until (the process clock when absent). */
  now?: number;
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

/**
 * Check the config a command with these flags would load. Loading problems (TOML, types,
 * unknown keys, validate.ts's rules) are all reported; the other rules need a config that
 * loads, so they run only then.
 */
export async function checkConfigFile(opts: CheckFileOptions = {}): Promise<CheckReport> {
  const env = opts.env ?? process.env;
  const cwd = opts.cwd ?? process.cwd();
  const deps: CheckDeps = {
    env,
    cwd,
    uid: opts.uid ?? process.getuid?.() ?? 0,
    skipDatabase: opts.skipDatabase,
    now: processClock(env).now(),
  };
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
      // The database: check is the intake's ExecStartPre, so corruption stops the start.
      ...(deps.skipDatabase ? [] : await checkStore(config, { spoolFile: paths.spoolFile, env: deps.env })),
    ]),
  );
}
