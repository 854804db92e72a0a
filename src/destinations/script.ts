// The script destination: argv with the document on stdin, a minimal environment, its own
// session so a timeout kills the whole process group, stdout capped at 1 MiB and read for
// {"enqueue": {...}} emit lines.
import { destinationDefaults } from "../config/schema.ts";
import { accessSync, constants, mkdirSync, readFileSync, statSync } from "node:fs";
import { resolve } from "node:path";
import { selfArgv } from "../self.ts";
import { expandPath } from "../config/load.ts";
import { type Env, parseEnvFile } from "../config/secrets.ts";
import { parseEmits } from "./emits.ts";
import {
  configuredPace,
  type DeliveryContext,
  type Destination,
  type Idempotency,
  isPassed,
  outcome,
  type Outcome,
  type Pace,
} from "../delivery.ts";
import type { Rate } from "../pacing.ts";

export interface ScriptDestinationOptions {
  /** "script:<name>" */
  name: string;
  /** The command and its arguments; run directly, never through a shell. */
  argv?: string[];
  /** A bobbin instance whose processor runs instead of argv: `hookspool __processor <instance>`. */
  processor?: string;
  cwd?: string;
  /** KEY=VALUE file merged into the environment, read at every attempt. */
  envFile?: string;
  /** Extra environment, merged over env_file. */
  env?: Record<string, string>;
  /** Created (0700) and passed as HOOKSPOOL_STATE_DIR when set. */
  stateDir?: string;
  timeoutS?: number;
  maxBodyBytes?: number;
  maxInflight?: number;
  /** The dispatcher's environment: only PATH, HOME and LANG pass to the script. */
  parentEnv?: Env;
  /**
   * Where a processor's log lines go (the runtime's `hookspool-processor:` lines: ids and counts
   * only); default the dispatcher's stderr. A plain script's stderr is never passed on.
   */
  processorLog?: (line: string) => void;
  /** Its rate, from its table (none: not paced). */
  rate?: Rate | null;
}

/** Stdout beyond this fails the attempt; it is never truncated (a lost tail loses emits). */
export const STDOUT_CAP = 1024 * 1024;
/** The exit that makes the batch dead at once (a processor's Permanent); others are retried. */
export const EXIT_PERMANENT = 65;
/** A processor's last stderr line on a permanent failure: its reason, kept with the attempt. */
const PERMANENT_LINE = /(?:^|\n)hookspool-permanent: ([^\n]{1,300})\n?$/;
/** Stderr is read only for that line: its last few KiB. */
const STDERR_TAIL = 4096;

const INHERITED = ["PATH", "HOME", "LANG"] as const;
const encoder = new TextEncoder();

function configOutcome(reason: string, detail: string): Outcome {
  return outcome({ kind: "retry", klass: "config", reason, detail });
}

/** Read a whole stream, keeping at most `cap` bytes but counting them all. */
async function drain(stream: ReadableStream<Uint8Array>, cap: number): Promise<{ bytes: Uint8Array; size: number }> {
  const chunks: Uint8Array[] = [];
  let kept = 0;
  let size = 0;
  for await (const chunk of stream) {
    size += chunk.byteLength;
    if (kept + chunk.byteLength <= cap) {
      chunks.push(chunk);
      kept += chunk.byteLength;
    } else if (kept < cap) {
      chunks.push(chunk.subarray(0, cap - kept));
      kept = cap;
    }
  }
  return { bytes: Buffer.concat(chunks), size };
}

/** The processor runtime's own log lines (its ctx.log and its verdicts), as it writes them. */
const PROCESSOR_LINE = /^hookspool-processor: [^\n]{1,400}$/;

/**
 * Read a whole stream, keeping only its last `keep` bytes (as text) and counting them all;
 * `lines`, when given, gets each complete line as it arrives.
 */
async function tail(
  stream: ReadableStream<Uint8Array>,
  keep: number,
  lines?: (line: string) => void,
): Promise<{ text: string; size: number }> {
  let last = new Uint8Array();
  let size = 0;
  const decoder = new TextDecoder();
  let partial = "";
  for await (const chunk of stream) {
    if (lines) {
      const parts = (partial + decoder.decode(chunk, { stream: true })).split("\n");
      partial = (parts.pop() ?? "").slice(-4096);
      for (const l of parts) lines(l);
    }
    size += chunk.byteLength;
    const joined = new Uint8Array(last.byteLength + chunk.byteLength);
    joined.set(last, 0);
    joined.set(chunk, last.byteLength);
    last = joined.subarray(Math.max(0, joined.byteLength - keep));
  }
  return { text: new TextDecoder().decode(last), size };
}

/** SIGKILL the whole process group (the script ran detached, so its pid is the group's id). */
function killGroup(pid: number): void {
  try {
    process.kill(-pid, "SIGKILL");
  } catch {
    // ESRCH: the group is already gone.
  }
}

