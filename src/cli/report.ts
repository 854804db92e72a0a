// How a failed command is reported: one line on stderr for a person, or with --json one object
// on stdout for a script; the exit code is the same either way. Only a bug prints its stack.
import { ConfigError } from "../config/load.ts";
import { HookspoolError } from "../errors.ts";
import { CorruptSpool, isCorruption } from "../store/corrupt.ts";
import type { Io } from "./context.ts";
import { visible } from "./format.ts";

/** The --json form of an error: `{error, code, hint?, file?, key?, problems?}`. */
export interface ErrorDoc {
  error: string;
  code: string;
  hint?: string;
  file?: string;
  key?: string;
  problems?: { level: string; key: string; message: string; hint?: string }[];
}

const ANSI = /\u001b\[\d+m/g;

/** Whether --json stands anywhere before `--`: known even when the flags themselves are wrong. */
export function asksForJson(argv: string[]): boolean {
  const end = argv.indexOf("--");
  return (end < 0 ? argv : argv.slice(0, end)).includes("--json");
}

/** The error as its --json document, and the lines a person sees instead. */
function describeError(e: unknown): { exit: number; doc: ErrorDoc; lines: string[]; stack?: string } {
  if (e instanceof ConfigError) {
    const problems = e.problems.map((p) => ({
      level: p.level,
      key: p.key,
      message: p.message,
      ...(p.hint ? { hint: p.hint } : {}),
    }));
    const lines = e.problems.map(
      (p) => `${[e.file, p.key].filter(Boolean).join(": ")}: ${p.message}${p.hint ? ` (${p.hint})` : ""}`,
    );
    return { exit: e.exitCode, doc: { ...fields(e), problems }, lines };
  }
  if (e instanceof HookspoolError) return { exit: e.exitCode, doc: fields(e), lines: [e.describe()] };
  // A read that finds the file damaged is the spool's state, not a bug: check's words, exit 2.
  if (isCorruption(e))
    return describeError(new CorruptSpool("the spool", [e instanceof Error ? e.message : String(e)]));
  // citty's own argument errors (a missing required argument) are usage errors.
  if (e instanceof Error && e.name === "CLIError") {
    const message = e.message.replace(ANSI, "");
    return {
      exit: 2,
      doc: { error: message, code: "E_USAGE", hint: "see --help" },
      lines: [`${message} (see --help)`],
    };
  }
  const message = e instanceof Error ? e.message : String(e);
  const stack = e instanceof Error ? (e.stack ?? e.message) : String(e);
  return { exit: 1, doc: { error: message, code: "E_INTERNAL" }, lines: [], stack };
}

/** The fields every HookspoolError has, each only when set. */
function fields(e: HookspoolError): ErrorDoc {
  const problems = e.problems?.map((p) => ({
    level: p.level,
    key: p.key,
    message: p.message,
    ...(p.hint ? { hint: p.hint } : {}),
  }));
  return {
    error: e.message,
    code: e.code,
    ...(e.hint ? { hint: e.hint } : {}),
    ...(e.file ? { file: e.file } : {}),
    ...(e.key ? { key: e.key } : {}),
    ...(problems?.length ? { problems } : {}),
  };
}

/** Report `e` and return the exit code. */
export function reportError(io: Io, e: unknown, json: boolean): number {
  const { exit, doc, lines, stack } = describeError(e);
  // Anything else is a bug: print it whole, whatever the output format.
  if (stack !== undefined) io.err(`hookspool: internal error: ${stack}`);
  if (json) io.out(JSON.stringify(doc));
  else for (const line of lines) io.err(`hookspool: ${visible(line)}`);
  return exit;
}
