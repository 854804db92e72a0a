// Real hookspool processes for the proof suites (e2e, crash, concurrency, soak): `bun src/main.ts`
// or the compiled binary, with the intake's port read from its "listening" log line and stderr
// kept for the sentinel checks; short CLI verbs run to their end; and waitFor, the one way a
// suite waits for a condition. The receiver they deliver to is in receiver.ts.
import { join } from "node:path";
import { tempDir } from "./tmp.ts";

const ROOT = join(import.meta.dir, "..", "..");
export const MAIN = join(ROOT, "src", "main.ts");

let built: Promise<string> | null = null;

/** The compiled binary, built once per test process into a private temp dir. */
export function builtBinary(): Promise<string> {
  if (!built) {
    built = (async () => {
      const out = join(tempDir("hookspool-bin-"), "hookspool");
      const p = Bun.spawn(
        [process.execPath, "build", "--compile", "--minify", join(ROOT, "src", "main.ts"), "--outfile", out],
        { cwd: ROOT, stdout: "pipe", stderr: "pipe" },
      );
      if ((await p.exited) !== 0) throw new Error(`bun build --compile failed: ${await new Response(p.stderr).text()}`);
      return out;
    })();
  }
  return built;
}

export type Runtime = "bun" | "binary";

export interface Hookspool {
  proc: ReturnType<typeof Bun.spawn>;
  /** Everything the process wrote to stderr so far. */
  stderr(): string;
  /** Everything the process wrote to stdout so far. */
  stdout(): string;
  /** The intake's port (for intake and run), once it listens. */
  port(): Promise<number>;
  /** Resolves with the exit code (null when killed by a signal). */
  exited: Promise<number | null>;
  kill(signal?: NodeJS.Signals | number): void;
}

export interface StartOptions {
  runtime?: Runtime;
  env?: Record<string, string | undefined>;
  /** Milliseconds to wait for the "listening" line. */
  listenTimeoutMs?: number;
  /** Arm a crash point (HOOKSPOOL_TEST_HOOK): the process kills itself with SIGKILL there... */
  hook?: string;
  /** ...or stops itself there (SIGSTOP, the power-loss cases), or fails the write there. */
  hookAction?: "stop" | "fail";
}

async function command(
  home: string,
  argv: string[],
  opts: StartOptions,
): Promise<{ cmd: string[]; env: Record<string, string | undefined> }> {
  const runner = opts.runtime === "binary" ? [await builtBinary()] : [process.execPath, MAIN];
  const env: Record<string, string | undefined> = {
    PATH: process.env.PATH,
    HOME: home,
    HOOKSPOOL_ALERT_DRY: "1",
    ...(opts.env ?? {}),
  };
  if (opts.hook) env.HOOKSPOOL_TEST_HOOK = opts.hook;
  if (opts.hookAction) env.HOOKSPOOL_TEST_HOOK_ACTION = opts.hookAction;
  return { cmd: [...runner, "--home", home, ...argv], env };
}

/** Run a short verb (`migrate`, `pause receiver`, `status --json`) to its end, as an operator would. */
export async function runHookspool(
  home: string,
  argv: string[],
  opts: StartOptions = {},
): Promise<{ code: number; out: string; err: string }> {
  const { cmd, env } = await command(home, argv, opts);
  const p = Bun.spawn(cmd, { env, stdout: "pipe", stderr: "pipe" });
  const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  return { code, out, err };
}

/** Start `hookspool --home <home> <argv...>` (e.g. ["run"], ["dispatch"], ["intake"]). */
export async function startHookspool(home: string, argv: string[], opts: StartOptions = {}): Promise<Hookspool> {
  const { cmd, env } = await command(home, argv, opts);
  const proc = Bun.spawn(cmd, { env, stdout: "pipe", stderr: "pipe" });
  let err = "";
  let out = "";
  const drain = (async () => {
    for await (const chunk of proc.stderr as ReadableStream<Uint8Array>) err += new TextDecoder().decode(chunk);
  })();
  const drainOut = (async () => {
    for await (const chunk of proc.stdout as ReadableStream<Uint8Array>) out += new TextDecoder().decode(chunk);
  })();
  const exited = (async () => {
    const code = await proc.exited;
    await Promise.all([drain, drainOut]);
    return proc.signalCode ? null : code;
  })();
  return {
    proc,
    stderr: () => err,
    stdout: () => out,
    async port() {
      const until = Date.now() + (opts.listenTimeoutMs ?? 15_000);
      for (;;) {
        const m = /listening listen=127\.0\.0\.1:(\d+)/.exec(err);
        if (m) return Number(m[1]);
        if (proc.exitCode !== null || proc.signalCode)
          throw new Error(`hookspool exited before listening: ${err.slice(-500)}`);
        if (Date.now() > until) throw new Error(`hookspool did not listen in time: ${err.slice(-500)}`);
        await Bun.sleep(20);
      }
    },
    exited,
    kill(signal = "SIGTERM") {
      try {
        proc.kill(signal);
      } catch {
        // already gone
      }
    },
  };
}

/** Poll `fn` until it returns something truthy, or fail naming `what`. */
export async function waitFor<T>(
  what: string,
  fn: () => T | undefined | null | false | Promise<T | undefined | null | false>,
  ms = 15_000,
): Promise<T> {
  const until = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await Bun.sleep(25);
  }
}

/** `p`, or a failure naming what did not happen in time. */
export async function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), ms);
  });
  try {
    return await Promise.race([p, late]);
  } finally {
    clearTimeout(timer);
  }
}