export class ScriptDestination implements Destination {
  readonly type = "script" as const;
  readonly name: string;
  readonly timeoutS: number;
  readonly maxBodyBytes: number;
  readonly maxInflight: number;
  /** Per batch, so HOOKSPOOL_BATCH_ID can key a script's journal across attempts. */
  readonly idempotency: Idempotency = "per-batch";
  readonly unwrap = false;
  private readonly parentEnv: Env;
  private readonly paced: Pace | null;

  constructor(private readonly opts: ScriptDestinationOptions) {
    this.name = opts.name;
    const d = destinationDefaults("script");
    this.timeoutS = opts.timeoutS ?? d.timeout_s;
    this.maxBodyBytes = opts.maxBodyBytes ?? d.max_body_bytes;
    this.maxInflight = opts.maxInflight ?? d.max_inflight;
    this.parentEnv = opts.parentEnv ?? process.env;
    this.paced = configuredPace(opts.rate);
  }

  pace(): Pace | null {
    return this.paced;
  }

  /** A configured path with ~ expanded (the dispatcher's HOME); relative ones are the dispatcher's cwd's. */
  private path(p: string): string {
    return expandPath(p, process.cwd(), this.parentEnv);
  }

  /**
   * The child's whole environment: PATH, HOME and LANG from ours, the env file, the env table,
   * then the HOOKSPOOL_* variables; nothing else of the dispatcher's.
   */
  private environment(ctx: DeliveryContext): { env: Record<string, string> } | { failed: Outcome } {
    const env: Record<string, string> = {};
    for (const k of INHERITED) {
      const v = this.parentEnv[k];
      if (v !== undefined) env[k] = v;
    }
    if (this.opts.envFile) {
      let text: string;
      try {
        text = readFileSync(this.path(this.opts.envFile), "utf8");
      } catch (e) {
        return {
          failed: configOutcome(
            "env file unreadable",
            `env_file ${this.opts.envFile} cannot be read (${(e as NodeJS.ErrnoException).code ?? "error"})`,
          ),
        };
      }
      for (const [k, v] of parseEnvFile(text)) env[k] = v;
    }
    Object.assign(env, this.opts.env ?? {});
    env.HOOKSPOOL_BATCH_ID = String(ctx.batchId);
    env.HOOKSPOOL_DELIVERY_ID = ctx.deliveryId;
    if (this.opts.stateDir) {
      const dir = this.path(this.opts.stateDir);
      try {
        mkdirSync(dir, { recursive: true, mode: 0o700 });
      } catch (e) {
        return {
          failed: configOutcome(
            "state_dir unusable",
            `state_dir ${this.opts.stateDir} cannot be created (${(e as NodeJS.ErrnoException).code ?? "error"})`,
          ),
        };
      }
      env.HOOKSPOOL_STATE_DIR = dir;
    }
    // A crash point armed for the dispatcher, and its shifted test clock, reach the processor
    // runtime too (tests only: production never sets them).
    if (this.opts.processor !== undefined) {
      for (const [k, v] of Object.entries(this.parentEnv))
        if ((k.startsWith("HOOKSPOOL_TEST_HOOK") || k === "HOOKSPOOL_TEST_CLOCK_OFFSET_S") && v !== undefined)
          env[k] = v;
    }
    // A NUL cannot be passed to execve; such a variable is left out rather than failing the spawn.
    for (const [k, v] of Object.entries(env)) if (v.includes("\u0000")) delete env[k];
    return { env };
  }

  /** What runs: the processor runtime of a bobbin instance, or the configured argv. */
  private argv(): string[] {
    return this.opts.processor !== undefined
      ? [...selfArgv(), "__processor", this.opts.processor]
      : (this.opts.argv ?? []);
  }

  async deliver(body: string, ctx: DeliveryContext): Promise<Outcome> {
    const argv = this.argv();
    if (argv.length === 0) return configOutcome("script has no argv", "the script destination has no argv");
    const stdin = encoder.encode(body);
    if (stdin.byteLength > this.maxBodyBytes) {
      return outcome({
        kind: "dead",
        klass: "permanent",
        reason: "body over max_body_bytes",
        detail: `${stdin.byteLength} bytes > max_body_bytes ${this.maxBodyBytes}`,
        deadReason: "config",
      });
    }
    const prepared = this.environment(ctx);
    if ("failed" in prepared) return prepared.failed;
    const env = prepared.env;
    const { deadline } = ctx;
    const timedOut = () =>
      outcome({
        kind: "retry",
        klass: "transport",
        reason: "script timeout",
        detail: `script timeout: killed the process group after ${deadline.budgetS.toFixed(1)} s`,
      });
    if (deadline.expired) return timedOut();

    let proc: Bun.ReadableSubprocess;
    try {
      proc = Bun.spawn(argv, {
        cwd: this.opts.cwd ? this.path(this.opts.cwd) : undefined,
        env,
        stdin: new Blob([stdin]),
        stdout: "pipe",
        stderr: "pipe",
        // A new session: the script's pid is its group id, so one kill reaches every child.
        detached: true,
      });
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code ?? "error";
      return outcome({
        kind: "retry",
        klass: "transport",
        reason: "cannot start script",
        detail: `cannot start script (${code})`,
      });
    }

    // At the deadline the whole process group goes, children included.
    const kill = () => killGroup(proc.pid);
    deadline.signal.addEventListener("abort", kill, { once: true });
    try {
      // Done means exited AND both pipes closed: a child still writing to stdout may yet print emits.
      // A processor's own log lines reach the dispatcher's log; a script's stderr never does.
      const log =
        this.opts.processor !== undefined
          ? (l: string) =>
              PROCESSOR_LINE.test(l) &&
              (this.opts.processorLog ?? ((x) => process.stderr.write(`${x}\n`)))(
                l.replace(/[\u0000-\u001f\u007f]/g, " "),
              )
          : undefined;
      const work = Promise.all([proc.exited, drain(proc.stdout, STDOUT_CAP), tail(proc.stderr, STDERR_TAIL, log)]);
      const r = await deadline.race(work);
      if (isPassed(r)) {
        // A child that left the group could hold the pipes open; do not wait on them.
        await Promise.race([proc.exited, Bun.sleep(1000)]);
        return timedOut();
      }
      const [, out, err] = r;
      return this.result(proc.exitCode, proc.signalCode, out, err);
    } finally {
      deadline.signal.removeEventListener("abort", kill);
    }
  }

