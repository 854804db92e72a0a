// The citty root: every verb of spec 16, global flags, --help everywhere, exit codes 0/1/2/3.
import { type ArgsDef, type CommandDef, parseArgs, renderUsage, runCommand } from "citty";
import { HookspoolError } from "../errors.ts";
import { ConfigError } from "../config/load.ts";
import { VERSION } from "../version.ts";
import { batchCommands } from "./batches.ts";
import { type Cli, GLOBAL_ARGS, type Io, makeCli, splitGlobals } from "./context.ts";
import { enqueueCommand } from "./enqueue.ts";
import { initCommand } from "./init.ts";
import { checkCommands } from "./check.ts";
import { issuesCommand } from "./issues.ts";
import { maintenanceCommands } from "./maintenance.ts";
import { metricsCommand } from "./metrics.ts";
import { operatorCommands } from "./operator.ts";
import { migrateCommand } from "./migrate.ts";
import { serviceCommands } from "./services.ts";
import { sourceCommands } from "./source.ts";
import { statusCommand } from "./status.ts";

// biome-ignore lint/suspicious/noExplicitAny: citty's CommandDef is generic over each command's args
type AnyCommand = CommandDef<any>;

export function rootCommand(cli: Cli): AnyCommand {
  return {
    meta: { name: "hookspool", version: VERSION, description: "a durable, coalescing intake for inbound webhooks" },
    args: GLOBAL_ARGS,
    subCommands: {
      init: initCommand(cli),
      migrate: migrateCommand(cli),
      enqueue: enqueueCommand(cli),
      ...batchCommands(cli),
      status: statusCommand(cli),
      ...operatorCommands(cli),
      issues: issuesCommand(cli),
      metrics: metricsCommand(cli),
      ...maintenanceCommands(cli),
      ...checkCommands(cli),
      source: sourceCommands(cli),
      ...serviceCommands(cli),
    },
  };
}

/** The command chain named by argv's leading words, and the arguments left for the last one. */
async function resolveChain(root: AnyCommand, argv: string[]): Promise<{ chain: AnyCommand[]; args: string[] }> {
  const chain = [root];
  let cmd = root;
  let i = 0;
  while (i < argv.length && !argv[i].startsWith("-")) {
    const subs = (typeof cmd.subCommands === "function" ? await cmd.subCommands() : cmd.subCommands) as Record<string, AnyCommand> | undefined;
    if (!subs) break;
    if (!(argv[i] in subs)) throw new HookspoolError("E_USAGE", `unknown command ${argv[i]}`, { hint: "see hookspool --help" });
    cmd = subs[argv[i]];
    chain.push(cmd);
    i++;
  }
  return { chain, args: argv.slice(i) };
}

/** citty ignores flags it does not know; a mistyped flag must not be silently dropped. */
function rejectUnknownFlags(cmd: AnyCommand, argv: string[]): void {
  const known = new Set<string>(["help", "h"]);
  for (const [name, def] of Object.entries({ ...GLOBAL_ARGS, ...(cmd.args ?? {}) } as Record<string, { type?: string; alias?: string | string[] }>)) {
    if (def.type === "positional") continue;
    const kebab = name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
    for (const n of [name, kebab, `no-${kebab}`, ...([] as string[]).concat(def.alias ?? [])]) known.add(n);
  }
  for (const a of argv) {
    if (a === "--") break;
    const m = /^--?([^=]+)/.exec(a);
    if (m && a !== "-" && !/^-\d/.test(a) && !known.has(m[1])) {
      throw new HookspoolError("E_USAGE", `unknown option ${a.split("=")[0]}`, { hint: "see --help" });
    }
  }
}

/** Nor may a stray word: `list dead` must not quietly list everything. */
function rejectExtraPositionals(cmd: AnyCommand, argv: string[]): void {
  // A verb that takes several ids (replay 3 4 5) says so in its meta.
  if ((cmd.meta as { variadic?: boolean } | undefined)?.variadic) return;
  const defs = (cmd.args ?? {}) as ArgsDef;
  const declared = Object.values(defs).filter((d) => d.type === "positional").length;
  const { _: words } = parseArgs(argv, defs);
  if (words.length > declared) throw new HookspoolError("E_USAGE", `unexpected argument ${words[declared]}`, { hint: "see --help" });
}

function report(io: Io, e: unknown): number {
  if (e instanceof ConfigError) {
    for (const p of e.problems) io.err(`hookspool: ${[e.file, p.key].filter(Boolean).join(": ")}: ${p.message}${p.hint ? ` (${p.hint})` : ""}`);
    return e.exitCode;
  }
  if (e instanceof HookspoolError) {
    io.err(`hookspool: ${e.describe()}`);
    return e.exitCode;
  }
  if (e instanceof Error && e.name === "CLIError") {
    io.err(`hookspool: ${e.message.replace(/\u001b\[\d+m/g, "")} (see --help)`);
    return 2;
  }
  // Anything else is a bug: print it whole.
  io.err(`hookspool: internal error: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`);
  return 1;
}

/** Run the CLI with `argv` (without the program name); resolves to the exit code. */
export async function runCli(argv: string[], io: Io): Promise<number> {
  try {
    const { globals, rest } = splitGlobals(argv);
    const cli = makeCli(io, globals);
    const root = rootCommand(cli);
    if (rest.length === 1 && (rest[0] === "--version" || rest[0] === "-v")) {
      io.out(VERSION);
      return 0;
    }
    const { chain, args } = await resolveChain(root, rest);
    const cmd = chain[chain.length - 1];
    const wantsHelp = args.includes("--help") || args.includes("-h");
    if (!wantsHelp) rejectUnknownFlags(cmd, args);
    if (wantsHelp || !cmd.run) {
      const usage = await renderUsage(cmd, chain.length > 1 ? chain[chain.length - 2] : undefined);
      io.out(io.isTTY ? usage : usage.replace(/\u001b\[\d+m/g, ""));
      return wantsHelp ? 0 : 2;
    }
    rejectExtraPositionals(cmd, args);
    const { result } = await runCommand(cmd, { rawArgs: args });
    for (const w of cli.warnings) io.err(w);
    return typeof result === "number" ? result : 0;
  } catch (e) {
    return report(io, e);
  }
}
