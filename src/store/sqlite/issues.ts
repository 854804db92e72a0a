// Issues: grouped failures by fingerprint. Opening and resolving live here; alerting is the
// dispatcher's.
import type { Database } from "bun:sqlite";
import { prepared, type SqliteSpool } from "./db.ts";
import { type RaiseIssue, type IssueState, DEAD_CLASSES, type IssueRow, ISSUE_VERBS } from "../issues.ts";

const FIND = "SELECT * FROM issues WHERE fingerprint = ?";

const INSERT = `INSERT
  INTO issues (fingerprint, kind, destination, route, state, first_at, last_at, count, sample_batch_id, last_error)
  VALUES ($fingerprint, $kind, $destination, $route, 'open', $now, $now, 1, $batch, $error)`;

const BUMP = `UPDATE issues SET count = count + 1, last_at = $now,
    sample_batch_id = COALESCE($batch, sample_batch_id), last_error = COALESCE($error, last_error)
  WHERE id = $id`;

const REOPEN = `UPDATE issues SET state = 'open', count = count + 1, last_at = $now, alerted_at = NULL,
    sample_batch_id = COALESCE($batch, sample_batch_id), last_error = COALESCE($error, last_error)
  WHERE id = $id`;

const RESOLVE =
  "UPDATE issues SET state = 'resolved', last_at = $now WHERE fingerprint = $fingerprint " +
  "AND state IN ('open', 'acked')";

/**
 * Open an issue, or count one more occurrence of it. A resolved issue reopens (and may alert
 * again); an ignored one only counts. Runs in the caller's transaction.
 */
export function raiseIssueTx(db: Database, r: RaiseIssue): { id: number; opened: boolean } {
  const existing = prepared<IssueRow, [string]>(db, FIND).get(r.fingerprint);
  const params = { now: r.now, batch: r.batchId ?? null, error: r.error ?? null };
  if (!existing) {
    const res = prepared(db, INSERT).run({
      ...params,
      fingerprint: r.fingerprint,
      kind: r.kind,
      destination: r.destination ?? null,
      route: r.route ?? null,
    });
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

export function openIssueCount(spool: SqliteSpool): number {
  const db = spool.db;
  return (
    prepared<{ n: number }, []>(db, "SELECT COUNT(*) AS n FROM issues WHERE state IN ('open', 'acked')").get()?.n ?? 0
  );
}

/** raiseIssueTx in a transaction of its own. */
export function raiseIssue(spool: SqliteSpool, r: RaiseIssue): { id: number; opened: boolean } {
  return spool.db.transaction(() => raiseIssueTx(spool.db, r)).immediate();
}

/** resolveIssueTx in a transaction of its own. */
export function resolveIssue(spool: SqliteSpool, fingerprint: string, now: number): boolean {
  return spool.db.transaction(() => resolveIssueTx(spool.db, fingerprint, now)).immediate();
}

export function getIssueByFingerprint(spool: SqliteSpool, fingerprint: string): IssueRow | null {
  const db = spool.db;
  return prepared<IssueRow, [string]>(db, FIND).get(fingerprint);
}

export function getIssue(spool: SqliteSpool, id: number): IssueRow | null {
  const db = spool.db;
  return prepared<IssueRow, [number]>(db, "SELECT * FROM issues WHERE id = ?").get(id);
}

/** Issues, newest activity first; by default the ones still needing attention. */
export function listIssues(spool: SqliteSpool, f: { state?: IssueState | "all" } = {}): IssueRow[] {
  const db = spool.db;
  if (f.state === "all") return prepared<IssueRow, []>(db, "SELECT * FROM issues ORDER BY last_at DESC, id DESC").all();
  if (f.state)
    return prepared<IssueRow, [string]>(db, "SELECT * FROM issues WHERE state = ? ORDER BY last_at DESC, id DESC").all(
      f.state,
    );
  return prepared<IssueRow, []>(
    db,
    "SELECT * FROM issues WHERE state IN ('open', 'acked') ORDER BY last_at DESC, id DESC",
  ).all();
}

/** hookspool issues ack|resolve|ignore <id>: false when the issue is not in a state the verb applies to. */
export function setIssueState(
  spool: SqliteSpool,
  id: number,
  verb: keyof typeof ISSUE_VERBS,
  now: number,
): IssueRow | "missing" | "nothing" {
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
export function issuesToAlert(spool: SqliteSpool): IssueRow[] {
  const db = spool.db;
  return prepared<IssueRow, []>(
    db,
    "SELECT * FROM issues WHERE state = 'open' AND alerted_at IS NULL ORDER BY first_at, id",
  ).all();
}

/**
 * May an alert of `kind` go out now (at most one per rate_limit_s per kind)? A
 * refusal is counted in alerts.suppressed; the issue stays unalerted and goes out later.
 */
export function alertSlotFree(spool: SqliteSpool, kind: string, now: number, rateLimitS: number): boolean {
  return spool.db
    .transaction(() => {
      const row = prepared<{ last_at: number }, [string]>(spool.db, "SELECT last_at FROM alerts WHERE kind = ?").get(
        kind,
      );
      if (!row || now - row.last_at >= rateLimitS || now < row.last_at) return true;
      prepared(spool.db, "UPDATE alerts SET suppressed = suppressed + 1 WHERE kind = ?").run(kind);
      return false;
    })
    .immediate();
}

/** The alert for this issue went out (its command exited 0, or dry mode recorded it). */
export function markAlerted(spool: SqliteSpool, issueId: number, kind: string, now: number): void {
  spool.db
    .transaction(() => {
      prepared(spool.db, "UPDATE issues SET alerted_at = ? WHERE id = ?").run(now, issueId);
      prepared(
        spool.db,
        "INSERT INTO alerts (kind, last_at) VALUES (?, ?) ON CONFLICT (kind) DO UPDATE SET last_at = excluded.last_at",
      ).run(kind, now);
    })
    .immediate();
}

/**
 * A permanent, poison or exhausted issue resolves only when the dead batches behind it
 * are replayed or dropped. Call after replay or drop of a destination's batches.
 */
export function resolveDeadIssuesTx(db: Database, destination: string, now: number): void {
  for (const [lastClass, reasonClass] of DEAD_CLASSES) {
    const left = prepared<{ n: number }, [string, string]>(
      db,
      "SELECT COUNT(*) AS n FROM batches WHERE state = 'dead' AND destination = ? AND last_class = ?",
    ).get(destination, lastClass);
    if ((left?.n ?? 0) === 0) resolveIssueTx(db, `delivery:${destination}:${reasonClass}`, now);
  }
}
