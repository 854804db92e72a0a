// Run the CLI in-process with captured output (spec 18: main(argv)).
import type { Io } from "../../src/cli/context.ts";
import { runCli } from "../../src/cli/root.ts";

export interface CliRun {
  code: number;
  out: string;
  err: string;
}

export async function cli(argv: string[], opts: { env?: Record<string, string | undefined>; stdin?: string | Uint8Array; cwd?: string; tty?: boolean } = {}): Promise<CliRun> {
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
  const code = await runCli(argv, io);
  return { code, out, err };
}
