// Run the CLI in-process with captured output (spec 18: main(argv)).
import { type CommandDef, runCommand } from "citty";
import { type Cli, type Io, makeCli, splitGlobals } from "../../src/cli/context.ts";
import { runCli } from "../../src/cli/root.ts";
import { ConfigError } from "../../src/config/load.ts";
import { HookspoolError } from "../../src/errors.ts";

export interface CliRun {
  code: number;
  out: string;
  err: string;
}

export interface CliOptions {
  env?: Record<string, string | undefined>;
  stdin?: string | Uint8Array;
  cwd?: string;
  tty?: boolean;
}

/** An Io that collects stdout and stderr, with a hermetic environment. */
function capturedIo(opts: CliOptions): { io: Io; out: () => string; err: () => string } {
  let out = "";
  let err = "";
  const io: Io = {
    out: (t) => {
      out += t.endsWith("\n") ? t : `${t}\n`;
    },
    err: (t) => {
      err += t.endsWith("\n") ? t : `${t}\n`;
    },
    readStdin: async () => (typeof opts.stdin === "string" ? new TextEncoder().encode(opts.stdin) : (opts.stdin ?? new Uint8Array())),
    env: { PATH: process.env.PATH, HOME: process.env.HOME, ...(opts.env ?? {}) },
    cwd: opts.cwd ?? process.cwd(),
    isTTY: opts.tty ?? false,
  };
  return { io, out: () => out, err: () => err };
}

export async function cli(argv: string[], opts: CliOptions = {}): Promise<CliRun> {
  const c = capturedIo(opts);
  const code = await runCli(argv, c.io);
  return { code, out: c.out(), err: c.err() };
}

/**
 * Run commands that are not (yet) wired into the root: argv's first word (after the global
 * flags) names one of `commands(cli)`. Same captured io as `cli()` (stdin and tty included);
 * errors print and map to exit codes as the root does (every problem of a ConfigError, a
 * HookspoolError's code, 2 for a citty usage error).
 */
// biome-ignore lint/suspicious/noExplicitAny: citty's CommandDef is generic over each command's args
export async function cliCommands(commands: (cli: Cli) => Record<string, CommandDef<any>>, argv: string[], opts: CliOptions = {}): Promise<CliRun> {
  const c = capturedIo(opts);
  const done = (code: number): CliRun => ({ code, out: c.out(), err: c.err() });
  try {
    const { globals, rest } = splitGlobals(argv);
    const ctx = makeCli(c.io, globals);
    const cmd = commands(ctx)[rest[0] ?? ""];
    if (!cmd) throw new HookspoolError("E_USAGE", `unknown command ${rest[0] ?? "(none)"}`);
    const { result } = await runCommand(cmd, { rawArgs: rest.slice(1) });
    for (const w of ctx.warnings) c.io.err(w);
    return done(typeof result === "number" ? result : 0);
  } catch (e) {
    if (e instanceof ConfigError) {
      for (const p of e.problems) c.io.err(`hookspool: ${[e.file, p.key].filter(Boolean).join(": ")}: ${p.message}`);
      return done(e.exitCode);
    }
    if (e instanceof HookspoolError) {
      c.io.err(`hookspool: ${e.describe()}`);
      return done(e.exitCode);
    }
    if (e instanceof Error && e.name === "CLIError") {
      c.io.err(`hookspool: ${e.message}`);
      return done(2);
    }
    throw e;
  }
}
