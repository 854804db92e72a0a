// Issues: grouped failures by fingerprint. Opening and resolving live here; alerting is the
// dispatcher's.
import type { Database } from "bun:sqlite";
import { prepared, type Spool } from "./db.ts";

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

const FIND = "SELECT * FROM issues WHERE fingerprint = ?";
const INSERT = `INSERT INTO issues (fingerprint, kind, destination, route, state, first_at, last_at, count, sample_batch_id, last_error)
  VALUES ($fingerprint, $kind, $destination, $route, 'open', $now, $now, 1, $batch, $error)`;
const BUMP = `UPDATE issues SET count = count + 1, last_at = $now,
    sample_batch_id = COALESCE($batch, sample_batch_id), last_error = COALESCE($error, last_error)
  WHERE id = $id`;
const REOPEN = `UPDATE issues SET state = 'open', count = count + 1, last_at = $now, alerted_at = NULL,
    sample_batch_id = COALESCE($batch, sample_batch_id), last_error = COALESCE($error, last_error)
  WHERE id = $id`;
const RESOLVE = "UPDATE issues SET state = 'resolved', last_at = $now WHERE fingerprint = $fingerprint AND state IN ('open', 'acked')";

/**
 * Open an issue, or count one more occurrence of it. A resolved issue reopens (and may alert
 * again); an ignored one only counts. Runs in the caller's transaction.
 */
export function raiseIssueTx(db: Database, r: RaiseIssue): { id: number; opened: boolean } {
  const existing = prepared<IssueRow, [string]>(db, FIND).get(r.fingerprint);
  const params = { now: r.now, batch: r.batchId ?? null, error: r.error ?? null };
  if (!existing) {
    const res = prepared(db, INSERT).run({ ...params, fingerprint: r.fingerprint, kind: r.kind, destination: r.destination ?? null, route: r.route ?? null });
    return { id: Number(res.lastInsertRowid), opened: true };
  }
  if (existing.state === "resolved") {
    prepared(db, REOPEN).run({ ...params, id: existing.id });
    return { id: existing.id, opened: true };
  }
  prepared(db, BUMP).run({ ...params, id: existing.id });
  return { id: existing.id, opened: false };
}

/** Resolve an open or acked issue; true when one was resolved. */
export function resolveIssueTx(db: Database, fingerprint: string, now: number): boolean {
  return prepared(db, RESOLVE).run({ fingerprint, now }).changes > 0;
}

export function openIssueCount(spool: Spool): number {
  const db = spool.db;
  return prepared<{ n: number }, []>(db, "SELECT COUNT(*) AS n FROM issues WHERE state IN ('open', 'acked')").get()?.n ?? 0;
}

/** raiseIssueTx in a transaction of its own. */
export function raiseIssue(spool: Spool, r: RaiseIssue): { id: number; opened: boolean } {
  return spool.db.transaction(() => raiseIssueTx(spool.db, r)).immediate();
}

/** resolveIssueTx in a transaction of its own. */
export function resolveIssue(spool: Spool, fingerprint: string, now: number): boolean {
  return spool.db.transaction(() => resolveIssueTx(spool.db, fingerprint, now)).immediate();
}

export function getIssueByFingerprint(spool: Spool, fingerprint: string): IssueRow | null {
  const db = spool.db;
  return prepared<IssueRow, [string]>(db, FIND).get(fingerprint);
}

export function getIssue(spool: Spool, id: number): IssueRow | null {
  const db = spool.db;
  return prepared<IssueRow, [number]>(db, "SELECT * FROM issues WHERE id = ?").get(id);
}

/** Issues, newest activity first; by default the ones still needing attention. */
export function listIssues(spool: Spool, f: { state?: IssueState | "all" } = {}): IssueRow[] {
  const db = spool.db;
  if (f.state === "all") return prepared<IssueRow, []>(db, "SELECT * FROM issues ORDER BY last_at DESC, id DESC").all();
  if (f.state) return prepared<IssueRow, [string]>(db, "SELECT * FROM issues WHERE state = ? ORDER BY last_at DESC, id DESC").all(f.state);
  return prepared<IssueRow, []>(db, "SELECT * FROM issues WHERE state IN ('open', 'acked') ORDER BY last_at DESC, id DESC").all();
}

