// The retention chore: once an hour (by the spool's own record of the last pass, so a restart
// or a new leader does not reset the hour) delete what the retention policy says is old enough,
// then the body files no event names any more. The body sweep also runs on its own every
// minute, so a file kept before a crash and never committed goes within minutes.
import { sweepBodies } from "../bodies.ts";
import { policyFromConfig } from "../store/retention.ts";
import { Chore, type ChoreContext } from "./chores.ts";

export const RETENTION_EVERY_S = 3600;

export function retentionPass(ctx: ChoreContext): Chore {
  return new Chore("retention", ctx, async (now) => {
    const { store } = ctx;
    const last = await store.lastRetention();
    // A clock that stepped back (now < last) runs the pass rather than waiting for the past.
    if (last !== null && now - last < RETENTION_EVERY_S && now >= last) return;
    const rows = await store.runRetention(policyFromConfig(ctx.config()), now);
    await store.noteRetention(now);
    const freed = ctx.bodies ? await sweepBodies(ctx.bodies, (h) => store.namedBodies(h), ctx.clock.now()) : null;
    const counts = freed ? { ...rows, body_files: freed.files, body_bytes: freed.bytes } : rows;
    ctx.log.info("retention pass", {
      reason: Object.entries(counts)
        .map(([k, v]) => `${k}=${v}`)
        .join(" "),
    });
  });
}

/** The body sweep: files no event names, older than the grace (orphans of a crash, deleted events'). */
export function bodySweep(ctx: ChoreContext): Chore {
  return new Chore("body sweep", ctx, async () => {
    if (!ctx.bodies) return;
    const freed = await sweepBodies(ctx.bodies, (h) => ctx.store.namedBodies(h), ctx.clock.now());
    if (freed.files > 0) ctx.log.info("body files removed", { reason: `files=${freed.files} bytes=${freed.bytes}` });
  });
}
