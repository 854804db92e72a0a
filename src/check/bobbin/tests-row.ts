// The tests row: a bobbin's own tests, run in a child with nothing of the caller's environment
// (PATH, LANG, a throwaway HOME and TMPDIR). A built-in's are test/bobbins/<vendor>_<product>.test.ts
// in the checkout; a private bobbin's are tests/*.test.ts in its directory, run with the plugin
// API preloaded as "hookspool/plugin". Running them needs bun and the source tree beside this
// file: the compiled binary reports the row as skipped.
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { type Row, row, skipped } from "./row.ts";
import type { CheckSubject } from "./subject.ts";

/** The file a built-in's own tests live in. */
export const testFileOf = (relDir: string) => `test/bobbins/${relDir.replace("/", "_").replaceAll("-", "_")}.test.ts`;

/** The preload that names the plugin API, when this runs from a source tree. */
const PRELOAD = join(import.meta.dir, "..", "..", "bobbin", "preload.ts");

function bunBinary(): string | null {
  if (basename(process.execPath).startsWith("bun")) return process.execPath;
  return Bun.which("bun");
}

/** Run `bun test` on `files` in `cwd`; the last line of its summary on failure. */
async function runBunTests(bun: string, cwd: string, args: string[]): Promise<string | null> {
  const tmp = mkdtempSync(join(tmpdir(), "hookspool-kit-tests-"));
  try {
    const env: Record<string, string> = { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: tmp, TMPDIR: tmp };
    if (process.env.LANG) env.LANG = process.env.LANG;
    const p = Bun.spawn([bun, "test", ...args], { cwd, env, stdout: "pipe", stderr: "pipe" });
    const [out, err, code] = await Promise.all([
      new Response(p.stdout).text(),
      new Response(p.stderr).text(),
      p.exited,
    ]);
    if (code === 0) return null;
    const lines = `${out}\n${err}`.split("\n");
    const summary = lines.find((l) => /^\s*\d+ fail$/.test(l))?.trim();
    // The first failing test by name, so the row says where to look.
    const first = lines
      .find((l) => l.startsWith("(fail) "))
      ?.slice("(fail) ".length)
      .replace(/\s*\[[\d.]+m?s\]$/, "")
      .slice(0, 160);
    const said = summary ? `${summary} (bun test exited ${code})` : `bun test exited ${code}`;
    return first ? `${said}; first: ${first}` : said;
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}

export async function testsRow(s: CheckSubject, hasCode: boolean, run: boolean): Promise<Row> {
  const bun = bunBinary();
  const cannotRun = !run
    ? "not run (--no-tests)"
    : !bun
      ? "bun is not on PATH"
      : !existsSync(PRELOAD)
        ? "the compiled binary cannot run tests: run bun src/main.ts bobbin check in a checkout"
        : null;
  if (s.shipped) {
    if (!s.checkout) return skipped("tests", "a built-in's own tests run with make test in a source checkout");
    const f = testFileOf(s.relDir);
    const path = join(s.checkout, f);
    if (!existsSync(path))
      return row("tests", [
        {
          file: f,
          message: "a built-in has no test file of its own",
          fix: `write ${f}: its end-to-end run through hookspool run, and what is its own`,
        },
      ]);
    const name = s.relDir.replace("/", ".");
    if (!readFileSync(path, "utf8").includes(name))
      return row("tests", [{ file: f, message: `does not name ${name}`, fix: "test this bobbin in it" }]);
    if (cannotRun || !bun) return skipped("tests", `${f} exists; ${cannotRun}`);
    const failed = await runBunTests(bun, s.checkout, [f]);
    return row("tests", failed ? [{ file: f, message: failed, fix: `run bun test ${f} and mend what fails` }] : [], f);
  }
  const own = [...s.files.keys()].filter((f) => /^tests\/.*\.test\.ts$/.test(f));
  if (!own.length) {
    if (!hasCode) return row("tests", [], "a template bobbin: its captures and the source kit are its tests");
    return row("tests", [
      {
        file: "tests/",
        message: "a bobbin with code has no tests of its own",
        fix: "add tests/<name>.test.ts for what its code decides",
      },
    ]);
  }
  if (cannotRun || !bun) return skipped("tests", `${own.join(", ")}: ${cannotRun}`);
  const failed = await runBunTests(bun, s.dir, ["--preload", PRELOAD, ...own.map((f) => `./${f}`)]);
  return row(
    "tests",
    failed
      ? [{ file: own[0], message: failed, fix: "run bun test in the bobbin's directory and mend what fails" }]
      : [],
    own.join(", "),
  );
}
