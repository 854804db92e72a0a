// The dashboard's record of operators' actions: the row both backends write, and what each
// change records and how a change that does nothing fails (the same words on both).
import { HookspoolError } from "../errors.ts";
import type { DashboardChange } from "./api.ts";
import type { IssueRow } from "./issues.ts";

export interface ActionRow {
  id: number;
  at: number;
  via: "dashboard" | "cli";
  /** replay, retry, pause, resume, ack, resolve, ignore */
  verb: string;
  /** "batch 12", "destination hermes", "issue 3" */
  target: string;
}

/** The row a change writes: its verb and what it was done to (names and ids only). */
export function actionOf(at: number, c: DashboardChange): Omit<ActionRow, "id"> {
  const target =
    "batch" in c ? `batch ${c.batch}` : "destination" in c ? `destination ${c.destination}` : `issue ${c.issue}`;
  return { at, via: "dashboard", verb: c.verb, target };
}

/** resume on a destination that was not paused. */
export function requireResumed(resumed: boolean, destination: string): void {
  if (!resumed) throw new HookspoolError("E_NOTHING", `destination ${destination} is not paused`);
}

/** An issue's ack, resolve or ignore that found no issue, or one in a state it does not apply to. */
export function requireIssueChanged(r: IssueRow | "missing" | "nothing", issue: number, verb: string): void {
  if (r === "missing") throw new HookspoolError("E_NOT_FOUND", `no issue ${issue}`);
  if (r === "nothing") throw new HookspoolError("E_NOTHING", `issue ${issue} is not in a state ${verb} applies to`);
}
