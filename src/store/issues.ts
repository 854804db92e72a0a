// Issues as both backends keep them: their kinds and states, a row, what raising one says, the
// verbs an operator applies, and the classes of dead batches whose issue a replay resolves.
/** source: a sender sent what cannot be queued; internal: a fault in hookspool itself. */
export const ISSUE_KINDS = ["delivery", "source_silent", "spool", "config", "source", "internal"] as const;

export type IssueKind = (typeof ISSUE_KINDS)[number];

export const ISSUE_STATES = ["open", "acked", "resolved", "ignored"] as const;

export type IssueState = (typeof ISSUE_STATES)[number];

export interface IssueRow {
  id: number;
  fingerprint: string;
  kind: IssueKind;
  destination: string | null;
  route: string | null;
  state: IssueState;
  first_at: number;
  last_at: number;
  count: number;
  sample_batch_id: number | null;
  last_error: string | null;
  alerted_at: number | null;
}

export interface RaiseIssue {
  fingerprint: string;
  kind: IssueKind;
  destination?: string | null;
  route?: string | null;
  batchId?: number | null;
  error?: string | null;
  now: number;
}

/** What each issue verb does, and the states it applies to (both backends). */
export const ISSUE_VERBS: Record<"ack" | "resolve" | "ignore", { to: IssueState; from: IssueState[] }> = {
  ack: { to: "acked", from: ["open"] },
  resolve: { to: "resolved", from: ["open", "acked"] },
  // An ignored issue never alerts or reopens; use sparingly
  ignore: { to: "ignored", from: ["open", "acked", "resolved"] },
};

/** The classes a dead batch dies of, and the reason class of the delivery issue each raises. */
export const DEAD_CLASSES: [string, string][] = [
  ["permanent", "permanent"],
  ["poison", "poison"],
  ["batch", "exhausted"],
];
