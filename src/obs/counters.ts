// What the dispatcher in this process has done, as counters for /metrics: how often it woke,
// and how many batches its claim and outcome transactions held (several per commit is the
// sharing working). Per process, in memory, from zero at each start; under `hookspool run` the
// intake serves them (the dispatcher's own process has no HTTP server).
export const dispatchCounters = {
  /** Ticks run: the poll_s tick, a freed slot, a readiness timer, another process's commit. */
  wakeups: 0,
  claimCommits: 0,
  claims: 0,
  outcomeCommits: 0,
  outcomes: 0,
};

/** Prometheus text for the counters, or "" when no dispatcher has run in this process. */
export function renderDispatchCounters(): string {
  const c = dispatchCounters;
  if (c.wakeups === 0) return "";
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
  ];
  return `${lines.join("\n")}\n`;
}
