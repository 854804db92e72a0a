// What every command gets: its I/O, the global flags, the clock; and the config's store, opened through the factory.
import { readFileSync, statSync } from "node:fs";
import { dirname, join } from "node:path";
import { parse as parseToml, stringify as stringifyToml } from "smol-toml";
import { type Clock, processClock } from "../clock.ts";
import { HookspoolError } from "../errors.ts";
import { anchorPaths, ConfigError, type Env, loadConfig, parseConfig, resolvePaths } from "../config/load.ts";
import { isTable } from "../config/parse.ts";
import type { LoadedConfig } from "../config/types.ts";
import type { OperatorStore } from "../store/api.ts";
import { openStores, type Stores } from "../store/open.ts";
import { visible } from "./format.ts";

/** A command's view of the world, so tests can run it in-process (main(argv) is runCli). */
export interface Io {
  out(text: string): void;
  err(text: string): void;
  readStdin(): Promise<Uint8Array>;
  env: Env;
  cwd: string;
  /** stdout is a terminal: tables for people, warnings before payloads. */
  isTTY: boolean;
}

export interface Globals {
  home?: string;
  config?: string;
  json: boolean;
}

export interface Cli {
  io: Io;
  globals: Globals;
  clock: Clock;
  /** Config warnings, printed after the command succeeds (a failure prints only its error). */
  warnings: string[];
}

export function processIo(): Io {
  return {
    out: (t) => process.stdout.write(t.endsWith("\n") ? t : `${t}\n`),
    err: (t) => process.stderr.write(t.endsWith("\n") ? t : `${t}\n`),
    readStdin: async () => new Uint8Array(await Bun.stdin.arrayBuffer()),
    env: process.env,
    cwd: process.cwd(),
    isTTY: Boolean(process.stdout.isTTY),
  };
}

export function makeCli(io: Io, globals: Globals, clock: Clock = processClock(io.env)): Cli {
  return { io, globals, clock, warnings: [] };
}

/** The global flags, accepted before or after the command. */
export const GLOBAL_ARGS = {
  home: {
    type: "string",
    description: "state directory (HOOKSPOOL_HOME; default /var/lib/hookspool)",
    valueHint: "dir",
  },
  config: {
    type: "string",
    description: "config file (HOOKSPOOL_CONFIG; default <home>/config.toml)",
    valueHint: "file",
  },
  json: { type: "boolean", description: "machine-readable output" },
} as const;

/** Take --home, --config and --json out of argv wherever they stand (before any `--`). */
export function splitGlobals(argv: string[]): { globals: Globals; rest: string[] } {
  const globals: Globals = { json: false };
  const rest: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--") {
      rest.push(...argv.slice(i));
      break;
    }
    const m = /^--(home|config)(?:=(.*))?$/.exec(a);
    if (m) {
      const value = m[2] ?? argv[++i];
      if (value === undefined || value === "") throw new HookspoolError("E_USAGE", `--${m[1]} needs a value`);
      globals[m[1] as "home" | "config"] = value;
    } else if (a === "--json") {
      globals.json = true;
    } else {
      rest.push(a);
    }
  }
  return { globals, rest };
}

/**
 * Load the config with this command's flags and environment. Warnings (unknown keys at run
 * time) are kept for stderr, one line each, so stdout stays clean for --json.
 */
export function loadFor(cli: Cli, opts: { strict?: boolean } = {}): LoadedConfig {
  const loaded = loadConfig({
    home: cli.globals.home,
    config: cli.globals.config,
    env: cli.io.env,
    cwd: cli.io.cwd,
    strict: opts.strict,
  });
  for (const p of loaded.problems) {
    const where = [loaded.paths.config, p.key].filter(Boolean).join(": ");
    cli.warnings.push(`hookspool: warning: ${visible(`${where}: ${p.message}${p.hint ? ` (${p.hint})` : ""}`)}`);
  }
  // Said before the command runs: what it writes is then already root's.
  const foreign = foreignHome(process.getuid?.() ?? -1, loaded.paths.home);
  if (foreign) cli.io.err(`hookspool: warning: ${visible(foreign)}`);
  return loaded;
}

/**
 * The warning for root working in a home another user owns (the services' user): a file it
 * creates there (a spool, its -wal, a lock) is root's, and the services can then not open it.
 */
export function foreignHome(uid: number, home: string): string | null {
  if (uid !== 0) return null;
  let owner: number;
  try {
    owner = statSync(home).uid;
  } catch {
    return null;
  }
  if (owner === 0) return null;
  const name = userName(owner);
  const who = name ?? `uid ${owner}`;
  return (
    `running as root in ${home}, which ${who} owns: a file this makes there is root's, and the services ` +
    `(as ${who}) cannot then open it (run it as that user: sudo -u ${name ?? `'#${owner}'`} hookspool ...)`
  );
}

