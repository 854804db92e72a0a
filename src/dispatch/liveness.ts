// Liveness chores: a source that has sent nothing for longer than it should opens
// source_silent:<source>, and a poll with no delivered tick for three intervals opens
// poll:<instance>:stale. The next event (or delivered tick) resolves it.
import { expectEvery } from "../config/sources.ts";
import { silentFor } from "../obs/status.ts";
import { resolveIssue } from "../store/issues.ts";
import { expectationSince, getMetaNumber } from "../store/meta.ts";
import { pollRows } from "../store/stats.ts";
import { Chore, type ChoreContext, raiseOnce } from "./chores.ts";

/**
 * No event for longer than the source's expectation (config's expect_every_s, else the
 * plugin's). Before the first event the clock starts when the expectation was first seen, and
 * status reads the same fact, so the two never disagree.
 */
export function sourceLiveness(ctx: ChoreContext): Chore {
  return new Chore("liveness", ctx, () => {
    const { spool } = ctx;
    const config = ctx.config();
    const now = ctx.now();
    const plugins = ctx.plugins?.();
    for (const name of Object.keys(config.sources)) {
      const fp = `source_silent:${name}`;
      const every = expectEvery(config, name, plugins);
      if (every === 0) {
        resolveIssue(spool, fp, now);
        continue;
      }
      const expectedSince = expectationSince(spool, name, now);
      const silent = silentFor(now, getMetaNumber(spool, `source:${name}:last_event_at`), expectedSince, every);
      if (silent !== null) raiseOnce(ctx, fp, "source_silent", `no event for ${Math.round(silent)}s (expected every ${every}s)`, now);
      else resolveIssue(spool, fp, now);
    }
  });
}

/** A poll with no delivered tick for more than 3 x every_s is stale. */
export function pollLiveness(ctx: ChoreContext): Chore {
  return new Chore("polls", ctx, () => {
    const config = ctx.config();
    const now = ctx.now();
    for (const p of pollRows(ctx.spool)) {
      const every = config.sources[p.instance]?.every_s;
      if (!every) continue;
      const fp = `poll:${p.instance}:stale`;
      const ref = p.delivered_at ?? p.created_at;
      if (now - ref > 3 * every) raiseOnce(ctx, fp, "source_silent", `no delivered tick for ${Math.round(now - ref)}s (every_s = ${every})`, now);
      else resolveIssue(ctx.spool, fp, now);
    }
  });
}
