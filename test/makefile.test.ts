// `make run` rebuilds dist/hookspool only when something it is built from changed: the
// Makefile's build target, run in a copy of the tree with a build script that counts its runs.
import { expect, test } from "bun:test";
import { copyFileSync, mkdirSync, readFileSync, utimesSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { tempDir } from "./helpers/tmp.ts";

test("make build runs the build once, and again only after a source changes", () => {
  const dir = tempDir();
  copyFileSync(join(import.meta.dir, "..", "Makefile"), join(dir, "Makefile"));
  for (const d of ["src", "migrations", "scripts", "node_modules"]) mkdirSync(join(dir, d));
  writeFileSync(join(dir, "src", "main.ts"), "// a source\n");
  writeFileSync(join(dir, "migrations", "0001.sql"), "-- a migration\n");
  // The stand-in build: count the runs and leave a binary behind.
  writeFileSync(join(dir, "scripts", "build.ts"), `import { appendFileSync, mkdirSync, writeFileSync } from "node:fs";\nmkdirSync("dist", { recursive: true });\nwriteFileSync("dist/hookspool", "");\nappendFileSync("builds", "x");\n`);
  writeFileSync(join(dir, "package.json"), "{}\n");
  writeFileSync(join(dir, "bun.lock"), "\n");
  writeFileSync(join(dir, "node_modules", ".deps-ok"), "");
  // Everything it is built from is an hour old, so the binary it makes is newer.
  const old = Date.now() / 1000 - 3600;
  for (const f of ["src/main.ts", "migrations/0001.sql", "scripts/build.ts", "package.json", "bun.lock", "node_modules/.deps-ok"]) utimesSync(join(dir, f), old, old);
  const make = () => {
    const r = Bun.spawnSync(["make", "-s", "build"], { cwd: dir, env: { PATH: process.env.PATH, HOME: dir }, stdout: "pipe", stderr: "pipe" });
    expect({ code: r.exitCode, err: r.stderr.toString() }).toEqual({ code: 0, err: "" });
  };
  const builds = () => readFileSync(join(dir, "builds"), "utf8").length;
  make();
  make();
  expect(builds()).toBe(1);
  writeFileSync(join(dir, "src", "main.ts"), "// changed\n");
  make();
  expect(builds()).toBe(2);
});

test("`bun run test` runs what `make test` runs: the type check, then the suite", async () => {
  const root = join(import.meta.dir, "..");
  const makefile = readFileSync(join(root, "Makefile"), "utf8");
  const recipe = /^test:.*\n((?:\t.*\n)+)/m.exec(makefile)?.[1] ?? "";
  const commands = recipe
    .split("\n")
    .map((l) => l.trim())
    .filter(Boolean);
  expect(commands).toEqual(["tsc --noEmit -p .", "bun test --parallel=2"]);
  const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));
  expect(pkg.scripts.test).toBe(commands.join(" && "));
});
