// How this hookspool was started: the compiled binary, or `bun src/main.ts`. The one place that
// tells them apart, for the hints that name a command to run next (and, later, for re-invoking
// the same binary as a processor).
import { isAbsolute, join, relative } from "node:path";

/** True in the binary `bun build --compile` made: its code lives in Bun's embedded file system. */
export function isCompiled(): boolean {
  return Bun.main.startsWith("/$bunfs/");
}

/**
 * The argv that runs this same hookspool again: the binary, or bun with this tree's main.ts
 * (not Bun.main, which under `bun test` is the test file).
 */
export function selfArgv(): string[] {
  return isCompiled() ? [process.execPath] : [process.execPath, join(import.meta.dir, "main.ts")];
}

/** A path as a person in `cwd` would type it: relative when below cwd, else absolute. */
export function typedPath(path: string, cwd: string): string {
  const rel = relative(cwd, path);
  if (rel === "") return ".";
  return rel.startsWith("..") || isAbsolute(rel) ? path : rel;
}

/** A program's path as typed: a bare name would be looked up on PATH, so it gets ./ */
function typedProgram(path: string, cwd: string): string {
  const t = typedPath(path, cwd);
  return t.includes("/") ? t : `./${t}`;
}

/** The command a person types to run this hookspool again from `cwd` ("dist/hookspool", "bun src/main.ts"). */
export function selfCommand(cwd: string): string {
  if (isCompiled()) return typedProgram(process.execPath, cwd);
  return `bun ${typedPath(Bun.main, cwd)}`;
}
