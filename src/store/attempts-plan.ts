// The attempt history as rules, read without touching the database: the poison run, the bad
// emit twice in a row, and the receiver's run of ignored answers. Each backend reads the same
// rows in its outcome transaction (a batch's newest finished attempts, the destination's newest
// answers) and asks these; only whether the destination delivered another batch within a gap is
// a query, which the backend answers gap by gap, stopping at the first "no".

/** A finished attempt as the rules read it (newest first, `discarded` left out, 64 at most). */
export interface PastAttempt {
  outcome: string | null;
  klass: string | null;
  error: string | null;
  finished_at: number;
}

/** How many past attempts the rules read: more than any run they count. */
export const PAST_LIMIT = 64;

/**
 * A lease that merely expired says nothing about the batch, and neither does an awaited
 * delivery's 2xx (class "await"): the outcome of its run does.
 */
export function saysNothing(a: PastAttempt): boolean {
  return (a.klass === null && a.error === "lease expired") || a.klass === "await";
}

/** A strike's class: a transport failure, or a run the agent reported failed (or never reported). */
export function strikeClass(klass: string | null): boolean {
  return klass === "transport" || klass === "agent";
}

/**
 * The gaps of the poison run that a failure finishing at `now` would complete, newest first:
 * for each earlier strike of this batch, [its finish, the next failure's finish). Each gap is a
 * strike when the destination delivered another batch within it; the run ends at the first gap
 * it did not (or at the first attempt that is no strike). Half-open gaps partition time, so one
 * success counts for at most one gap. Five strikes (six failures in a row with the destination
 * delivering in between) make the batch poison. The attempt being recorded is not yet finished,
 * so it is not among `past`.
 */
export function strikeGaps(past: readonly PastAttempt[], now: number): { from: number; to: number }[] {
  const gaps: { from: number; to: number }[] = [];
  let later = now;
  for (const a of past) {
    if (saysNothing(a)) continue;
    if (!strikeClass(a.klass) || a.outcome === "ok") break;
    gaps.push({ from: a.finished_at, to: later });
    later = a.finished_at;
  }
  return gaps;
}

/** Whether this batch's previous attempt failed on a bad emit (twice makes it permanent). */
export function previousBadEmit(past: readonly PastAttempt[]): boolean {
  const last = past.find((a) => !saysNothing(a));
  return last !== undefined && last.klass === "batch" && (last.error ?? "").startsWith("bad emit");
}

/** How many of the destination's latest delivered answers in a row (newest first) the receiver ignored. */
export function ignoredRun(answers: readonly (string | null)[]): number {
  const n = answers.findIndex((a) => a !== "ignored");
  return n === -1 ? answers.length : n;
}
