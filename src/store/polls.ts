// The poll clock's plan as both backends step it: a poll's schedule, the step it takes, and when
// a poll is due.
export interface PollPlan {
  instance: string;
  everyS: number;
  jitterS: number;
}

export type PollStep = "scheduled" | "ticked" | "skipped" | "rescheduled";

/** A previous tick's batch in one of these states is unfinished: no new tick joins the queue. */
export const UNFINISHED: ReadonlySet<string> = new Set(["open", "sealed", "leased", "retry", "dead"]);

/** What the instance needs now, from a read that takes no lock. */
export function due(row: { next_at: number } | null, p: PollPlan, now: number): PollStep | "wait" {
  if (!row) return "scheduled";
  if (now >= row.next_at) return "ticked";
  if (row.next_at - now > p.everyS + p.jitterS) return "rescheduled";
  return "wait";
}
