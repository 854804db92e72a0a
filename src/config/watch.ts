// Config reload on mtime change, shared by the intake and the dispatcher: a bad file keeps the
// previous config and opens config:file; a good one resolves it. Started, a watcher polls on its
// own timer (the intake, every 5 s); the dispatcher calls poll() from its tick instead, so a
// reload lands between two ticks, never inside one.
import { statSync } from "node:fs";
import { HookspoolError } from "../errors.ts";
import type { Logger } from "../log.ts";
import { Periodic, type Service } from "../service.ts";
import type { IssueSink } from "../store/api.ts";
import { loadConfig, type LoadOptions } from "./load.ts";
import type { LoadedConfig } from "./types.ts";

export interface WatchOptions {
  /** The config file the process started from; null: nothing to watch. */
  file: string | null;
  /** Its mtime when it was read. */
  mtimeMs: number | null;
  /** How it was found, so a reload reads the same file with the same precedence. */
  loadOptions: LoadOptions;
  /** Where the config:file issue goes (raised on a bad reload, resolved on a good one). */
  issues: IssueSink;
  log: Logger;
  /** The time issues are stamped with. */
  now(): number;
  /** Take a new config; throw to refuse it (a plugin that does not import). */
  apply(loaded: LoadedConfig): void | Promise<void>;
  /** How often a started watcher polls. */
  everyS?: number;
  /** What a started watcher does with a failure poll() did not handle (its owner counts it). */
  onError(e: unknown): void;
}

export class ConfigWatcher implements Service {
  readonly name = "config watcher";
  private mtimeMs: number | null;
  private readonly timer: Periodic;

  constructor(private readonly o: WatchOptions) {
    this.mtimeMs = o.mtimeMs;
    this.timer = new Periodic(this.name, {
      everyMs: () => (o.everyS ?? 5) * 1000,
      run: async () => {
        await this.poll();
      },
      // poll() handles a bad file itself; what escapes it must not end the process.
      onError: (e) => o.onError(e),
    });
  }

  /** Whether it polls on its own timer. */
  get active(): boolean {
    return this.timer.active;
  }

  start(): Promise<void> {
    return this.timer.start();
  }

  stop(): Promise<void> {
    return this.timer.stop();
  }

  /** When the file's mtime moved, load it and apply it. Returns whether a new config was applied. */
  async poll(): Promise<boolean> {
    const file = this.o.file;
    if (!file) return false;
    let mtime: number;
    try {
      mtime = statSync(file).mtimeMs;
    } catch {
      return false;
    }
    if (mtime === this.mtimeMs) return false;
    this.mtimeMs = mtime;
    const now = this.o.now();
    let applied: boolean;
    let what = "";
    try {
      await this.o.apply(loadConfig(this.o.loadOptions));
      applied = true;
    } catch (e) {
      applied = false;
      what = e instanceof HookspoolError ? e.describe() : (e as Error).name;
      this.o.log.error("config reload failed; keeping the previous config", {
        reason: e instanceof HookspoolError ? (e.key ?? e.code) : (e as Error).name,
      });
    }
    // The issue is a write, which a full or read-only spool refuses: the reload's outcome stands
    // either way, and the refusal is logged, never thrown into the caller's timer.
    const refused = (e: unknown) =>
      this.o.log.limited("error", "config:file issue not written", {
        reason: (e as { code?: string }).code ?? (e as Error).name,
      });
    try {
      const write = applied
        ? this.o.issues.resolveIssue("config:file", now)
        : this.o.issues.raiseIssue({ fingerprint: "config:file", kind: "config", error: what.slice(0, 300), now });
      write.catch(refused);
    } catch (e) {
      refused(e);
    }
    return applied;
  }
}
