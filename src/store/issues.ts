// Issues (spec 11.4): grouped failures by fingerprint. Opening and resolving live here; alerting
// is the dispatcher's.
import type { Database } from "bun:sqlite";
import type { Spool } from "./db.ts";

export type IssueKind = "delivery" | "source_silent" | "spool" | "config";
export type IssueState = "open" | "acked" | "resolved" | "ignored";

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
 * again); an ignored one only counts (spec 11.4). Runs in the caller's transaction.
 */
export function raiseIssueTx(db: Database, r: RaiseIssue): { id: number; opened: boolean } {
  const existing = db.query<IssueRow, [string]>(FIND).get(r.fingerprint);
  const params = { now: r.now, batch: r.batchId ?? null, error: r.error ?? null };
  if (!existing) {
    const res = db.query(INSERT).run({ ...params, fingerprint: r.fingerprint, kind: r.kind, destination: r.destination ?? null, route: r.route ?? null });
    return { id: Number(res.lastInsertRowid), opened: true };
  }
  if (existing.state === "resolved") {
    db.query(REOPEN).run({ ...params, id: existing.id });
    return { id: existing.id, opened: true };
  }
  db.query(BUMP).run({ ...params, id: existing.id });
  return { id: existing.id, opened: false };
}

/** Resolve an open or acked issue; true when one was resolved. */
export function resolveIssueTx(db: Database, fingerprint: string, now: number): boolean {
  return db.query(RESOLVE).run({ fingerprint, now }).changes > 0;
}

export function openIssueCount(db: Database): number {
  return db.query<{ n: number }, []>("SELECT COUNT(*) AS n FROM issues WHERE state IN ('open', 'acked')").get()?.n ?? 0;
}

/** raiseIssueTx in a transaction of its own. */
export function raiseIssue(spool: Spool, r: RaiseIssue): { id: number; opened: boolean } {
  return spool.db.transaction(() => raiseIssueTx(spool.db, r)).immediate();
}

/** resolveIssueTx in a transaction of its own. */
export function resolveIssue(spool: Spool, fingerprint: string, now: number): boolean {
  return spool.db.transaction(() => resolveIssueTx(spool.db, fingerprint, now)).immediate();
}
