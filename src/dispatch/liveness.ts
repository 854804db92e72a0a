// Liveness chores: a source that has sent nothing for longer than it should opens
// source_silent:<source>, and a poll with no delivered tick for three intervals opens
// poll:<instance>:stale. The next event (or delivered tick) resolves it. The passes read the
// store's MaintenanceStore, so SQLite's maintenance and PostgreSQL's run the same rules.
import type { IntakeSource } from "../config/sources.ts";
import { expectEvery } from "../config/sources.ts";
import type { Config } from "../config/types.ts";
import type { Logger } from "../log.ts";
import { silentFor } from "../obs/status.ts";
import type { MaintenanceStore } from "../store/api.ts";
import { Chore, type ChoreContext, raiseOnce } from "./chores.ts";

/**
 * No event for longer than the source's expectation (config's expect_every_s, else the
 * plugin's). Before the first event the clock starts when the expectation was first seen, and
 * status reads the same fact, so the two never disagree.
 */
export async function sourceLivenessPass(
  store: MaintenanceStore,
  config: Config,
  now: number,
  plugins: ReadonlyMap<string, IntakeSource> | undefined,
  log: Logger,
): Promise<void> {
  for (const name of Object.keys(config.sources)) {
    const fp = `source_silent:${name}`;
    const every = expectEvery(config, name, plugins);
    if (every === 0) {
      await store.resolveIssue(fp, now);
      continue;
    }
    const expectedSince = await store.expectationSince(name, now);
    const silent = silentFor(now, await store.metaNumber(`source:${name}:last_event_at`), expectedSince, every);
    if (silent !== null)
      await raiseOnce(
        store,
        log,
        fp,
        "source_silent",
        `no event for ${Math.round(silent)}s (expected every ${every}s)`,
        now,
      );
    else await store.resolveIssue(fp, now);
  }
}

/** A poll with no delivered tick for more than 3 x every_s is stale. */
export async function pollLivenessPass(
  store: MaintenanceStore,
  config: Config,
  now: number,
  log: Logger,
): Promise<void> {
  for (const p of await store.pollRows()) {
    const every = config.sources[p.instance]?.every_s;
    if (!every) continue;
    const fp = `poll:${p.instance}:stale`;
    const ref = p.delivered_at ?? p.created_at;
    if (now - ref > 3 * every)
      await raiseOnce(
        store,
        log,
        fp,
        "source_silent",
        `no delivered tick for ${Math.round(now - ref)}s (every_s = ${every})`,
        now,
      );
    else await store.resolveIssue(fp, now);
  }
}

export function sourceLiveness(ctx: ChoreContext): Chore {
  return new Chore("liveness", ctx, (now) =>
    sourceLivenessPass(ctx.store, ctx.config(), now, ctx.plugins?.(), ctx.log),
  );
}

export function pollLiveness(ctx: ChoreContext): Chore {
  return new Chore("polls", ctx, (now) => pollLivenessPass(ctx.store, ctx.config(), now, ctx.log));
}
