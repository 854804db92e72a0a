// What `hookspool send --follow` reads from either backend: each state the next event's batch
// takes.
export interface FollowStep {
  batch: number;
  state: string;
  /** The last error or class of a retry or a dead batch, the result of a delivered one. */
  detail?: string;
}
