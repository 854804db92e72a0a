// `make run` rebuilds dist/hookspool only when something it is built from changed: the
// Makefile's build target, run in a copy of the tree with a build script that counts its runs.
import { expect, test } from "bun:test";
import { copyFileSync, mkdirSync, readFileSync, utimesSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { tempDir } from "./helpers/tmp.ts";

test("make build runs the build once, and again only after a source changes", () => {
  const dir = tempDir();
  copyFileSync(join(import.meta.dir, "..", "Makefile"), join(dir, "Makefile"));
  for (const d of ["src", "migrations", "scripts", "node_modules", "bobbins/acme/hooks"])
    mkdirSync(join(dir, d), { recursive: true });
  writeFileSync(join(dir, "bobbins", "acme", "hooks", "bobbin.toml"), "# a bobbin\n");
  // The stand-in registry generator: the real one writes src/bobbin/builtins.gen.ts.
  writeFileSync(join(dir, "scripts", "gen-bobbins.ts"), "// no-op\n");
  writeFileSync(join(dir, "src", "main.ts"), "// a source\n");
  writeFileSync(join(dir, "migrations", "0001.sql"), "-- a migration\n");
  // The stand-in build: count the runs and leave a binary behind.
  writeFileSync(
    join(dir, "scripts", "build.ts"),
    `import { appendFileSync, mkdirSync, writeFileSync } from "node:fs";\nmkdirSync("dist", { ` +
      `recursive: true });\nwriteFileSync("dist/hookspool", "");\nappendFileSync("builds", "x");\n`,
  );
  writeFileSync(join(dir, "package.json"), "{}\n");
  writeFileSync(join(dir, "bun.lock"), "\n");
  writeFileSync(join(dir, "node_modules", ".deps-ok"), "");
  // Everything it is built from is an hour old, so the binary it makes is newer.
  const old = Date.now() / 1000 - 3600;
  for (const f of [
    "src/main.ts",
    "migrations/0001.sql",
    "scripts/build.ts",
    "scripts/gen-bobbins.ts",
    "bobbins/acme/hooks/bobbin.toml",
    "package.json",
    "bun.lock",
    "node_modules/.deps-ok",
  ])
    utimesSync(join(dir, f), old, old);
  const make = () => {
    const r = Bun.spawnSync(["make", "-s", "build"], {
      cwd: dir,
      env: { PATH: process.env.PATH, HOME: dir },
      stdout: "pipe",
      stderr: "pipe",
    });
    expect({ code: r.exitCode, err: r.stderr.toString() }).toEqual({ code: 0, err: "" });
  };
  const builds = () => readFileSync(join(dir, "builds"), "utf8").length;
  make();
  make();
  expect(builds()).toBe(1);
  writeFileSync(join(dir, "src", "main.ts"), "// changed\n");
  make();
  expect(builds()).toBe(2);
  // A bobbin's file is a source too: the binary carries it. (The binary is dated back first: a
  // write right after a build can share its timestamp on a filesystem with a coarse clock.)
  utimesSync(join(dir, "dist", "hookspool"), old + 60, old + 60);
  writeFileSync(join(dir, "bobbins", "acme", "hooks", "bobbin.toml"), "# changed\n");
  make();
  expect(builds()).toBe(3);
});

/** A Makefile target's recipe, one command a line. */
function recipe(makefile: string, target: string): string[] {
  const body = new RegExp(`^${target}:.*\\n((?:\\t.*\\n)+)`, "m").exec(makefile)?.[1] ?? "";
  return body
    .split("\n")
    .map((l) => l.trim())
    .filter(Boolean);
}

test(
  "`bun run test` runs what `make test` runs: the bobbin registry, the type check, the lint and " +
    "the format check (warnings fail), the line-length check, then the quick tests",
  () => {
    const root = join(import.meta.dir, "..");
    const makefile = readFileSync(join(root, "Makefile"), "utf8");
    const commands = recipe(makefile, "test");
    expect(commands).toEqual([
      "bun scripts/gen-bobbins.ts",
      "tsc --noEmit -p .",
      "biome ci --error-on-warnings",
      "bun scripts/wrap-comments.ts --check src test scripts bobbins",
      "bun scripts/line-length.ts src test scripts bobbins",
      "bun scripts/run-tests.ts run fast",
    ]);
    const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));
    expect(pkg.scripts.test).toBe(commands.join(" && "));
    expect(recipe(makefile, "lint")).toEqual(["biome lint"]);
  },
);

test("`make test-all` (and `bun run test:all`) runs what `make test` runs, then every test file", () => {
  const root = join(import.meta.dir, "..");
  const makefile = readFileSync(join(root, "Makefile"), "utf8");
  const commands = recipe(makefile, "test-all");
  expect(commands).toEqual([...recipe(makefile, "test").slice(0, -1), "bun scripts/run-tests.ts run all"]);
  const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));
  expect(pkg.scripts["test:all"]).toBe(commands.join(" && "));
  // CI runs the full one.
  expect(readFileSync(join(root, ".ci", "run"), "utf8")).toMatch(/^make test-all 2>&1 \| tee/m);
});
