// The citty root: every verb, global flags, --help everywhere, exit codes 0/1/2/3.
import { type ArgsDef, type CommandDef, parseArgs, runCommand } from "citty";
import { HookspoolError } from "../errors.ts";
import { VERSION } from "../version.ts";
import { batchCommands } from "./batches.ts";
import { bobbinCommand } from "./bobbin.ts";
import { type Cli, GLOBAL_ARGS, type Io, makeCli, splitGlobals } from "./context.ts";
import { enqueueCommand } from "./enqueue.ts";
import { type AnyCommand, metaOf, renderHelp, subCommandsOf } from "./help.ts";
import { initCommand } from "./init.ts";
import { checkCommands } from "./check.ts";
import { issuesCommand } from "./issues.ts";
import { maintenanceCommands } from "./maintenance.ts";
import { metricsCommand } from "./metrics.ts";
import { operatorCommands } from "./operator.ts";
import { outcomeCommand } from "./outcome.ts";
import { pullCommand } from "./pull.ts";
import { migrateCommand } from "./migrate.ts";
import { migrateStoreCommand } from "./migrate-store.ts";
import { serviceCommands } from "./services.ts";
import { routeCommand } from "./route.ts";
import { sendCommand } from "./send.ts";
import { watchCommand } from "./watch.ts";
import { sourceCommands } from "./source.ts";
import { asksForJson, reportError } from "./report.ts";
import { statusCommand } from "./status.ts";
import { sweepCommand } from "./sweep.ts";

/** `hookspool version`: the same line as --version, or `{"version": ...}` with --json. */
function versionCommand(cli: Cli): CommandDef {
  return {
    meta: { name: "version", description: "print this hookspool's version" },
    args: { ...GLOBAL_ARGS },
    run() {
      cli.io.out(cli.globals.json ? JSON.stringify({ version: VERSION }) : VERSION);
      return 0;
    },
  };
}

export function rootCommand(cli: Cli): AnyCommand {
  return {
    meta: { name: "hookspool", version: VERSION, description: "a durable, coalescing intake for inbound webhooks" },
    args: GLOBAL_ARGS,
    subCommands: {
      init: initCommand(cli),
      migrate: migrateCommand(cli),
      "migrate-store": migrateStoreCommand(cli),
      enqueue: enqueueCommand(cli),
      ...batchCommands(cli),
      status: statusCommand(cli),
      ...operatorCommands(cli),
      outcome: outcomeCommand(cli),
      issues: issuesCommand(cli),
      metrics: metricsCommand(cli),
      ...maintenanceCommands(cli),
      ...checkCommands(cli),
      source: sourceCommands(cli),
      send: sendCommand(cli),
      route: routeCommand(cli),
      watch: watchCommand(cli),
      bobbin: bobbinCommand(cli),
      sweep: sweepCommand(cli),
      ...serviceCommands(cli),
      pull: pullCommand(cli),
      version: versionCommand(cli),
    },
  };
}

/** The command chain named by argv's leading words, and the arguments left for the last one. */
async function resolveChain(root: AnyCommand, argv: string[]): Promise<{ chain: AnyCommand[]; args: string[] }> {
  const chain = [root];
  let cmd = root;
  let i = 0;
  while (i < argv.length && !argv[i].startsWith("-")) {
    const subs = await subCommandsOf(cmd);
    if (!subs) break;
    if (!(argv[i] in subs))
      throw new HookspoolError("E_USAGE", `unknown command ${argv[i]}`, { hint: "see hookspool --help" });
    cmd = subs[argv[i]];
    chain.push(cmd);
    i++;
  }
  return { chain, args: argv.slice(i) };
}

/** citty ignores flags it does not know; a mistyped flag must not be silently dropped. */
function rejectUnknownFlags(cmd: AnyCommand, argv: string[]): void {
  const known = new Set<string>(["help", "h"]);
  for (const [name, def] of Object.entries({ ...GLOBAL_ARGS, ...(cmd.args ?? {}) } as Record<
    string,
    { type?: string; alias?: string | string[] }
  >)) {
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
async function rejectExtraPositionals(cmd: AnyCommand, argv: string[]): Promise<void> {
  // A verb that takes several ids (replay 3 4 5) says so in its meta.
  if ((await metaOf(cmd)).variadic) return;
  const defs = (cmd.args ?? {}) as ArgsDef;
  const declared = Object.values(defs).filter((d) => d.type === "positional").length;
  const { _: words } = parseArgs(argv, defs);
  if (words.length > declared)
    throw new HookspoolError("E_USAGE", `unexpected argument ${words[declared]}`, { hint: "see --help" });
}

/** Run the CLI with `argv` (without the program name); resolves to the exit code. */
export async function runCli(argv: string[], io: Io): Promise<number> {
  const json = asksForJson(argv);
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
    if (!wantsHelp && !cmd.run && json) {
      // A script gets the error object, not a help page it cannot parse.
      const name = chain.length > 1 ? ` ${(await metaOf(cmd)).name}` : "";
      throw new HookspoolError("E_USAGE", `hookspool${name} needs a command`, { hint: `see hookspool${name} --help` });
    }
    if (wantsHelp || !cmd.run) {
      io.out(await renderHelp(chain, { color: io.isTTY }));
      return wantsHelp ? 0 : 2;
    }
    await rejectExtraPositionals(cmd, args);
    const { result } = await runCommand(cmd, { rawArgs: args });
    for (const w of cli.warnings) io.err(w);
    return typeof result === "number" ? result : 0;
  } catch (e) {
    return reportError(io, e, json);
  }
}
