// The spool-limits chore: free space below limits.min_free_bytes opens spool:min_free_bytes
// until it clears, and spool:write_failed (a write the spool refused, in any process) resolves
// once a whole maintenance interval has passed without another refusal. The free space is
// measured where the spool's file lives; on PostgreSQL there is none here (the server keeps its
// disk and refuses a write it cannot keep), so only spool:write_failed applies there.
import { diskFreeBytes } from "../obs/disk.ts";
import { type Faults, WRITE_FAILED_ISSUE } from "../obs/faults.ts";
import type { MaintenanceStore } from "../store/api.ts";
import { Chore, type ChoreContext, MAINTENANCE_EVERY_S, raiseOnce } from "./chores.ts";

export function spoolLimits(ctx: ChoreContext): Chore {
  return new Chore("spool limits", ctx, async (now) => {
    const { store } = ctx;
    const config = ctx.config();
    // A refusal's issue held back by a refusing spool is written now, if the spool takes it.
    await ctx.faults.flush();
    if (store.spoolFile !== null) {
      const free = (ctx.diskFree ?? diskFreeBytes)(store.spoolFile);
      if (free !== null && free < config.limits.min_free_bytes)
        await raiseOnce(
          store,
          ctx.log,
          "spool:min_free_bytes",
          "spool",
          `${free} bytes free, below limits.min_free_bytes (${config.limits.min_free_bytes})`,
          now,
        );
      else await store.resolveIssue("spool:min_free_bytes", now);
    }
    await resolveWriteFailed(store, ctx.faults, now);
  });
}

/** spool:write_failed resolves once a whole maintenance interval passed without another refusal. */
export async function resolveWriteFailed(store: MaintenanceStore, faults: Faults, now: number): Promise<void> {
  const failed = await store.issueByFingerprint(WRITE_FAILED_ISSUE);
  if (
    failed &&
    (failed.state === "open" || failed.state === "acked") &&
    now - failed.last_at >= MAINTENANCE_EVERY_S &&
    !faults.writes.hasPending
  ) {
    await store.resolveIssue(WRITE_FAILED_ISSUE, now);
  }
}
