// Failures a long-running part catches and carries on from. Expected ones (a write the spool
// refused, an operator-facing HookspoolError) are counted per component and class for /metrics
// and logged without flooding; a refused write also opens the spool issue. Anything else is a bug
// in hookspool: counted apart, logged with where it happened, and an internal issue.
import { isHookspoolError } from "../errors.ts";
import type { IssueSink } from "../store/api.ts";
import type { LogFields, Logger } from "../log.ts";

/**
 * The class of a caught error: SQLite's or the OS's code (SQLITE_FULL, ENOSPC), PostgreSQL's with its SQLSTATE, else
 * its name.
 */
export function errorClass(e: unknown): string {
  const code = (e as { code?: unknown } | null)?.code;
  const sqlstate = pgSqlState(e);
  if (code === "ERR_POSTGRES_SERVER_ERROR" && sqlstate) return `POSTGRES_${sqlstate}`;
  if (typeof code === "string" && /^[A-Z][A-Z0-9_]{1,40}$/.test(code)) return code;
  if (e instanceof Error) return e.name && e.name !== "Error" ? e.name : (e.constructor?.name ?? "Error");
  return typeof e;
}

const caught = new Map<string, number>();

export interface FaultCount {
  component: string;
  klass: string;
  n: number;
  /** A bug in hookspool, not a condition of the host (a full disk, a stuck lock). */
  bug: boolean;
}

/** Count one caught failure of `component` (process-wide, reset on restart like every counter). */
export function countFault(component: string, klass: string, bug = false): void {
  const k = `${component}\u0000${klass}\u0000${bug ? 1 : 0}`;
  caught.set(k, (caught.get(k) ?? 0) + 1);
}

/** Every caught failure so far, per component and class. */
export function faultCounts(): FaultCount[] {
  return [...caught.entries()].sort().map(([k, n]) => {
    const [component, klass, bug] = k.split("\u0000");
    return { component, klass, n, bug: bug === "1" };
  });
}

/**
 * Whether a caught failure is one the host or the operator causes and hookspool expects: the
 * spool refused a write (full, read-only, busy past the timeout), or a HookspoolError, which
 * always says what to do. Anything else (a TypeError, a RangeError, a bare throw) is a bug.
 */
export function isExpected(e: unknown): boolean {
  return isSpoolWriteError(e) || isHookspoolError(e);
}

/** At most this many frames are kept of a bug's stack. */
const MAX_FRAMES = 8;

/**
 * Where a bug happened: the file:line of each frame of its stack, innermost first, the path
 * shortened to the part under src/ (or node_modules/). Never the message, never a function's
 * arguments: only positions in hookspool's own code.
 */
export function stackFrames(e: unknown): string[] {
  const stack = e instanceof Error && typeof e.stack === "string" ? e.stack : "";
  const out: string[] = [];
  for (const line of stack.split("\n")) {
    const m = /^\s*at (?:.*? \()?(.+?):(\d+)(?::\d+)?\)?\s*$/.exec(line);
    if (!m || m[1] === "native" || m[1].startsWith("node:")) continue;
    const path = m[1];
    const at = Math.max(path.lastIndexOf("/src/"), path.lastIndexOf("/node_modules/"));
    out.push(`${at >= 0 ? path.slice(at + 1) : (path.split("/").pop() ?? path)}:${m[2]}`);
    if (out.length === MAX_FRAMES) break;
  }
  return out;
}

/** Catch, count and log one failure of a chore, then carry on: the caller's loop must not die. */
export function caughtFault(log: Logger, component: string, what: string, e: unknown): string {
  const klass = errorClass(e);
  const bug = !isExpected(e);
  countFault(component, klass, bug);
  if (bug)
    log.limited("error", `${what} failed: a bug in hookspool (an internal issue says where)`, {
      reason: `${klass} at ${stackFrames(e).slice(0, 3).join(" < ") || "?"}`,
    });
  else log.limited("error", `${what} failed`, { reason: klass });
  return klass;
}

/** A PostgreSQL server error's SQLSTATE (five characters), or null. */
function pgSqlState(e: unknown): string | null {
  const errno = (e as { errno?: unknown } | null)?.errno;
  return typeof errno === "string" && /^[0-9A-Z]{5}$/.test(errno) ? errno : null;
}

/**
 * PostgreSQL's refusals of a write, by SQLSTATE: a lost connection (08), a deadlock or a
 * serialization failure (40), no disk or memory (53), the server shutting down or an operator's
 * cancel (57), an I/O error (58), a lock not available (55P03), a read-only transaction (25006,
 * a standby). Any other server error is a bug in hookspool.
 */
const PG_REFUSED = /^(08|40|53|57|58)|^55P03$|^25006$/;

/** The errors that mean the spool refused a write: full, out of quota, read-only, busy, I/O, the database gone. */
export function isSpoolWriteError(e: unknown): boolean {
  const code = (e as { code?: unknown } | null)?.code;
  if (typeof code !== "string") return false;
  if (code === "ERR_POSTGRES_SERVER_ERROR") return PG_REFUSED.test(pgSqlState(e) ?? "");
  // The client's own failures: the connection closed, timed out, could not be made.
  if (code.startsWith("ERR_POSTGRES_")) return true;
  return (
    /^SQLITE_(FULL|BUSY|LOCKED|IOERR|READONLY|CANTOPEN|PERM)/.test(code) ||
    code === "ENOSPC" ||
    code === "EDQUOT" ||
    code === "EROFS"
  );
}

