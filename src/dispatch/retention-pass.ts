// The retention chore: once an hour (by the spool's own record of the last pass, so a restart
// or a new leader does not reset the hour) delete what the retention policy says is old enough.
import { policyFromConfig } from "../store/retention.ts";
import { Chore, type ChoreContext } from "./chores.ts";

export const RETENTION_EVERY_S = 3600;

export function retentionPass(ctx: ChoreContext): Chore {
  return new Chore("retention", ctx, async (now) => {
    const { store } = ctx;
    const last = await store.lastRetention();
    // A clock that stepped back (now < last) runs the pass rather than waiting for the past.
    if (last !== null && now - last < RETENTION_EVERY_S && now >= last) return;
    const counts = await store.runRetention(policyFromConfig(ctx.config()), now);
    await store.noteRetention(now);
    ctx.log.info("retention pass", {
      reason: Object.entries(counts)
        .map(([k, v]) => `${k}=${v}`)
        .join(" "),
    });
  });
}
