// The figures status and /metrics show: batches per state, the oldest work still to deliver,
// what is in flight, the poll schedule, and attempts and deliveries over the retention window.
import { DEAD_REASONS, type DeadReason } from "../../delivery.ts";
import { type BatchState, BATCH_STATES } from "../batches.ts";
import { prepared, type SqliteSpool } from "./db.ts";
import type { StateCounts, PollRow } from "../stats.ts";
import { PULL_OWNER_PREFIX, type PullLeased } from "../pull.ts";

/** Batches per state; quarantine batches are counted apart from dead. */
export function countBatches(spool: SqliteSpool): StateCounts {
  const db = spool.db;
  const out = Object.fromEntries([...BATCH_STATES, "quarantined"].map((s) => [s, 0])) as StateCounts;
  const rows = prepared<{ state: BatchState; q: number; n: number }, []>(
    db,
    "SELECT state, destination = 'quarantine' AS q, COUNT(*) AS n FROM batches " +
      "GROUP BY state, destination = 'quarantine'",
  ).all();
  for (const r of rows) {
    if (r.q && r.state === "dead") out.quarantined += r.n;
    else out[r.state] += r.n;
  }
  return out;
}

/** Dead batches per reason (quarantined included), every reason present with its count. */
export function deadByReason(spool: SqliteSpool): Record<DeadReason, number> {
  const out = Object.fromEntries(DEAD_REASONS.map((r) => [r, 0])) as Record<DeadReason, number>;
  const rows = prepared<{ reason: string | null; n: number }, []>(
    spool.db,
    "SELECT dead_reason AS reason, COUNT(*) AS n FROM batches WHERE state = 'dead' GROUP BY dead_reason",
  ).all();
  for (const r of rows) if (r.reason !== null && Object.hasOwn(out, r.reason)) out[r.reason as DeadReason] += r.n;
  return out;
}

/** The first_at of the oldest batch still to deliver, overall and per destination. */
export function oldestPending(spool: SqliteSpool): { overall: number | null; byDestination: Map<string, number> } {
  const db = spool.db;
  const rows = prepared<{ destination: string; first_at: number }, []>(
    db,
    "SELECT destination, MIN(first_at) AS first_at FROM batches " +
      "WHERE state IN ('open', 'sealed', 'leased', 'retry', 'awaiting') AND destination <> 'quarantine' " +
      "GROUP BY destination",
  ).all();
  const byDestination = new Map(rows.map((r) => [r.destination, r.first_at]));
  const overall = rows.length ? Math.min(...rows.map((r) => r.first_at)) : null;
  return { overall, byDestination };
}

/** The poll schedule (the polls table), with the state of each instance's last tick batch. */
export function pollRows(spool: SqliteSpool): PollRow[] {
  const db = spool.db;
  return prepared<PollRow, []>(
    db,
    "SELECT p.*, b.state AS last_batch_state FROM polls p LEFT JOIN batches b ON b.id = p.last_batch_id " +
      "ORDER BY p.instance",
  ).all();
}

/** Attempts started since `since`, per destination, outcome and class (for the metrics). */
export function attemptCounts(
  spool: SqliteSpool,
  since: number,
): { destination: string; outcome: string; klass: string; answer: string; n: number; duration_ms: number }[] {
  const db = spool.db;
  return prepared<
    { destination: string; outcome: string; klass: string; answer: string; n: number; duration_ms: number },
    [number]
  >(
    db,
    `SELECT destination, COALESCE(outcome, 'running') AS outcome, COALESCE(klass, '') AS klass,
      COALESCE(answer, '') AS answer, COUNT(*) AS n, COALESCE(SUM(duration_ms), 0) AS duration_ms
       FROM attempts WHERE started_at >= ? GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4`,
  ).all(since);
}

/** Batches delivered since `since`, per destination. */
export function deliveredCounts(spool: SqliteSpool, since: number): { destination: string; n: number }[] {
  const db = spool.db;
  return prepared<{ destination: string; n: number }, [number]>(
    db,
    "SELECT destination, COUNT(*) AS n FROM batches WHERE state = 'delivered' AND delivered_at >= ? GROUP BY 1 " +
      "ORDER BY 1",
  ).all(since);
}

/** Leased batches per destination: what is in flight, as any process can see it. */
export function leasedCounts(spool: SqliteSpool): Map<string, number> {
  const db = spool.db;
  const rows = prepared<{ destination: string; n: number }, []>(
    db,
    "SELECT destination, COUNT(*) AS n FROM batches WHERE state = 'leased' GROUP BY destination",
  ).all();
  return new Map(rows.map((r) => [r.destination, r.n]));
}

/**
 * Leased batches per pull consumer: the name between the owner's "pull:" and its first "/" (the
 * nonce after it is never read out).
 */
export function leasedByConsumer(spool: SqliteSpool): PullLeased[] {
  return prepared<PullLeased, [string]>(
    spool.db,
    "SELECT destination, substr(lease_owner, 6, instr(lease_owner, '/') - 6) AS consumer, COUNT(*) AS n " +
      "FROM batches WHERE state = 'leased' AND lease_owner LIKE ? || '%' AND instr(lease_owner, '/') > 6 " +
      "GROUP BY 1, 2 ORDER BY 1, 2",
  ).all(PULL_OWNER_PREFIX);
}

/** Batches ready to deliver now per destination: sealed, or retry whose time has come. */
export function readyCounts(spool: SqliteSpool, now: number): Map<string, number> {
  const rows = prepared<{ destination: string; n: number }, [number]>(
    spool.db,
    "SELECT destination, COUNT(*) AS n FROM batches WHERE destination <> 'quarantine' AND (state = 'sealed' " +
      "OR (state = 'retry' AND next_attempt_at <= ?)) GROUP BY destination",
  ).all(now);
  return new Map(rows.map((r) => [r.destination, r.n]));
}
