// Maintenance on PostgreSQL: the chores that keep a shared spool, run by exactly one dispatcher at
// a time, the holder of the maintenance lock (taken over by another when its holder dies): the
// alerts, and the hourly retention pass timed by the spool's own record of the last one, so a
// new leader keeps the hour. The disk limits are the database server's to keep; source and poll
// liveness are not watched on this backend yet (`hookspool status` on SQLite shows them).
import type { Clock } from "../clock.ts";
import type { Env } from "../config/load.ts";
import type { Config } from "../config/types.ts";
import type { Logger } from "../log.ts";
import { Faults } from "../obs/faults.ts";
import { Periodic, type Service } from "../service.ts";
import type { DispatchStore } from "../store/api.ts";
import type { PgSpool } from "../store/pg/db.ts";
import { lastRetentionPg, noteRetentionPassPg, runRetentionPg } from "../store/pg/retention.ts";
import { pgAlertStore } from "../store/pg/store.ts";
import { policyFromConfig } from "../store/retention.ts";
import { runAlerts } from "./alerts.ts";
import { MAINTENANCE_EVERY_S } from "./chores.ts";
import { RETENTION_EVERY_S } from "./retention-pass.ts";

export interface PgMaintenanceOptions {
  pg: PgSpool;
  store: DispatchStore;
  config(): Config;
  clock: Clock;
  log: Logger;
  env: Env;
}

export class PgMaintenance implements Service {
  readonly name = "maintenance";
  private readonly faults: Faults;
  private readonly timer: Periodic;

  constructor(private readonly o: PgMaintenanceOptions) {
    this.faults = new Faults(o.store, "maintenance", o.log, () => o.clock.now());
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
    if (!(await store.leads(now))) return;
    const config = this.o.config();
    try {
      await runAlerts({ store: pgAlertStore(pg), config, env: this.o.env, log, now, faults: this.faults });
    } catch (e) {
      this.faults.caught("alerts", e);
    }
    const last = await lastRetentionPg(pg);
    if (last !== null && now - last < RETENTION_EVERY_S && now >= last) return;
    const counts = await runRetentionPg(pg, policyFromConfig(config), now);
    await noteRetentionPassPg(pg, now);
    log.info("retention pass", { reason: Object.entries(counts).map(([k, v]) => `${k}=${v}`).join(" ") });
  }
}
