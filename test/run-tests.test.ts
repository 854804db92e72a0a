// The split between `make test` and `make test-all` (scripts/run-tests.ts, test/test-all.txt):
// every test file is in one of them, every rule still names a file, and `make test` keeps the
// SQLite store conformance and an end-to-end test; HOOKSPOOL_TEST_SKIP_PG skips PostgreSQL.
import { expect, test } from "bun:test";
import { join } from "node:path";
import { onlyInTestAll, parseRules, TEST_TIMEOUT_MS, testArgv, tiers } from "../scripts/run-tests.ts";

test("every test file is in make test or only in make test-all, never both", () => {
  const { fast, rest, all } = tiers();
  expect(all.length).toBeGreaterThan(0);
  expect(fast.filter((f) => rest.includes(f))).toEqual([]);
  expect([...fast, ...rest].sort()).toEqual(all);
  expect(all).toContain("test/run-tests.test.ts");
});

test("each line of test/test-all.txt matches a test file (a renamed file or directory shows here)", () => {
  const { all, rules } = tiers();
  expect(rules.filter((r) => !all.some((f) => r.glob.match(f))).map((r) => r.text)).toEqual([]);
});

test("make test keeps the SQLite store conformance and end-to-end tests; PostgreSQL's own suites wait", () => {
  const { fast, rest } = tiers();
  expect(fast.filter((f) => f.startsWith("test/store/") && !f.startsWith("test/store/pg/")).length).toBeGreaterThan(0);
  expect(fast.filter((f) => f.startsWith("test/e2e/")).length).toBeGreaterThan(0);
  expect(fast.filter((f) => f.startsWith("test/store/pg/"))).toEqual([]);
  expect(rest.filter((f) => f.startsWith("test/bobbins/")).length).toBeGreaterThan(0);
});

test("every tier's command sets the time limit itself: --no-isolate keeps the preload's for one file only", () => {
  // Measured on Bun 1.4: under --no-isolate a worker's second file ran with 5 s, whatever
  // bunfig.toml and the preload's setDefaultTimeout said; only the command line reaches it.
  for (const tier of ["fast", "all"] as const) {
    const argv = testArgv(tier, ["test/a.test.ts"]);
    expect(argv).toContain(`--timeout=${TEST_TIMEOUT_MS}`);
    expect(argv.at(-1)).toBe("./test/a.test.ts");
  }
  expect(testArgv("fast", [])).toContain("--no-isolate");
  expect(TEST_TIMEOUT_MS).toBeGreaterThanOrEqual(20_000);
});

test("the last matching line decides, and ! keeps a file in make test", () => {
  const rules = parseRules("# a comment\n\ntest/e2e/**\n!test/e2e/run.test.ts\ntest/cli/send.test.ts\n");
  expect(rules.map((r) => r.text)).toEqual(["test/e2e/**", "!test/e2e/run.test.ts", "test/cli/send.test.ts"]);
  expect(onlyInTestAll("test/e2e/wake.test.ts", rules)).toBe(true);
  expect(onlyInTestAll("test/e2e/run.test.ts", rules)).toBe(false);
  expect(onlyInTestAll("test/cli/send.test.ts", rules)).toBe(true);
  expect(onlyInTestAll("test/cli/root.test.ts", rules)).toBe(false);
});

test("HOOKSPOOL_TEST_SKIP_PG=1 makes the PostgreSQL suites skip, saying why", () => {
  const pg = join(import.meta.dir, "helpers", "pg.ts");
  const r = Bun.spawnSync(
    [
      process.execPath,
      "-e",
      `const m = await import(${JSON.stringify(pg)}); console.log(JSON.stringify([m.PG_BIN, m.PG_SKIP_MESSAGE]))`,
    ],
    {
      env: { ...process.env, HOOKSPOOL_TEST_SKIP_PG: "1", HOOKSPOOL_PG_BIN: "" },
      stdout: "pipe",
      stderr: "pipe",
    },
  );
  expect(r.exitCode).toBe(0);
  const [bin, message] = JSON.parse(r.stdout.toString()) as [string | null, string];
  expect(bin).toBeNull();
  expect(message).toContain("make test leaves them to make test-all");
});
