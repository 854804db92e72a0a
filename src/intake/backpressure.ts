// Backpressure: refuse with 503 what the spool could not keep.
import type { Clock } from "../clock.ts";
import { diskFreeBytes } from "../obs/disk.ts";

/** statvfs is cached this long. */
const DISK_CACHE_S = 5;

export class Backpressure {
  private checkedAt = Number.NEGATIVE_INFINITY;
  private free: number | null = null;
  /** The last write the spool refused, until a write (an enqueue or the health probe) succeeds. */
  private writeFailure: string | null = null;

  constructor(
    private readonly dbPath: string,
    private minFreeBytes: number,
    private readonly clock: Clock,
    private readonly freeBytes: (path: string) => number | null = diskFreeBytes,
  ) {}

  setMinFree(bytes: number): void {
    this.minFreeBytes = bytes;
  }

  /** Free space below limits.min_free_bytes: the limit is active. */
  diskLow(): boolean {
    const now = this.clock.now();
    if (now - this.checkedAt >= DISK_CACHE_S || now < this.checkedAt) {
      this.free = this.freeBytes(this.dbPath);
      this.checkedAt = now;
    }
    return this.free !== null && this.free < this.minFreeBytes;
  }

  /** A write was refused. The cached free-space reading predates it, so the next one is measured. */
  writeFailed(reason: string): void {
    this.writeFailure = reason;
    this.checkedAt = Number.NEGATIVE_INFINITY;
  }

  /** A write succeeded: the spool takes writes again. */
  writeOk(): void {
    this.writeFailure = null;
  }

  /** Whether the last write was refused (the health probe then tries a write sooner). */
  get failing(): boolean {
    return this.writeFailure !== null;
  }

  /** The last free-space reading. */
  freeReading(): number | null {
    this.diskLow();
    return this.free;
  }

  /** The hard limits active now, for /healthz (503 while any is). */
  active(): string[] {
    const out: string[] = [];
    if (this.diskLow()) out.push(`spool: free disk below limits.min_free_bytes (${this.minFreeBytes})`);
    if (this.writeFailure) out.push(`spool: ${this.writeFailure}`);
    return out;
  }
}

/**
 * Which 503 a failed spool write earns: busy (SQLITE_BUSY; on PostgreSQL anything but a full
 * disk: a lost connection, a deadlock, a server shutting down) or full (SQLITE_FULL, ENOSPC,
 * PostgreSQL's class 53). A PostgreSQL failure is never read as the request's own fault (which
 * would quarantine it and ack it): the sender keeps the event and tries again.
 */
export function spoolFailure(e: unknown): "busy" | "spool_full" | null {
  const code = (e as { code?: string } | null)?.code ?? "";
  if (code.startsWith("ERR_POSTGRES_"))
    return String((e as { errno?: unknown }).errno ?? "").startsWith("53") ? "spool_full" : "busy";
  if (code === "SQLITE_BUSY" || code === "SQLITE_LOCKED" || code.startsWith("SQLITE_BUSY_")) return "busy";
  if (
    code === "SQLITE_FULL" ||
    code === "ENOSPC" ||
    code === "SQLITE_IOERR" ||
    code.startsWith("SQLITE_IOERR_") ||
    code === "SQLITE_READONLY" ||
    code === "SQLITE_CANTOPEN"
  )
    return "spool_full";
  return null;
}
