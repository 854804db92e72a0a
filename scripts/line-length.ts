// The line-length check: no line over 120 columns, string and template literals included (Biome
// wraps code at 120 but never breaks a literal, and scripts/wrap-comments.ts only rewraps comments).
//
//   bun scripts/line-length.ts PATH...   name each line over 120 columns; exit 1 if any
//
// A directory is walked for its .ts files (not node_modules, dot directories or *.gen.ts, which
// are generated); a file named on the command line is checked whatever its name. Columns are
// counted as an editor counts them: code points, not UTF-16 units.
//
// A line that cannot be split without harm (a URL, a regular expression) may stay long when the
// line above it ends with the marker `// long-line: <why>`, the why said in words; a marker with no
// why does not count.
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";

export const WIDTH = 120;

/** The end of a line that allows the next one to be long: `// long-line: ` and a reason. */
export const MARKER = /\/\/ long-line: *\S.*$/;

/** Length as an editor counts columns: code points, not UTF-16 units. */
const cols = (s: string) => [...s].length;

/** The lines of `text` over `width` columns (1-based), but those under a marker line. */
export function overWidth(text: string, width = WIDTH): { line: number; cols: number }[] {
  const lines = text.split("\n");
  const out: { line: number; cols: number }[] = [];
  for (let i = 0; i < lines.length; i++) {
    const n = cols(lines[i].replace(/\r$/, ""));
    if (n <= width) continue;
    if (i > 0 && MARKER.test(lines[i - 1].replace(/\r$/, ""))) continue;
    out.push({ line: i + 1, cols: n });
  }
  return out;
}

/** The files to check: each file named, and the .ts files under each directory named. */
export function filesOf(paths: string[]): string[] {
  const out: string[] = [];
  const walk = (p: string, named: boolean) => {
    const st = statSync(p);
    if (st.isDirectory()) {
      for (const e of readdirSync(p).sort()) if (e !== "node_modules" && !e.startsWith(".")) walk(join(p, e), false);
    } else if (named || (p.endsWith(".ts") && !p.endsWith(".gen.ts"))) out.push(p);
  };
  for (const p of paths) walk(p, true);
  return out;
}

/** `file:line: N characters` for every line over the width in the paths. */
export function report(paths: string[], width = WIDTH): string[] {
  const out: string[] = [];
  for (const f of filesOf(paths))
    for (const l of overWidth(readFileSync(f, "utf8"), width)) out.push(`${f}:${l.line}: ${l.cols} characters`);
  return out;
}

if (import.meta.main) {
  const paths = process.argv.slice(2);
  if (paths.length === 0 || paths.some((p) => p.startsWith("-"))) {
    console.error("usage: bun scripts/line-length.ts PATH...");
    process.exit(2);
  }
  const found = report(paths);
  for (const l of found) console.log(l);
  if (found.length > 0) {
    console.error(`${found.length} line(s) over ${WIDTH} columns (split them, or mark one: // long-line: <why>)`);
    process.exit(1);
  }
}
