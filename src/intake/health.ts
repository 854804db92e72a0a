// GET /healthz (spec 11.1): the status document; 503 while the spool is unwritable or a hard
// limit is active, 200 with `degraded` for soft problems.
import type { Clock } from "../clock.ts";
import type { Config } from "../config/types.ts";
import { buildStatus, type StatusDoc } from "../obs/status.ts";
import type { Spool } from "../store/db.ts";
import { getMetaNumber, probeWrite } from "../store/meta.ts";
import type { Backpressure } from "./backpressure.ts";

/** Writability is proven at most this often by a probe write; a recent enqueue proves it too. */
export const WRITE_PROBE_S = 30;

export class Health {
  private probedAt: number | null = null;
  private triedAt: number | null = null;
  private probeError: string | null = null;

  constructor(
    private readonly spool: Spool,
    private readonly dbPath: string,
    private readonly clock: Clock,
    private readonly backpressure: Backpressure,
  ) {}

  /** The document and the HTTP status for it. A scrape never forces an fsync on its own account more than every 30 s. */
  check(config: Config): { code: number; doc: StatusDoc } {
    const now = this.clock.now();
    const lastEnqueue = getMetaNumber(this.spool.db, "last_enqueue_at");
    let writableAt: number | null = lastEnqueue !== null && now - lastEnqueue <= WRITE_PROBE_S ? lastEnqueue : this.probedAt;
    const due = this.triedAt === null || now - this.triedAt >= WRITE_PROBE_S || now < this.triedAt;
    if ((writableAt === null || now - writableAt > WRITE_PROBE_S) && due) {
      this.triedAt = now;
      try {
        probeWrite(this.spool, now);
        this.probedAt = now;
        this.probeError = null;
        writableAt = now;
      } catch (e) {
        this.probeError = `spool: unwritable (${(e as { code?: string }).code ?? "error"})`;
      }
    }
    const hard = [...this.backpressure.active(), ...(this.probeError ? [this.probeError] : [])];
    const { doc, hard: isHard } = buildStatus(this.spool, config, this.dbPath, { now, writableCheckedAt: writableAt, hard, diskFree: this.backpressure.freeReading() });
    return { code: isHard ? 503 : 200, doc };
  }
}
