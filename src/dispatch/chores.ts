// What the maintenance chores share: their context, the rule for surviving a failure, and the
// "open an issue once per onset" helper. Each chore is its own Service (liveness.ts,
// spool-limits.ts, alerts.ts, retention-pass.ts) and maintenance.ts builds the set. A chore runs
// only while its dispatcher leads (SQLite: always, under dispatch.lock; PostgreSQL: the holder
// of the maintenance lock, so several dispatchers on one database run each chore once).
import type { Clock } from "../clock.ts";
import type { Env } from "../config/load.ts";
import type { IntakeSource } from "../config/sources.ts";
import type { Config } from "../config/types.ts";
import type { Logger } from "../log.ts";
import type { Http } from "../net/http.ts";
import type { Faults } from "../obs/faults.ts";
import { Periodic } from "../service.ts";
import type { DispatchStore, MaintenanceStore } from "../store/api.ts";
import type { IssueKind } from "../store/issues.ts";

/** How often each chore runs, and how soon after the start the first run comes. */
export const MAINTENANCE_EVERY_S = 60;
const FIRST_RUN_MS = 1000;

export interface ChoreContext {
  store: MaintenanceStore;
  /**
   * The dispatcher's store: now_eff (so a backwards clock step makes maintenance's time stand
   * still too) and whether this dispatcher leads maintenance now.
   */
  leader: Pick<DispatchStore, "effectiveNow" | "leads">;
  /** The current config (the dispatcher reloads it). */
  config(): Config;
  clock: Clock;
  log: Logger;
  env: Env;
  diskFree?: (path: string) => number | null;
  /** The source plugins the dispatcher loaded (their liveness expectations). */
  plugins?: () => ReadonlyMap<string, IntakeSource> | undefined;
  /** What the chores catch: refused writes (one spool issue) and bugs (an internal issue). */
  faults: Faults;
  /** The health probes' client (default: the one every bobbin's request goes through). */
  http?: Http;
  /** <home>/bodies/, whose files no event names the body sweep removes (unset: no sweep). */
  bodies?: string;
}

/** A chore failed: counted and logged by class; a refused write opens the spool issue, a bug an internal one. */
export function survive(ctx: ChoreContext, what: string, e: unknown): void {
  ctx.faults.caught(what, e);
}

/**
 * A chore: a Periodic service that maintenance can also run once, in order, from its tick. It runs at now_eff, when its
 * dispatcher leads.
 */
export class Chore extends Periodic {
  constructor(name: string, ctx: ChoreContext, run: (now: number) => void | Promise<void>) {
    super(name, {
      everyMs: () => MAINTENANCE_EVERY_S * 1000,
      firstMs: FIRST_RUN_MS,
      run: async () => {
        const now = await ctx.leader.effectiveNow();
        // Make sure at a round trip's cost: a leader whose session ended stands back at once.
        if (!(await ctx.leader.leads(now, true))) return;
        await run(now);
      },
      onError: (e) => survive(ctx, name, e),
    });
  }
}

/** Open an issue on a condition's onset; a persisting condition does not count again every minute. */
export async function raiseOnce(
  store: MaintenanceStore,
  log: Logger,
  fingerprint: string,
  kind: IssueKind,
  error: string,
  now: number,
): Promise<void> {
  const row = await store.issueByFingerprint(fingerprint);
  if (row && (row.state === "open" || row.state === "acked" || row.state === "ignored")) return;
  await store.raiseIssue({ fingerprint, kind, error, now });
  log.warn("issue opened", { reason: fingerprint });
}
