// Maintenance on PostgreSQL: the chores that keep a shared spool, run by exactly one dispatcher at
// a time, the holder of the maintenance lock (taken over by another when its holder dies):
// source and poll liveness, the end of spool:write_failed, the alerts, and the hourly retention
// pass timed by the spool's own record of the last one, so a new leader keeps the hour. The disk
// limit is the database server's to keep.
import type { Clock } from "../clock.ts";
import type { Env } from "../config/load.ts";
import type { Config } from "../config/types.ts";
import type { Logger } from "../log.ts";
import { Faults } from "../obs/faults.ts";
import { Periodic, type Service } from "../service.ts";
import type { DispatchStore, MaintenanceStore } from "../store/api.ts";
import type { IntakeSource } from "../config/sources.ts";
import { pollLivenessPass, sourceLivenessPass } from "./liveness.ts";
import { resolveWriteFailed } from "./spool-limits.ts";
import type { PgSpool } from "../store/pg/db.ts";
import { lastRetentionPg, noteRetentionPassPg } from "../store/pg/meta.ts";
import { runRetentionPg } from "../store/pg/retention.ts";
import { pgAlertStore, pgMaintenanceStore } from "../store/pg/store.ts";
import { policyFromConfig } from "../store/retention.ts";
import { runAlerts } from "./alerts.ts";
import { MAINTENANCE_EVERY_S } from "./chores.ts";
import { RETENTION_EVERY_S } from "./retention-pass.ts";

export interface PgMaintenanceOptions {
  pg: PgSpool;
  store: DispatchStore;
  config(): Config;
  /** The source plugins the dispatcher loaded (their liveness expectations). */
  plugins?: () => ReadonlyMap<string, IntakeSource> | undefined;
  clock: Clock;
  log: Logger;
  env: Env;
}

export class PgMaintenance implements Service {
  readonly name = "maintenance";
  private readonly faults: Faults;
  private readonly timer: Periodic;
  private readonly chores: MaintenanceStore;

  constructor(private readonly o: PgMaintenanceOptions) {
    this.faults = new Faults(o.store, "maintenance", o.log, () => o.clock.now());
    this.chores = pgMaintenanceStore(o.pg);
    this.timer = new Periodic("maintenance", { everyMs: () => MAINTENANCE_EVERY_S * 1000, firstMs: 1000, run: () => this.tick(), onError: (e) => this.faults.caught("maintenance", e) });
  }

  get active(): boolean {
    return this.timer.active;
  }

  start(): Promise<void> {
    return this.timer.start();
  }

  stop(): Promise<void> {
    return this.timer.stop();
  }

  /** One round, when this dispatcher leads: alerts, then retention when an hour has passed. */
  async tick(): Promise<void> {
    this.faults.flush();
    const { pg, store, log } = this.o;
    const now = await store.effectiveNow();
    if (!(await store.leads(now, true))) return;
    const config = this.o.config();
    const chores = this.chores;
    // A chore's failure never stops the others.
    const survive = async (what: string, run: () => Promise<unknown>) => {
      try {
        await run();
      } catch (e) {
        this.faults.caught(what, e);
      }
    };
    await survive("liveness", () => sourceLivenessPass(chores, config, now, this.o.plugins?.(), log));
    await survive("polls", () => pollLivenessPass(chores, config, now, log));
    await survive("spool limits", () => resolveWriteFailed(chores, this.faults, now));
    await survive("alerts", () => runAlerts({ store: pgAlertStore(pg), config, env: this.o.env, log, now, faults: this.faults }));
    const last = await lastRetentionPg(pg);
    if (last !== null && now - last < RETENTION_EVERY_S && now >= last) return;
    const counts = await runRetentionPg(pg, policyFromConfig(config), now);
    await noteRetentionPassPg(pg, now);
    log.info("retention pass", { reason: Object.entries(counts).map(([k, v]) => `${k}=${v}`).join(" ") });
  }
}
