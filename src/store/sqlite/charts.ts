// The dashboard's charts: events received per bucket by source, attempts by outcome, and the
// time from a batch's readiness to its receiver's 2xx, each over [since, now) in buckets of
// `bucketS` seconds. Counts only; no payload, no key.
import { prepared, type SqliteSpool } from "./db.ts";
import type { Buckets, Series } from "../charts.ts";

function fill(b: Buckets, rows: { name: string; i: number; n: number }[]): Series {
  const out: Series = {};
  for (const r of rows) {
    if (r.i < 0 || r.i >= b.count) continue;
    out[r.name] ??= new Array<number>(b.count).fill(0);
    out[r.name][r.i] += r.n;
  }
  return out;
}

/** Events received per bucket, per source (tee copies counted once per copy). */
export function eventsBySource(spool: SqliteSpool, b: Buckets): Series {
  const rows = prepared<{ name: string; i: number; n: number }, Record<string, number>>(
    spool.db,
    `SELECT source AS name, CAST((received_at - $since) / $bucket AS INTEGER) AS i, COUNT(*) AS n
       FROM events WHERE received_at >= $since GROUP BY source, i`,
  ).all({ since: b.since, bucket: b.bucketS });
  return fill(b, rows);
}

/** Attempts finished per bucket, per outcome (ok, retry, dead, discarded). */
export function attemptsByOutcome(spool: SqliteSpool, b: Buckets): Series {
  const rows = prepared<{ name: string; i: number; n: number }, Record<string, number>>(
    spool.db,
    `SELECT outcome AS name, CAST((started_at - $since) / $bucket AS INTEGER) AS i, COUNT(*) AS n
       FROM attempts WHERE started_at >= $since AND outcome IS NOT NULL GROUP BY outcome, i`,
  ).all({ since: b.since, bucket: b.bucketS });
  return fill(b, rows);
}

/** How many delivered batches the latency chart reads at most (the newest). */
const LATENCY_SAMPLE = 20_000;

/**
 * Readiness to 2xx, p50 and p99 per bucket, in seconds: a batch is ready when its quiet
 * window or its max span closes, or when it was sealed early by its bounds, and not before a
 * replay's not_before; it is done when the attempt that delivered it finished.
 */
export function readyToOkLatency(spool: SqliteSpool, b: Buckets): { p50: (number | null)[]; p99: (number | null)[] } {
  const rows = prepared<{ i: number; s: number }, Record<string, number>>(
    spool.db,
    `SELECT CAST((a.finished_at - $since) / $bucket AS INTEGER) AS i,
            a.finished_at - MAX(MIN(x.last_at + x.quiet_s, x.first_at + x.max_s,
              COALESCE(x.sealed_at, x.last_at + x.quiet_s)), COALESCE(x.not_before, 0)) AS s
       FROM attempts a JOIN batches x ON x.id = a.batch_id
      WHERE a.outcome = 'ok' AND a.started_at >= $since AND a.finished_at IS NOT NULL
      ORDER BY a.started_at DESC LIMIT $limit`,
  ).all({ since: b.since, bucket: b.bucketS, limit: LATENCY_SAMPLE });
  const per: number[][] = Array.from({ length: b.count }, () => []);
  for (const r of rows) if (r.i >= 0 && r.i < b.count) per[r.i].push(Math.max(0, r.s));
  const pick = (xs: number[], q: number) => (xs.length ? xs[Math.min(xs.length - 1, Math.floor(q * xs.length))] : null);
  const sorted = per.map((xs) => xs.sort((x, y) => x - y));
  return { p50: sorted.map((xs) => pick(xs, 0.5)), p99: sorted.map((xs) => pick(xs, 0.99)) };
}

/** Quarantined requests per source and reason since `since` (the reason from each one's trace). */
export function quarantineReasons(spool: SqliteSpool, since: number): { source: string; reason: string; n: number }[] {
  return prepared<{ source: string; reason: string; n: number }, [number]>(
    spool.db,
    `SELECT source, COALESCE(json_extract(trace, '$.reason'), 'unknown') AS reason, COUNT(*) AS n
       FROM events WHERE payload IS NULL AND received_at >= ? AND json_extract(trace, '$.stage') = 'quarantined'
      GROUP BY source, reason ORDER BY source, reason`,
  ).all(since);
}