/** SQLITE_BUSY waits busy_timeout before it fails: never start another write right after one. */
function isBusy(klass: string): boolean {
  return klass.startsWith("SQLITE_BUSY") || klass.startsWith("SQLITE_LOCKED");
}

/** The issue every refused spool write opens (kind spool); maintenance resolves it once writes work again. */
export const WRITE_FAILED_ISSUE = "spool:write_failed";

/** While writes keep failing, the issue write is tried at most this often. */
export const WRITE_ISSUE_RETRY_S = 10;

/**
 * Refused spool writes of one component: each is counted and logged (identical lines at most
 * every few seconds), and the spool:write_failed issue is opened. Opening it is a write too,
 * so it may fail for the same reason; then it is kept and tried again, at most every 10 s,
 * until the spool takes it.
 */
export class WriteFailures {
  private pending: { klass: string; count: number } | null = null;
  private triedAt = Number.NEGATIVE_INFINITY;

  constructor(
    private readonly issues: IssueSink,
    private readonly component: string,
    private readonly log: Logger,
    private readonly now: () => number,
  ) {}

  /** A write failed with `e` while doing `what` ("enqueue", "mark"); `fields` go on the log line. */
  record(what: string, e: unknown, fields: LogFields = {}): void {
    const klass = errorClass(e);
    countFault(this.component, klass);
    this.log.limited("error", `${what} failed: the spool refused the write`, { ...fields, reason: klass });
    this.pending = { klass, count: (this.pending?.count ?? 0) + 1 };
    if (!isBusy(klass)) void this.flush();
  }

  /** Whether a failure is waiting to be reported as an issue. */
  get hasPending(): boolean {
    return this.pending !== null;
  }

  /**
   * Open the issue for what failed since the last report; quiet while writes keep failing. The
   * promise settles when the write did (it never rejects), for a caller that reads hasPending next.
   */
  flush(): Promise<void> {
    if (!this.pending) return Promise.resolve();
    const now = this.now();
    if (now - this.triedAt < WRITE_ISSUE_RETRY_S && now >= this.triedAt) return Promise.resolve();
    this.triedAt = now;
    const { klass, count } = this.pending;
    return written(
      () =>
        this.issues.raiseIssue({
          fingerprint: WRITE_FAILED_ISSUE,
          kind: "spool",
          error:
            `${count} write(s) refused in the ${this.component} (${klass}): ` +
            "disk full, quota, read-only file or a stuck lock",
          now,
        }),
      // Failures counted while the write was out are reported by the next flush.
      () => {
        if (this.pending && this.pending.count === count) this.pending = null;
      },
      // Still refused: the next flush tries again.
      () => {},
    );
  }
}

/** An internal issue is written at most this often per place; the metric counts every one. */
export const BUG_ISSUE_EVERY_S = 60;

/**
 * Every failure one component's loops catch, sorted: a refused write goes to WriteFailures,
 * any other expected failure is counted and logged, and a bug is counted, logged with its
 * frames and reported as an internal issue (internal:<component>:<what>:<class>@<file:line>),
 * written again at most once a minute while it repeats, and kept until the spool takes it.
 */
export class Faults {
  readonly writes: WriteFailures;
  private readonly bugs = new Map<string, { error: string; pending: boolean; writtenAt: number }>();

  constructor(
    private readonly issues: IssueSink,
    private readonly component: string,
    private readonly log: Logger,
    private readonly now: () => number,
  ) {
    this.writes = new WriteFailures(issues, component, log, now);
  }

  /** A loop caught `e` while doing `what`; returns the error's class. */
  caught(what: string, e: unknown, fields: LogFields = {}): string {
    if (isSpoolWriteError(e)) {
      this.writes.record(what, e, fields);
      return errorClass(e);
    }
    const klass = caughtFault(this.log, this.component, what, e);
    if (isExpected(e)) return klass;
    const frames = stackFrames(e);
    const fingerprint = `internal:${this.component}:${what}:${klass}@${frames[0] ?? "?"}`;
    const error = `${what} failed: ${klass} at ${frames.join(" < ") || "an unknown place"}`;
    const known = this.bugs.get(fingerprint);
    this.bugs.set(fingerprint, { error, pending: true, writtenAt: known?.writtenAt ?? Number.NEGATIVE_INFINITY });
    void this.flush();
    return klass;
  }

  /**
   * Write what is due: the refused-write issue, and each bug's issue at most once a minute (settles when written; never
   * rejects).
   */
  flush(): Promise<void> {
    const out = [this.writes.flush()];
    const now = this.now();
    for (const [fingerprint, b] of this.bugs) {
      if (!b.pending || (now - b.writtenAt < BUG_ISSUE_EVERY_S && now >= b.writtenAt)) continue;
      const before = b.writtenAt;
      b.pending = false;
      b.writtenAt = now;
      out.push(
        written(
          () => this.issues.raiseIssue({ fingerprint, kind: "internal", error: b.error, now }),
          () => {},
          // The spool refused this write too: the next flush tries again.
          () => {
            b.pending = true;
            b.writtenAt = before;
          },
        ),
      );
    }
    return Promise.all(out).then(() => {});
  }
}

/**
 * An issue write, its outcome handed to `ok` or `refused` (a throw before the promise too); the promise never rejects.
 */
function written(write: () => Promise<void>, ok: () => void, refused: (e: unknown) => void): Promise<void> {
  try {
    return write().then(ok, refused);
  } catch (e) {
    refused(e);
    return Promise.resolve();
  }
}
