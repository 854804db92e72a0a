// Failures a long-running part catches and carries on from (a write the spool refused, a chore
// that threw): counted per component and class for /metrics, logged without flooding, and, for
// a refused write, the spool issue that tells the operator.
import type { Spool } from "../store/db.ts";
import { raiseIssue } from "../store/issues.ts";
import type { LogFields, Logger } from "../log.ts";

/** The class of a caught error: SQLite's or the OS's code (SQLITE_FULL, ENOSPC), else its name. */
export function errorClass(e: unknown): string {
  const code = (e as { code?: unknown } | null)?.code;
  if (typeof code === "string" && /^[A-Z][A-Z0-9_]{1,40}$/.test(code)) return code;
  if (e instanceof Error) return e.name && e.name !== "Error" ? e.name : (e.constructor?.name ?? "Error");
  return typeof e;
}

const caught = new Map<string, number>();

/** Count one caught failure of `component` (process-wide, reset on restart like every counter). */
export function countFault(component: string, klass: string): void {
  const k = `${component}\u0000${klass}`;
  caught.set(k, (caught.get(k) ?? 0) + 1);
}

/** Every caught failure so far, per component and class. */
export function faultCounts(): { component: string; klass: string; n: number }[] {
  return [...caught.entries()].sort().map(([k, n]) => {
    const [component, klass] = k.split("\u0000");
    return { component, klass, n };
  });
}

/** Catch, count and log one failure of a chore, then carry on: the caller's loop must not die. */
export function caughtFault(log: Logger, component: string, what: string, e: unknown): string {
  const klass = errorClass(e);
  countFault(component, klass);
  log.limited("error", `${what} failed`, { reason: klass });
  return klass;
}

/** The errors that mean the spool refused a write: full, out of quota, read-only, busy, I/O. */
export function isSpoolWriteError(e: unknown): boolean {
  const code = (e as { code?: unknown } | null)?.code;
  if (typeof code !== "string") return false;
  return /^SQLITE_(FULL|BUSY|LOCKED|IOERR|READONLY|CANTOPEN|PERM)/.test(code) || code === "ENOSPC" || code === "EDQUOT" || code === "EROFS";
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
    private readonly spool: Spool,
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
    if (!isBusy(klass)) this.flush();
  }

  /** Whether a failure is waiting to be reported as an issue. */
  get hasPending(): boolean {
    return this.pending !== null;
  }

  /** Open the issue for what failed since the last report; quiet while writes keep failing. */
  flush(): void {
    if (!this.pending) return;
    const now = this.now();
    if (now - this.triedAt < WRITE_ISSUE_RETRY_S && now >= this.triedAt) return;
    this.triedAt = now;
    const { klass, count } = this.pending;
    try {
      raiseIssue(this.spool, {
        fingerprint: WRITE_FAILED_ISSUE,
        kind: "spool",
        error: `${count} write(s) refused in the ${this.component} (${klass}): disk full, quota, read-only file or a stuck lock`,
        now,
      });
      this.pending = null;
    } catch {
      // Still refused: the next flush tries again.
    }
  }
}
