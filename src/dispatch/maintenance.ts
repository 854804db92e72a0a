// Maintenance: the dispatcher's companion chores, each its own Service on its own timer (every
// 60 s, the first a second after the start): source and poll liveness, the health probes, the spool limits,
// alerts, and the hourly retention pass. A chore's failure never stops the others. The same
// chores run on both backends, by the dispatcher that leads (chores.ts).
import type { Service } from "../service.ts";
import { startAll, stopAll } from "../service.ts";
import { Faults } from "../obs/faults.ts";
import { alertsChore } from "./alerts.ts";
import type { Chore, ChoreContext } from "./chores.ts";
import { pollLiveness, sourceLiveness } from "./liveness.ts";
import { healthProbes } from "./probes.ts";
import { bodySweep, retentionPass } from "./retention-pass.ts";
import { spoolLimits } from "./spool-limits.ts";

export type MaintenanceOptions = Omit<ChoreContext, "faults">;

/** The set of chores, started and stopped together. */
export class Maintenance implements Service {
  readonly name = "maintenance";
  readonly chores: readonly Chore[];
  private readonly faults: Faults;

  constructor(o: MaintenanceOptions) {
    this.faults = new Faults(o.store, "maintenance", o.log, () => o.clock.now());
    const ctx: ChoreContext = { ...o, faults: this.faults };
    this.chores = [
      sourceLiveness(ctx),
      pollLiveness(ctx),
      healthProbes(ctx),
      spoolLimits(ctx),
      alertsChore(ctx),
      retentionPass(ctx),
      ...(ctx.bodies ? [bodySweep(ctx)] : []),
    ];
  }

  /** Whether every chore is started. */
  get active(): boolean {
    return this.chores.every((c) => c.active);
  }

  start(): Promise<void> {
    return startAll(this.chores);
  }

  stop(): Promise<void> {
    return stopAll(this.chores);
  }

  /** Run every chore once, in order (tests drive maintenance with this and an injected clock). */
  async tick(): Promise<void> {
    await this.faults.flush();
    for (const c of this.chores) await c.runNow();
  }
}