/** What each issue verb does, and the states it applies to (both backends). */
export const ISSUE_VERBS: Record<"ack" | "resolve" | "ignore", { to: IssueState; from: IssueState[] }> = {
  ack: { to: "acked", from: ["open"] },
  resolve: { to: "resolved", from: ["open", "acked"] },
  // An ignored issue never alerts or reopens; use sparingly
  ignore: { to: "ignored", from: ["open", "acked", "resolved"] },
};

/** hookspool issues ack|resolve|ignore <id>: false when the issue is not in a state the verb applies to. */
export function setIssueState(spool: Spool, id: number, verb: keyof typeof ISSUE_VERBS, now: number): IssueRow | "missing" | "nothing" {
  const t = ISSUE_VERBS[verb];
  return spool.db
    .transaction(() => {
      const row = getIssue(spool, id);
      if (!row) return "missing" as const;
      if (!t.from.includes(row.state)) return "nothing" as const;
      prepared(spool.db, "UPDATE issues SET state = ?, last_at = MAX(last_at, ?) WHERE id = ?").run(t.to, now, id);
      return getIssue(spool, id) as IssueRow;
    })
    .immediate();
}

/** Open issues that have not alerted yet (each alerts once, again only after a reopen). */
export function issuesToAlert(spool: Spool): IssueRow[] {
  const db = spool.db;
  return prepared<IssueRow, []>(db, "SELECT * FROM issues WHERE state = 'open' AND alerted_at IS NULL ORDER BY first_at, id").all();
}

/**
 * May an alert of `kind` go out now (at most one per rate_limit_s per kind)? A
 * refusal is counted in alerts.suppressed; the issue stays unalerted and goes out later.
 */
export function alertSlotFree(spool: Spool, kind: string, now: number, rateLimitS: number): boolean {
  return spool.db
    .transaction(() => {
      const row = prepared<{ last_at: number }, [string]>(spool.db, "SELECT last_at FROM alerts WHERE kind = ?").get(kind);
      if (!row || now - row.last_at >= rateLimitS || now < row.last_at) return true;
      prepared(spool.db, "UPDATE alerts SET suppressed = suppressed + 1 WHERE kind = ?").run(kind);
      return false;
    })
    .immediate();
}

/** The alert for this issue went out (its command exited 0, or dry mode recorded it). */
export function markAlerted(spool: Spool, issueId: number, kind: string, now: number): void {
  spool.db
    .transaction(() => {
      prepared(spool.db, "UPDATE issues SET alerted_at = ? WHERE id = ?").run(now, issueId);
      prepared(spool.db, "INSERT INTO alerts (kind, last_at) VALUES (?, ?) ON CONFLICT (kind) DO UPDATE SET last_at = excluded.last_at").run(kind, now);
    })
    .immediate();
}

/** The classes a dead batch dies of, and the reason class of the delivery issue each raises. */
export const DEAD_CLASSES: [string, string][] = [
  ["permanent", "permanent"],
  ["poison", "poison"],
  ["batch", "exhausted"],
];

/**
 * A permanent, poison or exhausted issue resolves only when the dead batches behind it
 * are replayed or dropped. Call after replay or drop of a destination's batches.
 */
export function resolveDeadIssuesTx(db: Database, destination: string, now: number): void {
  for (const [lastClass, reasonClass] of DEAD_CLASSES) {
    const left = prepared<{ n: number }, [string, string]>(db, "SELECT COUNT(*) AS n FROM batches WHERE state = 'dead' AND destination = ? AND last_class = ?").get(destination, lastClass);
    if ((left?.n ?? 0) === 0) resolveIssueTx(db, `delivery:${destination}:${reasonClass}`, now);
  }
}
