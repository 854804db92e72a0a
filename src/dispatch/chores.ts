// What the maintenance chores share: their context, the rule for surviving a failure, and the
// "open an issue once per onset" helper. Each chore is its own Service (liveness.ts,
// spool-limits.ts, alerts.ts, retention-pass.ts) and maintenance.ts builds the set.
import type { Clock } from "../clock.ts";
import type { Env } from "../config/load.ts";
import type { IntakeSource } from "../config/sources.ts";
import type { Config } from "../config/types.ts";
import type { Logger } from "../log.ts";
import type { Faults } from "../obs/faults.ts";
import { Periodic } from "../service.ts";
import type { SqliteSpool } from "../store/sqlite/db.ts";
import type { MaintenanceStore } from "../store/api.ts";
import type { IssueKind } from "../store/issues.ts";

/** How often each chore runs, and how soon after the start the first run comes. */
export const MAINTENANCE_EVERY_S = 60;
const FIRST_RUN_MS = 1000;

export interface ChoreContext {
  spool: SqliteSpool;
  dbPath: string;
  /** The current config (the dispatcher reloads it). */
  config(): Config;
  /** now_eff, so a backwards clock step makes maintenance's time stand still too. */
  now(): number;
  clock: Clock;
  log: Logger;
  env: Env;
  diskFree?: (path: string) => number | null;
  /** The source plugins the dispatcher loaded (their liveness expectations). */
  plugins?: () => ReadonlyMap<string, IntakeSource> | undefined;
  /** What the chores catch: refused writes (one spool issue) and bugs (an internal issue). */
  faults: Faults;
}

/** A chore failed: counted and logged by class; a refused write opens the spool issue, a bug an internal one. */
export function survive(ctx: ChoreContext, what: string, e: unknown): void {
  ctx.faults.caught(what, e);
}

/** A chore: a Periodic service that maintenance can also run once, in order, from its tick. */
export class Chore extends Periodic {
  constructor(name: string, ctx: ChoreContext, run: () => void | Promise<void>) {
    super(name, {
      everyMs: () => MAINTENANCE_EVERY_S * 1000,
      firstMs: FIRST_RUN_MS,
      run: async () => {
        await run();
      },
      onError: (e) => survive(ctx, name, e),
    });
  }
}

/** Open an issue on a condition's onset; a persisting condition does not count again every minute. */
export async function raiseOnce(store: MaintenanceStore, log: Logger, fingerprint: string, kind: IssueKind, error: string, now: number): Promise<void> {
  const row = await store.issueByFingerprint(fingerprint);
  if (row && (row.state === "open" || row.state === "acked" || row.state === "ignored")) return;
  await store.raiseIssue({ fingerprint, kind, error, now });
  log.warn("issue opened", { reason: fingerprint });
}