  /**
   * A finished script's outcome: exit 0 is ok, EXIT_PERMANENT dead; any other exit, a kill,
   * stdout over the cap or a bad emit is a batch retry.
   */
  private result(
    code: number | null,
    signal: unknown,
    out: { bytes: Uint8Array; size: number },
    err: { text: string; size: number },
  ): Outcome {
    const sizes = `stdout ${out.size} bytes, stderr ${err.size} bytes`;
    const batch = (reason: string, extra: Partial<Outcome> = {}) =>
      outcome({ kind: "retry", klass: "batch", reason, status: code, detail: `${reason}; ${sizes}`, ...extra });
    if (code === EXIT_PERMANENT) {
      // A processor says why in a short fixed phrase; a plain script's stderr is never kept.
      const why =
        this.opts.processor !== undefined
          ? PERMANENT_LINE.exec(err.text)?.[1]?.replace(/[\u0000-\u001f\u007f]/g, " ")
          : undefined;
      // A processor's exit 65 is its own verdict on the batch, not a receiver's refusal.
      return outcome({
        kind: "dead",
        klass: "permanent",
        reason: `exit ${code}`,
        status: code,
        detail: `exit ${code} (permanent${why ? `: ${why}` : ""}); ${sizes}`,
        ...(this.opts.processor !== undefined ? { deadReason: "processor_permanent" as const } : {}),
      });
    }
    if (out.size > STDOUT_CAP) return batch("stdout over 1 MiB");
    if (code === null) return batch(`killed by ${String(signal ?? "signal")}`);
    if (code !== 0) return batch(`exit ${code}`);
    const parsed = parseEmits(out.bytes);
    if (parsed.bad !== null) return batch("bad emit", { badEmit: true, detail: `bad emit: ${parsed.bad}; ${sizes}` });
    return outcome({
      kind: "ok",
      reason: "exit 0",
      status: 0,
      detail: `exit 0; ${parsed.emits.length} emit(s); ${sizes}`,
      emits: parsed.emits,
    });
  }

  /** A script signs nothing: its outcomes are reported with hookspool outcome. */
  outcomeSecrets(): string[] {
    return [];
  }

  check(): string[] {
    // The runtime is this binary; whether its bobbin loads is config's and check's to say.
    if (this.opts.processor !== undefined) return [];
    const problems: string[] = [];
    const argv = this.opts.argv ?? [];
    const cwd = this.opts.cwd ? this.path(this.opts.cwd) : process.cwd();
    if (this.opts.cwd && !isDir(cwd)) problems.push(`cwd ${this.opts.cwd} is not a directory`);
    if (argv.length === 0) problems.push("argv is empty");
    else if (argv[0].includes("/")) {
      try {
        accessSync(resolve(cwd, this.path(argv[0])), constants.X_OK);
      } catch {
        problems.push(`argv[0] ${argv[0]} is not an executable file`);
      }
    } else if (Bun.which(argv[0], { PATH: this.parentEnv.PATH ?? "" }) === null)
      problems.push(`argv[0] ${argv[0]} is not on PATH`);
    if (this.opts.envFile) {
      try {
        readFileSync(this.path(this.opts.envFile), "utf8");
      } catch (e) {
        problems.push(`env_file ${this.opts.envFile} cannot be read (${(e as NodeJS.ErrnoException).code ?? "error"})`);
      }
    }
    if (this.opts.stateDir) {
      const dir = this.path(this.opts.stateDir);
      try {
        if (!statSync(dir).isDirectory()) problems.push(`state_dir ${this.opts.stateDir} is not a directory`);
      } catch {
        // Not there yet: the first attempt creates it.
      }
    }
    return problems;
  }
}

function isDir(p: string): boolean {
  try {
    return statSync(p).isDirectory();
  } catch {
    return false;
  }
}
