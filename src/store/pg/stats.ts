// The figures status, /healthz and /metrics show, on PostgreSQL: batches per state (quarantine
// apart), dead batches by reason, the oldest work still to deliver, what is leased.
import { DEAD_REASONS, type DeadReason } from "../../delivery.ts";
import { BATCH_STATES } from "../batches.ts";
import type { PollRow, StateCounts } from "../stats.ts";
import { num, numOrNull, type PgSpool } from "./db.ts";
import { PULL_OWNER_PREFIX, type PullLeased } from "../pull.ts";

export async function countBatchesPg(spool: PgSpool): Promise<StateCounts> {
  const out = Object.fromEntries([...BATCH_STATES, "quarantined"].map((s) => [s, 0])) as StateCounts;
  const rows = (await spool.sql`SELECT state, destination = 'quarantine' AS q, COUNT(*)::int AS n FROM batches
      GROUP BY state, destination = 'quarantine'`) as {
    state: keyof StateCounts;
    q: boolean;
    n: number;
  }[];
  for (const r of rows) {
    if (r.q && r.state === "dead") out.quarantined += r.n;
    else out[r.state] += r.n;
  }
  return out;
}

export async function deadByReasonPg(spool: PgSpool): Promise<Record<DeadReason, number>> {
  const out = Object.fromEntries(DEAD_REASONS.map((r) => [r, 0])) as Record<DeadReason, number>;
  const rows = (await spool.sql`SELECT dead_reason AS reason, COUNT(*)::int AS n FROM batches WHERE state = 'dead'
      GROUP BY dead_reason`) as {
    reason: string | null;
    n: number;
  }[];
  for (const r of rows) if (r.reason !== null && Object.hasOwn(out, r.reason)) out[r.reason as DeadReason] += r.n;
  return out;
}

export async function oldestPendingPg(
  spool: PgSpool,
): Promise<{ overall: number | null; byDestination: Map<string, number> }> {
  const rows = (await spool.sql`SELECT destination, MIN(first_at) AS first_at FROM batches
      WHERE state IN ('open', 'sealed', 'leased', 'retry', 'awaiting') AND destination <> 'quarantine'
        GROUP BY destination`) as {
    destination: string;
    first_at: number;
  }[];
  const byDestination = new Map(rows.map((r) => [r.destination, Number(r.first_at)]));
  return { overall: rows.length ? Math.min(...rows.map((r) => Number(r.first_at))) : null, byDestination };
}

export async function leasedCountsPg(spool: PgSpool): Promise<Map<string, number>> {
  const rows = (await spool.sql`SELECT destination, COUNT(*)::int AS n FROM batches WHERE state = 'leased'
      GROUP BY destination`) as {
    destination: string;
    n: number;
  }[];
  return new Map(rows.map((r) => [r.destination, r.n]));
}

/**
 * Leased batches per pull consumer: the name between the owner's "pull:" and its first "/" (the
 * nonce after it is never read out).
 */
export async function leasedByConsumerPg(spool: PgSpool): Promise<PullLeased[]> {
  const rows = (await spool.sql`SELECT destination, split_part(substr(lease_owner, 6), '/', 1) AS consumer,
      COUNT(*)::int AS n FROM batches WHERE state = 'leased' AND lease_owner LIKE ${PULL_OWNER_PREFIX} || '%'
        AND strpos(lease_owner, '/') > 6 GROUP BY 1, 2 ORDER BY 1, 2`) as PullLeased[];
  return rows.map((r) => ({ destination: r.destination, consumer: r.consumer, n: Number(r.n) }));
}

/** The poll schedule, with the state of each instance's last tick batch. */
export async function pollRowsPg(spool: PgSpool): Promise<PollRow[]> {
  const rows =
    (await spool.sql`SELECT p.*, b.state AS last_batch_state FROM polls p LEFT JOIN batches b ON b.id = p.last_batch_id
      ORDER BY p.instance`) as Record<string, unknown>[];
  return rows.map((r) => ({
    instance: String(r.instance),
    next_at: Number(r.next_at),
    last_tick_at: numOrNull(r.last_tick_at),
    last_batch_id: numOrNull(r.last_batch_id),
    delivered_at: numOrNull(r.delivered_at),
    delivered_tick_at: numOrNull(r.delivered_tick_at),
    skipped: Number(r.skipped),
    created_at: Number(r.created_at),
    last_batch_state: (r.last_batch_state as PollRow["last_batch_state"]) ?? null,
  }));
}

/** The database's size on disk, in bytes (what the spool costs the server). */
export async function databaseBytesPg(spool: PgSpool): Promise<number> {
  const [r] = await spool.sql`SELECT pg_database_size(current_database())::bigint AS n`;
  return num(r.n);
}

/** Attempts started since `since`, per destination, outcome and class (the metrics). */
export async function attemptCountsPg(
  spool: PgSpool,
  since: number,
): Promise<{ destination: string; outcome: string; klass: string; answer: string; n: number; duration_ms: number }[]> {
  const rows =
    (await spool.sql`SELECT destination, COALESCE(outcome, 'running') AS outcome, COALESCE(klass, '') AS klass,
      COALESCE(answer, '') AS answer, COUNT(*)::int AS n, COALESCE(SUM(duration_ms), 0)::float8 AS duration_ms
      FROM attempts WHERE started_at >= ${since} GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4`) as {
      destination: string;
      outcome: string;
      klass: string;
      answer: string;
      n: number;
      duration_ms: number;
    }[];
  return rows.map((r) => ({ ...r, n: Number(r.n), duration_ms: Number(r.duration_ms) }));
}

/** Batches delivered since `since`, per destination. */
export async function deliveredCountsPg(spool: PgSpool, since: number): Promise<{ destination: string; n: number }[]> {
  const rows = (await spool.sql`SELECT destination, COUNT(*)::int AS n FROM batches WHERE state = 'delivered'
      AND delivered_at >= ${since} GROUP BY 1 ORDER BY 1`) as {
    destination: string;
    n: number;
  }[];
  return rows.map((r) => ({ destination: r.destination, n: Number(r.n) }));
}

/** What each dispatcher's last heartbeat recorded of the failures it caught (JSON lists). */
export async function dispatchersCaughtPg(spool: PgSpool): Promise<string[]> {
  const rows = (await spool.sql`SELECT caught_errors FROM dispatchers WHERE caught_errors IS NOT NULL ORDER BY id`) as {
    caught_errors: string;
  }[];
  return rows.map((r) => r.caught_errors);
}

/** Batches ready to deliver now, per destination (sealed, or a retry that is due), as the dashboard shows them. */
export async function readyCountsPg(spool: PgSpool, now: number): Promise<Map<string, number>> {
  const rows = (await spool.sql`SELECT destination, COUNT(*)::int AS n FROM batches
      WHERE destination <> 'quarantine' AND (state = 'sealed' OR (state = 'retry' AND next_attempt_at <= ${now}))
        GROUP BY destination`) as {
    destination: string;
    n: number;
  }[];
  return new Map(rows.map((r) => [r.destination, num(r.n)]));
}
