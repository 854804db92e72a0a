#!/usr/bin/env bun
// hookspool: the entry point of the binary and of `bun src/main.ts`. `__processor <instance>`
// is the processor runtime the script destination starts; it is not a command a person types.
import { processClock } from "./clock.ts";
import { processIo } from "./cli/context.ts";
import { runCli } from "./cli/root.ts";
import { runProcessor } from "./processor/runtime.ts";

const argv = process.argv.slice(2);
if (argv[0] === "__processor" && argv.length === 2) {
  const write = process.stdout.write.bind(process.stdout);
  process.exitCode = await runProcessor(argv[1], {
    stdin: async () => new Uint8Array(await Bun.stdin.arrayBuffer()),
    stdout: (t) => void write(t),
    stderr: (t) => void process.stderr.write(t),
    env: process.env,
    clock: processClock(process.env),
    uid: process.getuid?.() ?? 0,
  });
} else {
  process.exitCode = await runCli(argv, processIo());
}
