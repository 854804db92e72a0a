// Which delivery outcomes open or resolve which issue (spec 11.4), written in the mark's transaction.
import type { Database } from "bun:sqlite";
import type { Outcome } from "../delivery.ts";
import { raiseIssueTx, resolveIssueTx } from "../store/issues.ts";

/** Reason classes that a later success on the destination resolves by itself. */
const TRANSIENT = ["unreachable", "http_5xx", "timeout", "script_exit", "batch"] as const;

/** The reason class of a transport failure: unreachable, http_5xx or timeout. */
export function transportReasonClass(o: Outcome): "unreachable" | "http_5xx" | "timeout" {
  if (o.status !== null && o.status >= 500 && o.status < 600) return "http_5xx";
  if (/timeout|deadline/i.test(o.reason)) return "timeout";
  return "unreachable";
}

export interface IssueContext {
  destination: string;
  route: string;
  batchId: number;
  now: number;
}

function raise(db: Database, c: IssueContext, reasonClass: string, error: string): void {
  raiseIssueTx(db, { fingerprint: `delivery:${c.destination}:${reasonClass}`, kind: "delivery", destination: c.destination, route: c.route, batchId: c.batchId, error, now: c.now });
}

/**
 * A breaker trip or re-trip. The text names the batch the last attempt carried: after a re-trip
 * that is the probe's, which an operator may exclude or split if every probe fails on it (a
 * poison payload on a destination fed by one batch looks like an outage).
 */
export function onTripTx(db: Database, c: IssueContext, o: Outcome, probe: boolean): void {
  const text = probe
    ? `breaker open again: the probe (batch ${c.batchId}) failed with ${o.reason}; if probes keep failing on one batch, see hookspool show ${c.batchId} --attempts`
    : `breaker open after ${o.reason} (batch ${c.batchId} failed last; the next probe after the cooldown carries the oldest batch due)`;
  raise(db, c, transportReasonClass(o), text);
}

/** A batch went dead: permanent, poison or exhausted. The text carries the command to run next. */
export function onDeadTx(db: Database, c: IssueContext, reasonClass: "permanent" | "poison" | "exhausted", reason: string): void {
  raise(db, c, reasonClass, `${reason}; batch ${c.batchId} is dead: hookspool show ${c.batchId} --attempts, then hookspool replay ${c.batchId}`);
}

/** A counted failure streak of three or more on one batch. */
export function onCountedStreakTx(db: Database, c: IssueContext, script: boolean, reason: string, attempts: number): void {
  raise(db, c, script ? "script_exit" : "batch", `${reason} (${attempts} counted attempts on batch ${c.batchId})`);
}

/** Hermes answered ignored or coalesced to a document: its own filter or coalescing ate it. */
export function onNoticeTx(db: Database, c: IssueContext, notice: string): void {
  raise(db, c, "ignored", `${notice}: check the route's events/coalesce settings in the Hermes subscriptions file`);
}

/** A config-class outcome (401/403/404, unknown destination, unreadable secret). */
export function onConfigTx(db: Database, c: IssueContext, reason: string): void {
  raiseIssueTx(db, { fingerprint: `config:delivery:${c.destination}`, kind: "config", destination: c.destination, route: c.route, batchId: c.batchId, error: reason, now: c.now });
}

/** A successful attempt resolves the destination's transient delivery issues and its config issue. */
export function onSuccessTx(db: Database, destination: string, now: number): void {
  for (const r of TRANSIENT) resolveIssueTx(db, `delivery:${destination}:${r}`, now);
  resolveIssueTx(db, `config:delivery:${destination}`, now);
}
