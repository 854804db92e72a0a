#!/usr/bin/env bun
// hookspool: the entry point of the binary and of `bun src/main.ts`.
import { processIo } from "./cli/context.ts";
import { runCli } from "./cli/root.ts";

const code = await runCli(process.argv.slice(2), processIo());
process.exitCode = code;
