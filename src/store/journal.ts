// The journal as both backends keep it: its kinds and rows (watch and the dashboard's live feed
// read them) and the filter a reader applies.
/** What a journal row records, as the schema's CHECK lists them. */
export const JOURNAL_KINDS = [
  "event",
  "sealed",
  "leased",
  "awaiting",
  "delivered",
  "retry",
  "dead",
  "dropped",
] as const;

export type JournalKind = (typeof JOURNAL_KINDS)[number];

export interface JournalRow {
  id: number;
  at: number;
  kind: JournalKind;
  batch_id: number;
  event_id: number | null;
  attempt_id: number | null;
  /** The attempt's number within its batch (1, 2, ...), read from attempts; null once pruned. */
  attempt_n: number | null;
  source: string;
  destination: string;
  key: string;
  /** Small facts of the change as JSON: an event's type, a failure's class, a status code. Never a payload. */
  detail: string | null;
}

export interface JournalFilter {
  source?: string;
  destination?: string;
  key?: string;
}
