// scripts/line-length.ts, the check that no line is over 120 columns: a long line fails and is
// named with its length, a short one passes, and `// long-line: <why>` on the line above lets one
// line (only the next, and only with a why) stay long.
import { describe, expect, test } from "bun:test";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { filesOf, overWidth, WIDTH } from "../scripts/line-length.ts";
import { tempDir } from "./helpers/tmp.ts";

const SCRIPT = join(import.meta.dir, "..", "scripts", "line-length.ts");

function run(...paths: string[]): { code: number; out: string; err: string } {
  const p = Bun.spawnSync(["bun", SCRIPT, ...paths], { stdout: "pipe", stderr: "pipe" });
  return { code: p.exitCode, out: p.stdout.toString(), err: p.stderr.toString() };
}

const long = `const s = "${"x".repeat(WIDTH)}";`;

describe("overWidth", () => {
  test("a line of exactly the width passes; one column more is named with its length", () => {
    expect(overWidth("a".repeat(WIDTH))).toEqual([]);
    expect(overWidth(`ok\n${"a".repeat(WIDTH + 1)}\nok`)).toEqual([{ line: 2, cols: WIDTH + 1 }]);
  });

  test("columns are code points: text beyond ASCII is not counted twice", () => {
    expect(overWidth("é".repeat(WIDTH))).toEqual([]);
    expect(overWidth("🦆".repeat(WIDTH))).toEqual([]);
    expect(overWidth("🦆".repeat(WIDTH + 1))).toEqual([{ line: 1, cols: WIDTH + 1 }]);
  });

  test("the marker on the line above allows that one line, and only with a why", () => {
    expect(overWidth(`// long-line: a URL splitting would break\n${long}`)).toEqual([]);
    expect(overWidth(`foo(); // long-line: the regex reads as one\n${long}`)).toEqual([]);
    expect(overWidth(`// long-line:\n${long}`)).toEqual([{ line: 2, cols: long.length }]);
    expect(overWidth(`// long-line:    \n${long}`)).toEqual([{ line: 2, cols: long.length }]);
    // Two lines below the marker, or above it: not allowed.
    expect(overWidth(`// long-line: a URL\nok\n${long}`)).toEqual([{ line: 3, cols: long.length }]);
    expect(overWidth(`${long}\n// long-line: a URL`)).toEqual([{ line: 1, cols: long.length }]);
    expect(overWidth(`// long-line: a URL\n${long}\n${long}`)).toEqual([{ line: 3, cols: long.length }]);
  });
});

describe("bun scripts/line-length.ts", () => {
  test("a temp file with a long line fails, naming file:line and its length", () => {
    const dir = tempDir();
    const f = join(dir, "long.ts");
    writeFileSync(f, `// a file\n${long}\n`);
    const r = run(f);
    expect(r.code).toBe(1);
    expect(r.out).toBe(`${f}:2: ${long.length} characters\n`);
    expect(r.err).toContain("1 line(s) over 120 columns");
  });

  test("a temp file of short lines passes, silently", () => {
    const dir = tempDir();
    const f = join(dir, "short.ts");
    writeFileSync(f, `// a file\nconst s = "short";\n`);
    expect(run(f)).toEqual({ code: 0, out: "", err: "" });
  });

  test("the marker lets the line under it stay long", () => {
    const dir = tempDir();
    const f = join(dir, "marked.ts");
    writeFileSync(f, `// long-line: a URL that splitting would break\n${long}\n`);
    expect(run(f)).toEqual({ code: 0, out: "", err: "" });
  });

  test("a directory is walked for .ts files, not generated ones or node_modules", () => {
    const dir = tempDir();
    mkdirSync(join(dir, "sub"));
    mkdirSync(join(dir, "node_modules"));
    writeFileSync(join(dir, "sub", "a.ts"), `${long}\n`);
    writeFileSync(join(dir, "sub", "b.gen.ts"), `${long}\n`);
    writeFileSync(join(dir, "node_modules", "c.ts"), `${long}\n`);
    writeFileSync(join(dir, "notes.md"), `${long}\n`);
    expect(filesOf([dir])).toEqual([join(dir, "sub", "a.ts")]);
    const r = run(dir);
    expect(r.code).toBe(1);
    expect(r.out).toBe(`${join(dir, "sub", "a.ts")}:1: ${long.length} characters\n`);
    // Named on the command line, a file is checked whatever its name.
    expect(run(join(dir, "notes.md")).code).toBe(1);
  });

  test("no path is a usage error", () => {
    expect(run().code).toBe(2);
  });
});
