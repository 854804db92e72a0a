// The spool-limits chore: free space below limits.min_free_bytes opens spool:min_free_bytes
// until it clears, and spool:write_failed (a write the spool refused, in any process) resolves
// once a whole maintenance interval has passed without another refusal.
import { diskFreeBytes } from "../obs/disk.ts";
import { WRITE_FAILED_ISSUE } from "../obs/faults.ts";
import { getIssueByFingerprint, resolveIssue } from "../store/issues.ts";
import { Chore, type ChoreContext, MAINTENANCE_EVERY_S, raiseOnce } from "./chores.ts";

export function spoolLimits(ctx: ChoreContext): Chore {
  return new Chore("spool limits", ctx, () => {
    const { spool } = ctx;
    const config = ctx.config();
    const now = ctx.now();
    // A refusal's issue held back by a refusing spool is written now, if the spool takes it.
    ctx.faults.flush();
    const free = (ctx.diskFree ?? diskFreeBytes)(ctx.dbPath);
    if (free !== null && free < config.limits.min_free_bytes) raiseOnce(ctx, "spool:min_free_bytes", "spool", `${free} bytes free, below limits.min_free_bytes (${config.limits.min_free_bytes})`, now);
    else resolveIssue(spool, "spool:min_free_bytes", now);
    const failed = getIssueByFingerprint(spool, WRITE_FAILED_ISSUE);
    if (failed && (failed.state === "open" || failed.state === "acked") && now - failed.last_at >= MAINTENANCE_EVERY_S && !ctx.faults.writes.hasPending) {
      resolveIssue(spool, WRITE_FAILED_ISSUE, now);
    }
  });
}