/** The login name of `uid` from /etc/passwd, or null. */
function userName(uid: number): string | null {
  try {
    for (const line of readFileSync("/etc/passwd", "utf8").split("\n")) {
      const f = line.split(":");
      if (f.length > 2 && Number(f[2]) === uid && /^[a-z_][a-z0-9_-]*\$?$/i.test(f[0])) return f[0];
    }
  } catch {
    // no passwd file: the uid is said instead
  }
  return null;
}

/**
 * What a verb that names a source or an instance says when the config lacks it: `e`, unless there
 * is no config file at all, which is then the thing to say (with where it was looked for).
 */
export function notInConfig(loaded: LoadedConfig, e: HookspoolError): HookspoolError {
  return noConfigFile(loaded) ?? e;
}

/** The error for a command that found no config file at all, or null when there is one. */
export function noConfigFile(loaded: LoadedConfig): HookspoolError | null {
  if (loaded.paths.config !== null) return null;
  // An explicit --config or HOOKSPOOL_CONFIG that is missing fails at load; this is the home's.
  return new HookspoolError("E_CONFIG", `no config file at ${join(loaded.paths.home, "config.toml")}`, {
    hint: "hookspool init writes one; or point --home, --config or HOOKSPOOL_CONFIG at yours",
  });
}

/**
 * Load the config for a command that only reads the spool (list, show, status, export). A
 * config that does not parse or validate must not lock the operator out of the evidence while
 * they fix it: the command then runs on the defaults, with one warning on stderr, and finds
 * the database by --home, HOOKSPOOL_HOME, HOOKSPOOL_DB (or spool.home/spool.db if the TOML parses).
 */
export function loadForReading(cli: Cli): LoadedConfig {
  try {
    return loadFor(cli);
  } catch (e) {
    if (!(e instanceof ConfigError) || !e.file) throw e;
    const file = e.file;
    const first = e.problems[0];
    cli.io.err(
      `hookspool: warning: ${visible(
        `${file}: cannot use the config (${first.key}: ${first.message}); reading the database alone`,
      )}`,
    );
    const config = spoolOnly(file, cli.io.env);
    const paths = resolvePaths(
      config,
      { home: cli.globals.home, config: cli.globals.config, env: cli.io.env, cwd: cli.io.cwd },
      file,
    );
    return { config, paths, problems: [], mtimeMs: null };
  }
}

/**
 * The defaults, with the [spool] table of a config file whose TOML parses (home, db, and on
 * PostgreSQL the backend and its URL, so a broken config on a moved spool never reads the old
 * SQLite file); HOOKSPOOL_BACKEND as everywhere.
 */
function spoolOnly(file: string, env: Env): LoadedConfig["config"] {
  let written: Record<string, unknown> = {};
  try {
    const doc = parseToml(readFileSync(file, "utf8"));
    if (isTable(doc) && isTable(doc.spool)) written = doc.spool;
  } catch {
    // no TOML to read: the defaults
  }
  let config = parseConfig("", file).config;
  try {
    config = parseConfig(stringifyToml({ spool: written }), file, { env }).config;
  } catch {
    if (typeof written.home === "string") config.spool.home = written.home;
    if (typeof written.db === "string") config.spool.db = written.db;
  }
  const backend = env.HOOKSPOOL_BACKEND || written.backend;
  if (backend === "postgres") {
    config.spool.backend = "postgres";
    if (!config.spool.url) {
      throw new HookspoolError(
        "E_CONFIG",
        "the config does not load and its spool is on PostgreSQL, whose [spool] url cannot be read from it either",
        { file, key: "spool.url", hint: "hookspool check says what to fix" },
      );
    }
    anchorPaths(config, dirname(file), env);
  }
  return config;
}

/**
 * The store the operator's verbs work on: the SQLite spool (never migrated here) or the
 * PostgreSQL database the config names, at this build's schema. Close it when done.
 */
export async function openOperatorStore(
  cli: Cli,
  loaded: Pick<LoadedConfig, "config" | "paths">,
): Promise<OperatorStore> {
  return (await openOperatorStores(cli, loaded)).operator();
}

/** Every role over the config's store, opened as the operator's verbs open it (never migrated); close() when done. */
export function openOperatorStores(cli: Cli, loaded: Pick<LoadedConfig, "config" | "paths">): Promise<Stores> {
  return openStores(loaded.config, {
    mode: "operator",
    paths: { spoolFile: loaded.paths.spoolFile, lock: loaded.paths.lock },
    env: cli.io.env,
    clock: cli.clock,
  });
}

/** Parse a positive integer argument (a batch or event id, a limit). */
export function positiveInt(value: unknown, what: string): number {
  const s = String(value ?? "");
  if (!/^\d+$/.test(s) || Number(s) < 1)
    throw new HookspoolError("E_USAGE", `${what} must be a positive integer, got "${s}"`);
  return Number(s);
}
