// Run the CLI in-process, through main(argv), with captured output.
import type { Io } from "../../src/cli/context.ts";
import { runCli } from "../../src/cli/root.ts";

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
    readStdin: async () =>
      typeof opts.stdin === "string" ? new TextEncoder().encode(opts.stdin) : (opts.stdin ?? new Uint8Array()),
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
