// The retention chore: once an hour (by the spool's own record of the last pass, so a restart
// does not reset the hour) delete what the retention policy says is old enough.
import { getMetaNumber, noteRetentionPass } from "../store/sqlite/meta.ts";
import { policyFromConfig } from "../store/retention.ts";
import { runRetention } from "../store/sqlite/retention.ts";
import { Chore, type ChoreContext } from "./chores.ts";

export const RETENTION_EVERY_S = 3600;

export function retentionPass(ctx: ChoreContext): Chore {
  return new Chore("retention", ctx, async () => {
    const { spool } = ctx;
    const now = ctx.now();
    const last = getMetaNumber(spool, "last_retention_at");
    // A clock that stepped back (now < last) runs the pass rather than waiting for the past.
    if (last !== null && now - last < RETENTION_EVERY_S && now >= last) return;
    const counts = await runRetention(spool, policyFromConfig(ctx.config()), now);
    noteRetentionPass(spool, now);
    ctx.log.info("retention pass", { reason: Object.entries(counts).map(([k, v]) => `${k}=${v}`).join(" ") });
  });
}
