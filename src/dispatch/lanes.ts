// A tick's lanes: the candidates it read, grouped by destination, each destination's gate (its
// slots, breaker, rate and probe) and run budget applied, what is left of its queue the lane the
// fair share (share.ts) fills the free slots from. A pull destination has no lane: its consumers
// lease its batches through the intake's pull API.
import { destinationType } from "../config/destinations.ts";
import type { Config } from "../config/types.ts";
import type { Destination } from "../delivery.ts";
import type { Logger } from "../log.ts";
import { hitsNeeded } from "../pacing.ts";
import type { DispatchStore } from "../store/api.ts";
import type { Candidate } from "../store/queue.ts";
import { type BudgetIssues, budgetGate } from "./budget.ts";
import { gate, pickProbe } from "./gate.ts";
import type { Lane } from "./share.ts";

export interface LaneDeps {
  store: DispatchStore;
  config: Config;
  destination(name: string): Destination | null;
  /** Deliveries in flight per destination, in this process. */
  inflight: ReadonlyMap<string, number>;
  budgetIssues: BudgetIssues;
  log: Logger;
  /** A gate or budget that ends at a known instant: the tick runs again then. */
  wakeAt(at: number): void;
}

/** The lanes of `candidates` (the tick's FIFO heads, in their order) at `now`. */
export async function lanesOf(d: LaneDeps, candidates: readonly Candidate[], now: number): Promise<Lane[]> {
  const byDestination = new Map<string, Candidate[]>();
  for (const c of candidates) {
    const list = byDestination.get(c.destination) ?? [];
    list.push(c);
    byDestination.set(c.destination, list);
  }
  const lanes: Lane[] = [];
  for (const [name, due] of byDestination) {
    if (destinationType(d.config, name) === "pull") continue;
    const dest = d.destination(name);
    const pace = dest?.pace() ?? null;
    const maxInflight = dest?.maxInflight ?? 1;
    const busy = d.inflight.get(name) ?? 0;
    const g = await gate(
      d.store,
      name,
      now,
      busy,
      maxInflight,
      pace,
      pace ? hitsNeeded(pace.rate, dest?.unwrap ?? false, due[0].count) : 1,
    );
    if (g.halfOpened) d.log.warn("breaker half-open: cooldown over, one probe next", { destination: name });
    // A gate that ends at a known instant (a Retry-After, a cooldown, a slot of the rate): tick then.
    if (g.held?.until != null) d.wakeAt(g.held.until);
    if (g.slots <= 0) continue;
    // Run budgets: what the window has spent holds the rest, sealed, until a slot frees.
    const spend = await budgetGate(d.store, d.config, name, due, now);
    await d.budgetIssues.note(d.store, d.config, name, spend, now);
    if (spend.wakeAt !== null) d.wakeAt(spend.wakeAt);
    const slots = Math.min(g.slots, spend.room);
    if (slots <= 0 || spend.queue.length === 0) continue;
    const queue = g.probe
      ? [pickProbe(spend.queue, g.lastProbeBatchId)].filter((x): x is Candidate => x !== undefined)
      : spend.queue;
    lanes.push({ name, dest, pace, queue, slots, hits: g.hits, probe: g.probe, maxInflight, busy });
  }
  return lanes;
}
