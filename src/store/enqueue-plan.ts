// The join rule and the dedup decision, decided without touching the database: both backends
// read the same facts in their enqueue transaction (the dedup row, the state of the batch a
// redelivery's first copy joined, the group's open batch, the batch after the join) and act on
// what these say. What differs per dialect is the SQL and the locking around it.

/** A source's dedup row for one delivery id. */
export interface SeenRow {
  seen_at: number;
  dup_count: number;
}

/** Whether a dedup row makes this event a redelivery: seen within the source's dedup window. */
export function seenWithin(seen: SeenRow | null | undefined, windowS: number, now: number): seen is SeenRow {
  return seen !== null && seen !== undefined && now - seen.seen_at < windowS;
}

/**
 * What a redelivery does, from the state of the batch its first copy joined: a dead batch is
 * the sender (or an operator resending) asking for a retry, so it is replayed (a quarantine
 * batch cannot be: then it is a duplicate, as the dialect's replay reports); a dropped one was
 * discarded by the operator, so the event is queued anew and the dedup row re-pointed, its
 * count carried on; anything else is a duplicate, counted and acked.
 */
export function redelivery(targetState: string | undefined): "replay" | "requeue" | "duplicate" {
  if (targetState === "dead") return "replay";
  if (targetState === "dropped") return "requeue";
  return "duplicate";
}

/** The dedup count a requeued redelivery carries on. */
export const requeuedCount = (seen: SeenRow): number => seen.dup_count + 1;

/** Step 2 of the join rule: the open batch is sealed before the join when the event would push it past max_bytes. */
export function sealsBeforeJoin(open: { count: number; bytes: number; max_bytes: number }, size: number): boolean {
  return open.bytes + size > open.max_bytes && open.count >= 1;
}

/**
 * The same rule as a condition on a batches row, for a dialect that joins in one statement
 * (an UPDATE of the open batch WHERE it still takes the event): true when the event of size
 * `$size` joins without a seal first, exactly when sealsBeforeJoin is false
 * (test/store/enqueue-plan.test.ts holds the two together).
 */
export const JOINS_WITHOUT_SEAL_SQL = "(bytes + $size <= max_bytes OR count < 1)";

/** Step 5: after the join, a batch at its max_events or max_bytes is sealed in the same transaction. */
export function sealsOnSize(after: { count: number; bytes: number; max_events: number; max_bytes: number }): boolean {
  return after.count >= after.max_events || after.bytes >= after.max_bytes;
}

/** When a batch may be delivered after a join: now when sealed (or windowless), else when its window closes. */
export function readyAfterJoin(
  b: { first_at: number; last_at: number; quiet_s: number; max_s: number },
  sealed: boolean,
  now: number,
): number {
  if (sealed || (b.quiet_s === 0 && b.max_s === 0)) return now;
  return Math.min(b.last_at + b.quiet_s, b.first_at + b.max_s);
}
