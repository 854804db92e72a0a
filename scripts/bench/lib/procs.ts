// The processes and files of a benchmark: temp homes, the hookspool command (`bun src/main.ts`,
// or dist/hookspool with BENCH_BINARY=1), children with their output in a log file and always
// killed (at the end, on an error, on a signal, past the watchdog), /proc figures.
import { closeSync, existsSync, mkdtempSync, openSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export const ROOT = join(import.meta.dir, "..", "..", "..");
export const BINARY = join(ROOT, "dist", "hookspool");
export const USE_BINARY = process.env.BENCH_BINARY === "1";
export const RUNNER = USE_BINARY ? "binary" : "bun";

const dirs: string[] = [];

/** A private temp directory (0700), removed at exit. */
export function tempHome(prefix: string): string {
  const d = mkdtempSync(join(tmpdir(), `hookspool-bench-${prefix}-`));
  dirs.push(d);
  return d;
}

/** The size of a file in bytes, or 0 when it is missing. */
export function fileSize(path: string): number {
  try {
    return statSync(path).size;
  } catch {
    return 0;
  }
}

/** A free 127.0.0.1 port (bound, read and released), for a process that must be told its port. */
export function freePort(): number {
  const s = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  const p = s.port;
  s.stop(true);
  return p;
}

export interface Child {
  name: string;
  proc: ReturnType<typeof Bun.spawn>;
  log(): string;
  stop(): Promise<void>;
}

const children = new Set<Child>();

/** The command that runs hookspool: `bun src/main.ts`, or the compiled binary (built when missing). */
export async function hookspoolCmd(): Promise<string[]> {
  if (!USE_BINARY) return [process.execPath, join(ROOT, "src", "main.ts")];
  if (!existsSync(BINARY)) {
    const p = Bun.spawn([process.execPath, "run", join(ROOT, "scripts", "build.ts")], {
      cwd: ROOT,
      stdout: "inherit",
      stderr: "inherit",
    });
    if ((await p.exited) !== 0) throw new Error("bun run scripts/build.ts failed");
  }
  return [BINARY];
}

/** Spawn a long-running process, stdout and stderr into a log file; it is killed at exit whatever happens. */
export function spawnChild(
  name: string,
  cmd: string[],
  opts: { env?: Record<string, string | undefined>; logDir: string },
): Child {
  const logPath = join(opts.logDir, `${name.replace(/[^a-z0-9]+/gi, "-")}.log`);
  const fd = openSync(logPath, "a");
  const proc = Bun.spawn(cmd, {
    cwd: ROOT,
    env: opts.env ?? { PATH: process.env.PATH },
    stdin: "ignore",
    stdout: fd,
    stderr: fd,
  });
  closeSync(fd);
  const c: Child = {
    name,
    proc,
    log: () => {
      try {
        return readFileSync(logPath, "utf8");
      } catch {
        return "";
      }
    },
    async stop() {
      children.delete(c);
      if (proc.exitCode !== null || proc.signalCode) return;
      try {
        proc.kill("SIGTERM");
      } catch {
        return;
      }
      const late = setTimeout(() => {
        try {
          proc.kill("SIGKILL");
        } catch {
          // already gone
        }
      }, 5000);
      await proc.exited;
      clearTimeout(late);
    },
  };
  children.add(c);
  return c;
}

/** The environment of a hookspool child; `extra` adds variables (HOOKSPOOL_PG_URL for a PostgreSQL home). */
export function hookspoolEnv(home: string, extra: Record<string, string> = {}): Record<string, string | undefined> {
  return { PATH: process.env.PATH, HOME: home, HOOKSPOOL_ALERT_DRY: "1", ...extra };
}

/** `hookspool --home <home> <argv...>` as a long-running child (intake, dispatch, run). */
export async function startHookspool(
  name: string,
  home: string,
  argv: string[],
  env: Record<string, string> = {},
): Promise<Child> {
  return spawnChild(name, [...(await hookspoolCmd()), "--home", home, ...argv], {
    env: hookspoolEnv(home, env),
    logDir: home,
  });
}

/** Run a short hookspool verb to its end; throws on a non-zero exit. */
export async function hookspoolVerb(home: string, argv: string[], env: Record<string, string> = {}): Promise<string> {
  const p = Bun.spawn([...(await hookspoolCmd()), "--home", home, ...argv], {
    cwd: ROOT,
    env: hookspoolEnv(home, env),
    stdout: "pipe",
    stderr: "pipe",
  });
  const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  if (code !== 0) throw new Error(`hookspool ${argv.join(" ")} exited ${code}: ${err.slice(-800)}`);
  return out;
}

/** Wait for a match of `re` in the child's log. */
export async function waitLog(c: Child, re: RegExp, ms = 20_000): Promise<RegExpExecArray> {
  const until = performance.now() + ms;
  for (;;) {
    const m = re.exec(c.log());
    if (m) return m;
    if (c.proc.exitCode !== null || c.proc.signalCode)
      throw new Error(
        `${c.name} exited (${c.proc.exitCode ?? c.proc.signalCode}) before ${re}: ${c.log().slice(-800)}`,
      );
    if (performance.now() > until) throw new Error(`${c.name}: no ${re} within ${ms} ms: ${c.log().slice(-800)}`);
    await Bun.sleep(10);
  }
}

/** The port an intake (hookspool's or a baseline's) logged as `listening listen=127.0.0.1:<port>`. */
export async function listeningPort(c: Child): Promise<number> {
  return Number((await waitLog(c, /listening listen=127\.0\.0\.1:(\d+)/))[1]);
}

/**
 * A /proc/<pid>/status figure in kB (VmRSS now, VmHWM the peak; RssAnon the process's own
 * memory, RssFile the pages of its executable and libraries it maps), or NaN.
 */
export function procKb(pid: number, field: "VmRSS" | "VmHWM" | "RssAnon" | "RssFile"): number {
  try {
    const m = new RegExp(`${field}:\\s+(\\d+)`).exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return m ? Number(m[1]) : Number.NaN;
  } catch {
    return Number.NaN;
  }
}

/** CPU seconds (user + system) a process has used so far, from /proc/<pid>/stat, or NaN. */
export function procCpuS(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // The command name may hold spaces and parentheses: the fields after it start past the last ')'.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    // utime and stime are fields 14 and 15 of the line (11 and 12 after the name), in clock ticks (100 Hz on Linux).
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return Number.NaN;
  }
}

/** Stop what is still running (SIGTERM, then SIGKILL) and remove the temp homes. */
export async function cleanup(): Promise<void> {
  await Promise.all([...children].map((c) => c.stop()));
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
}

function killAllNow(): void {
  for (const c of children) {
    try {
      c.proc.kill("SIGKILL");
    } catch {
      // already gone
    }
  }
  children.clear();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
}

process.on("exit", killAllNow);
for (const sig of ["SIGINT", "SIGTERM"] as const) {
  process.on(sig, () => {
    killAllNow();
    process.exit(130);
  });
}

/**
 * Run a benchmark with a hard time limit: on timeout or error every child is killed, the temp
 * homes are removed and the process exits 1 (run.ts goes on with the next benchmark).
 */
export async function main(name: string, limitS: number, body: () => Promise<void>): Promise<void> {
  const dog = setTimeout(() => {
    console.error(`bench ${name}: over its ${limitS} s limit, stopped`);
    killAllNow();
    process.exit(1);
  }, limitS * 1000);
  let code = 0;
  try {
    await body();
  } catch (e) {
    console.error(`bench ${name} failed: ${(e as Error).stack ?? e}`);
    code = 1;
  }
  await cleanup();
  clearTimeout(dog);
  process.exit(code);
}
