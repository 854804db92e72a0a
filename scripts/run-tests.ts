// The test files of `make test` and of `make test-all`, and the `bun test` run of each.
//
//   bun scripts/run-tests.ts list fast|rest|all   the files, one a line
//   bun scripts/run-tests.ts run fast|all [ARGS]  `bun test` on them (ARGS go to bun test)
//
// `fast` is every *.test.ts under test/ but those test/test-all.txt names (its globs, the last
// matching line deciding, `!` keeping a file in); `rest` is those; `all` is both. `run fast`
// leaves the PostgreSQL halves of its suites to `make test-all` (HOOKSPOOL_TEST_SKIP_PG=1),
// lets each worker keep its modules across files (--no-isolate: about 40 % faster) and puts
// the tests' temp files on /dev/shm when it has room (a fresh spool costs a quarter of what it
// does on disk); `run all` isolates every file and keeps the temp files on the disk, as a
// deployment has them. Both start the files test/timings.json says are slowest first, so the
// two workers finish together, and remove the temp directory of the run when it ends.
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, statfsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const ROOT = join(import.meta.dir, "..");
export const RULES_FILE = "test/test-all.txt";
const TIMINGS_FILE = "test/timings.json";
/** /dev/shm is used only with this much free: a container's default 64 MiB is too small. */
const SHM_MIN_FREE = 1024 * 1024 * 1024;

export type Tier = "fast" | "rest" | "all";

export interface Rule {
  glob: InstanceType<typeof Bun.Glob>;
  text: string;
  /** A `!` line: a file it matches stays in `make test`. */
  keep: boolean;
}

export function parseRules(text: string): Rule[] {
  return text
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l !== "" && !l.startsWith("#"))
    .map((l) => {
      const keep = l.startsWith("!");
      return { glob: new Bun.Glob(keep ? l.slice(1) : l), text: l, keep };
    });
}

/** Every test file bun would find under test/, relative to the root, sorted. */
export function testFiles(root = ROOT): string[] {
  return [...new Bun.Glob("test/**/*.test.ts").scanSync({ cwd: root })].map((f) => f.split("\\").join("/")).sort();
}

/** Whether `file` is left to `make test-all`: the last rule that matches it decides. */
export function onlyInTestAll(file: string, rules: Rule[]): boolean {
  let rest = false;
  for (const r of rules) if (r.glob.match(file)) rest = !r.keep;
  return rest;
}

export function tiers(root = ROOT): { fast: string[]; rest: string[]; all: string[]; rules: Rule[] } {
  const rules = parseRules(readFileSync(join(root, RULES_FILE), "utf8"));
  const all = testFiles(root);
  const rest = all.filter((f) => onlyInTestAll(f, rules));
  return { fast: all.filter((f) => !rest.includes(f)), rest, all, rules };
}

/** A fresh directory for the run's temp files, on /dev/shm for `fast` when it has room. */
function runTempDir(tier: Tier): string {
  let base = tmpdir();
  if (tier === "fast" && existsSync("/dev/shm")) {
    try {
      const fs = statfsSync("/dev/shm");
      if (fs.bavail * fs.bsize >= SHM_MIN_FREE) base = "/dev/shm";
    } catch {
      // no statfs there: the system temp dir
    }
  }
  const dir = mkdtempSync(join(base, "hookspool-tests-"));
  // The PostgreSQL suites run their server as `nobody` when root: it must reach its directory.
  chmodSync(dir, 0o1777);
  return dir;
}

/** A test's time limit: tests start real processes and servers, and a few build the binary. */
export const TEST_TIMEOUT_MS = 20_000;

/**
 * The `bun test` command for a tier's files. The time limit is on the command line: with
 * --no-isolate, a worker runs many files in one context, and bunfig.toml's timeout and the
 * preload's setDefaultTimeout reach only the first of them (each later file got 5 s).
 */
export function testArgv(tier: "fast" | "all", files: readonly string[], extra: readonly string[] = []): string[] {
  const argv = [process.execPath, "test", "--parallel=2", `--timeout=${TEST_TIMEOUT_MS}`];
  if (tier === "fast") argv.push("--no-isolate");
  if (existsSync(join(ROOT, TIMINGS_FILE))) argv.push(`--timings=${TIMINGS_FILE}`);
  argv.push(...extra, ...files.map((f) => `./${f}`));
  return argv;
}

async function run(tier: "fast" | "all", extra: string[]): Promise<number> {
  const files = tiers()[tier];
  // An empty list would make `bun test` run every file: refuse instead.
  if (files.length === 0) throw new Error(`no test files in ${tier}`);
  const tmp = runTempDir(tier);
  const argv = testArgv(tier, files, extra);
  const env: Record<string, string | undefined> = { ...process.env, TMPDIR: tmp };
  if (tier === "fast") env.HOOKSPOOL_TEST_SKIP_PG = "1";
  const child = Bun.spawn(argv, { cwd: ROOT, env, stdio: ["inherit", "inherit", "inherit"] });
  // Ctrl-C reaches bun test too (one process group); the temp directory goes either way.
  for (const sig of ["SIGINT", "SIGTERM"] as const) process.on(sig, () => child.kill(sig));
  const code = await child.exited;
  rmSync(tmp, { recursive: true, force: true });
  return code;
}

if (import.meta.main) {
  const [verb, tier, ...extra] = process.argv.slice(2);
  if (verb === "list" && (tier === "fast" || tier === "rest" || tier === "all")) {
    for (const f of tiers()[tier]) console.log(f);
  } else if (verb === "run" && (tier === "fast" || tier === "all")) {
    process.exit(await run(tier, extra));
  } else {
    console.error("usage: bun scripts/run-tests.ts list fast|rest|all | run fast|all [bun test args]");
    process.exit(2);
  }
}
