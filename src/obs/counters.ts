// What the dispatcher in this process has done, as counters for /metrics: how often it woke,
// how many batches its claim and outcome transactions held (several per commit is the sharing
// working), and the events the stale rules marked or left out, counted by the lease that judged
// their batch (its first). Per process, in memory, from zero at each start; under `hookspool run`
// the intake serves them (the dispatcher's own process has no HTTP server), and a pull
// destination's batches are counted by the intake that leases them.
export const dispatchCounters = {
  /** Ticks run: the poll_s tick, a freed slot, a readiness timer, another process's commit. */
  wakeups: 0,
  claimCommits: 0,
  claims: 0,
  outcomeCommits: 0,
  outcomes: 0,
  /** Events delivered with "stale": true, and events left out as stale (store/stale-plan.ts). */
  staleMarked: 0,
  staleSkipped: 0,
};

/** Count what the stale rules made of a batch, at the lease that judged it. */
export function countStale(doc: { marked: number; skipped: number }): void {
  dispatchCounters.staleMarked += doc.marked;
  dispatchCounters.staleSkipped += doc.skipped;
}

/** The stale events' lines: in every /metrics that counted any, a dispatcher's or a pull intake's. */
function staleLines(): string[] {
  const c = dispatchCounters;
  return [
    "# HELP hookspool_stale_events_total Events older than the last version their (route, key) delivered " +
      'when their batch was first leased: delivered marked "stale" (mark) or left out of the document (skip).',
    "# TYPE hookspool_stale_events_total counter",
    `hookspool_stale_events_total{rule="mark"} ${c.staleMarked}`,
    `hookspool_stale_events_total{rule="skip"} ${c.staleSkipped}`,
  ];
}

/** Prometheus text for the counters, or "" when no dispatcher has run in this process and nothing was stale. */
export function renderDispatchCounters(): string {
  const c = dispatchCounters;
  if (c.wakeups === 0) return c.staleMarked + c.staleSkipped > 0 ? `${staleLines().join("\n")}\n` : "";
  const lines = [
    "# HELP hookspool_dispatcher_wakeups_total Dispatcher ticks in this process: " +
      "the poll_s tick, a freed slot, a readiness timer, another process's commit.",
    "# TYPE hookspool_dispatcher_wakeups_total counter",
    `hookspool_dispatcher_wakeups_total ${c.wakeups}`,
    "# HELP hookspool_dispatcher_commits_total Dispatcher transactions that leased batches (claim) " +
      "or recorded attempts' ends (outcome).",
    "# TYPE hookspool_dispatcher_commits_total counter",
    `hookspool_dispatcher_commits_total{kind="claim"} ${c.claimCommits}`,
    `hookspool_dispatcher_commits_total{kind="outcome"} ${c.outcomeCommits}`,
    "# HELP hookspool_dispatcher_batches_total Batches those transactions held: claimed, and attempts recorded.",
    "# TYPE hookspool_dispatcher_batches_total counter",
    `hookspool_dispatcher_batches_total{kind="claim"} ${c.claims}`,
    `hookspool_dispatcher_batches_total{kind="outcome"} ${c.outcomes}`,
    ...staleLines(),
  ];
  return `${lines.join("\n")}\n`;
}
