// The processor's files in its state directory: the journal of each batch's result, the state
// a processor keeps between batches, and the runtime's own (OAuth tokens). Every write is
// atomic: a temp file, fsync, rename, fsync of the directory, so a crash leaves the old file or
// the new one, never half of either.
import {
  closeSync,
  fsyncSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeSync,
} from "node:fs";
import { dirname, join } from "node:path";
import type { EmitRequest } from "../delivery.ts";

/** A batch's result, written before its state is applied or its emits printed. */
export interface JournalEntry {
  batch_id: number;
  emits: EmitRequest[];
  /** The state the processor saved, by name: applied after the journal is on disk. */
  state: Record<string, unknown>;
  written_at: number;
}

const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

/** Whether `name` may name a state file. */
export const isStateName = (name: string) => NAME.test(name) && !name.includes("..");

function fsyncDir(dir: string): void {
  const fd = openSync(dir, "r");
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** Write `text` to `path` atomically and durably (mode 0600). */
export function atomicWrite(path: string, text: string): void {
  const dir = dirname(path);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const tmp = `${path}.tmp-${process.pid}`;
  const fd = openSync(tmp, "w", 0o600);
  try {
    writeSync(fd, text);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(tmp, path);
  fsyncDir(dir);
}

function readJson(path: string): unknown {
  try {
    return JSON.parse(readFileSync(path, "utf8"));
  } catch {
    return undefined;
  }
}

export const journalPath = (stateDir: string, batchId: number) => join(stateDir, "journal", `${batchId}.json`);

/** The journaled result of `batchId`, or null (none, or unreadable: the batch runs again). */
export function readJournal(stateDir: string, batchId: number): JournalEntry | null {
  const j = readJson(journalPath(stateDir, batchId)) as JournalEntry | undefined;
  if (!j || j.batch_id !== batchId || !Array.isArray(j.emits) || typeof j.state !== "object" || j.state === null)
    return null;
  return j;
}

export function writeJournal(stateDir: string, entry: JournalEntry): void {
  atomicWrite(journalPath(stateDir, entry.batch_id), JSON.stringify(entry));
}

const statePath = (stateDir: string, name: string) => join(stateDir, "state", `${name}.json`);

/** The state saved under `name`, or `fallback`. */
export function readState<T>(stateDir: string, name: string, fallback: T): T {
  const v = readJson(statePath(stateDir, name)) as { value: T } | undefined;
  return v && typeof v === "object" && "value" in v ? v.value : fallback;
}

/** Apply a journaled state: each name's file replaced atomically (applying twice is the same). */
export function applyState(stateDir: string, state: Record<string, unknown>): void {
  for (const [name, value] of Object.entries(state)) atomicWrite(statePath(stateDir, name), JSON.stringify({ value }));
}

/** The runtime's own state (OAuth tokens), beside the processor's. */
export const runtimePath = (stateDir: string, name: string) => join(stateDir, "runtime", `${name}.json`);

/** Remove journals older than `keepS`: a batch that old is past replay. */
export function pruneJournals(stateDir: string, keepS: number, nowMs: number): number {
  const dir = join(stateDir, "journal");
  let removed = 0;
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return 0;
  }
  for (const n of names) {
    const p = join(dir, n);
    try {
      if (nowMs - statSync(p).mtimeMs > keepS * 1000) {
        rmSync(p, { force: true });
        removed++;
      }
    } catch {
      // Gone already.
    }
  }
  return removed;
}
