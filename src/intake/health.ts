// GET /healthz: the status document; 503 while the spool is unwritable or a hard
// limit is active, 200 with `degraded` for soft problems. The same on either backend: the write
// probe, the last enqueue and the status facts are the intake store's.
import type { Clock } from "../clock.ts";
import type { IntakeSource } from "../config/sources.ts";
import type { Config } from "../config/types.ts";
import { errorClass } from "../obs/faults.ts";
import type { StatusDoc } from "../obs/status.ts";
import { storeStatus } from "../obs/store-status.ts";
import type { IntakeStore } from "../store/api.ts";
import type { Backpressure } from "./backpressure.ts";

/** Writability is proven at most this often by a probe write; a recent enqueue proves it too. */
export const WRITE_PROBE_S = 30;
/** After a refused write, the probe tries again this soon, so one transient failure is not an outage. */
export const FAILED_PROBE_S = 5;

export class Health {
  private probedAt: number | null = null;
  private triedAt: number | null = null;

  constructor(
    private readonly store: IntakeStore,
    private readonly dbPath: string,
    private readonly clock: Clock,
    private readonly backpressure: Backpressure,
    /** Called after a probe write succeeded (the intake reports a held-back spool issue then). */
    private readonly onWritable: () => void = () => {},
  ) {}

  /**
   * The document and the HTTP status for it. A scrape forces a probe write at most every 30 s,
   * or every 5 s while the last write was refused; a probe that succeeds ends the refusal.
   */
  async check(config: Config, plugins?: ReadonlyMap<string, IntakeSource>): Promise<{ code: number; doc: StatusDoc }> {
    const now = this.clock.now();
    const lastEnqueue = await this.store.lastEnqueueAt();
    let writableAt: number | null =
      lastEnqueue !== null && now - lastEnqueue <= WRITE_PROBE_S ? lastEnqueue : this.probedAt;
    const failing = this.backpressure.failing;
    const every = failing ? FAILED_PROBE_S : WRITE_PROBE_S;
    const due = this.triedAt === null || now - this.triedAt >= every || now < this.triedAt;
    const stale = writableAt === null || now - writableAt > WRITE_PROBE_S;
    if ((stale || failing) && due) {
      this.triedAt = now;
      try {
        // Busy: another process holds the write lock; the answer does not wait for it, and the
        // next scrape tries again (the enqueues waiting for it say what the lock costs).
        if ((await this.store.probeWrite(now)) === "busy") this.triedAt = null;
        else {
          this.probedAt = now;
          writableAt = now;
          this.backpressure.writeOk();
          this.onWritable();
        }
      } catch (e) {
        this.backpressure.writeFailed(`unwritable (${errorClass(e)})`);
      }
    }
    const hard = this.backpressure.active();
    const { doc, hard: isHard } = await storeStatus(this.store, config, this.dbPath, {
      now,
      writableCheckedAt: writableAt,
      hard,
      diskFree: this.backpressure.freeReading(),
      plugins,
    });
    return { code: isHard ? 503 : 200, doc };
  }
}
