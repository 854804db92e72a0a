// Run budgets in the dispatcher's tick: a destination's `budget` caps how many of its batches
// are delivered in the rolling window, its `key_budget` how many of one (route, key)'s. A due
// batch over either waits, sealed and in order (nothing is attempted, nothing counts as a
// failure); the tick wakes when the window frees a slot. While a destination is held, one
// `budget:<destination>` issue is open (so it alerts once), resolved when it has room again.
import { budgetPolicy } from "../config/destinations.ts";
import type { Config } from "../config/types.ts";
import type { Rate } from "../pacing.ts";
import type { DispatchStore } from "../store/api.ts";
import { budgetRoom } from "../store/budget-plan.ts";
import type { Candidate } from "../store/queue.ts";

export interface BudgetGate {
  /** The due batches the budgets let go (in order), and how many may start now. */
  queue: Candidate[];
  room: number;
  /** When a held slot frees (tick then); null when nothing is held. */
  wakeAt: number | null;
  /** Something due was held back by a budget. */
  held: boolean;
}

const earliest = (a: number | null, b: number | null) => (a === null ? b : b === null ? a : Math.min(a, b));

/** What the budgets of `name` let go of `due` at `now`. */
export async function budgetGate(
  store: DispatchStore,
  config: Config,
  name: string,
  due: Candidate[],
  now: number,
): Promise<BudgetGate> {
  const b = budgetPolicy(config, name);
  if (!b) return { queue: due, room: Number.POSITIVE_INFINITY, wakeAt: null, held: false };
  let room = Number.POSITIVE_INFINITY;
  let wakeAt: number | null = null;
  if (b.budget) {
    const r = budgetRoom(await store.budgetSpends(name, b.budget.windowS, now), b.budget);
    room = r.room;
    wakeAt = r.freesAt;
  }
  let queue = due;
  if (b.keyBudget && room > 0) {
    queue = [];
    for (const c of due) {
      const r = budgetRoom(
        await store.budgetSpends(name, b.keyBudget.windowS, now, { route: c.route, key: c.key }),
        b.keyBudget,
      );
      if (r.room > 0) queue.push(c);
      else wakeAt = earliest(wakeAt, r.freesAt);
    }
  }
  return { queue, room, wakeAt, held: room <= 0 || queue.length < due.length };
}

/** The issue a held destination opens: once per hold, so it alerts once; resolved when it has room. */
export class BudgetIssues {
  /** Destinations whose hold this dispatcher raised (or may have, before a restart: resolved once). */
  private readonly raised = new Map<string, boolean>();

  async note(store: DispatchStore, config: Config, name: string, g: BudgetGate, now: number): Promise<void> {
    const fingerprint = `budget:${name}`;
    const was = this.raised.get(name);
    if (g.held && was !== true) {
      const b = budgetPolicy(config, name);
      const said = [
        b?.budget ? `budget ${b.budget.limit} per ${b.budget.windowS}s` : null,
        b?.keyBudget ? `key_budget ${b.keyBudget.limit} per ${b.keyBudget.windowS}s` : null,
      ]
        .filter(Boolean)
        .join(", ");
      await store.raiseIssue({
        fingerprint,
        kind: "delivery",
        destination: name,
        error:
          `deliveries held: ${said} spent; they go when the window frees a slot, ` +
          `or now with hookspool resume --budget ${name}`,
        now,
      });
      this.raised.set(name, true);
    } else if (!g.held && was !== false) {
      await store.resolveIssue(fingerprint, now);
      this.raised.set(name, false);
    }
  }
}

/** Each destination's key_budget, for the seal that keeps a spent key's open batch open. */
export function keyBudgets(config: Config): Map<string, Rate> {
  const out = new Map<string, Rate>();
  for (const name of Object.keys(config.destinations)) {
    const kb = budgetPolicy(config, name)?.keyBudget;
    if (kb) out.set(name, kb);
  }
  return out;
}
