// A run budget as a rule, without the database: how many batches a destination (or one of its
// (route, key) groups) may still have delivered in the rolling window, and when a slot frees.
// A spend is a delivery that started a run: a 2xx (an awaited delivery's included), or one in
// flight, which holds its slot until it ends. The dispatcher's tick applies it, and PostgreSQL's
// claim applies it again under the destination's claim lock.
import type { Rate } from "../pacing.ts";

export interface BudgetRoom {
  /** Deliveries that may start now (0 when the budget is spent). */
  room: number;
  /** When the oldest spend leaves the window and a slot frees; null while there is room. */
  freesAt: number | null;
}

/** `spends`: the window's spends' start times, oldest first. */
export function budgetRoom(spends: readonly number[], budget: Rate): BudgetRoom {
  const room = budget.limit - spends.length;
  if (room > 0) return { room, freesAt: null };
  // The spend whose leaving brings the count under the limit.
  return { room: 0, freesAt: spends[spends.length - budget.limit] + budget.windowS };
}

/** The meta key of `hookspool resume --budget`: spends before it do not count. */
export const budgetFromKey = (destination: string) => `budget_from:${destination}`;
