// TODO header
export interface ActionRow {
  id: number;
  at: number;
  via: "dashboard" | "cli";
  /** replay, retry, pause, resume, ack, resolve, ignore */
  verb: string;
  /** "batch 12", "destination hermes", "issue 3" */
  target: string;
}
