// TODO header
export interface FollowStep {
  batch: number;
  state: string;
  /** The last error or class of a retry or a dead batch, the result of a delivered one. */
  detail?: string;
}
