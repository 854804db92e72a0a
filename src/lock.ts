// dispatch.lock: an exclusive flock(2) through bun:ffi, held by the dispatcher and by migrate.
import { dlopen, FFIType } from "bun:ffi";
import { closeSync, openSync } from "node:fs";
import { HookspoolError } from "./errors.ts";

const LOCK_EX = 2;

const LOCK_NB = 4;

const LOCK_UN = 8;

type Libc = { flock(fd: number, op: number): number };

let libc: Libc | null = null;

function loadLibc(): Libc {
  if (libc) return libc;
  const names = process.platform === "darwin" ? ["libc.dylib", "/usr/lib/libSystem.B.dylib"] : ["libc.so.6", "libc.so"];
  let lastError: unknown;
  for (const name of names) {
    try {
      const lib = dlopen(name, { flock: { args: [FFIType.i32, FFIType.i32], returns: FFIType.i32 } });
      libc = { flock: (fd, op) => lib.symbols.flock(fd, op) as number };
      return libc;
    } catch (e) {
      lastError = e;
    }
  }
  throw new Error(`cannot load libc for flock: ${String(lastError)}`);
}

/** An exclusive lock on a file; release() is safe to call twice. */
export interface FileLock {
  readonly path: string;
  release(): void;
}

/**
 * Take the exclusive lock on `path` without waiting. A lock held by any other open
 * file description (another process, or another open in this one) is E_LOCKED (exit 3).
 */
export function acquireLock(path: string, what = "the dispatcher or hookspool migrate"): FileLock {
  const fd = openSync(path, "a", 0o600);
  const rc = loadLibc().flock(fd, LOCK_EX | LOCK_NB);
  if (rc !== 0) {
    closeSync(fd);
    throw new HookspoolError("E_LOCKED", `${path} is held by another process`, {
      hint: `${what} is already running; stop it first`,
    });
  }
  let held = true;
  return {
    path,
    release() {
      if (!held) return;
      held = false;
      loadLibc().flock(fd, LOCK_UN);
      closeSync(fd);
    },
  };
}
