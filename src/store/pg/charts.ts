// The dashboard's charts on PostgreSQL, as sqlite/charts.ts reads them: events received per
// bucket by source, attempts by outcome, readiness to 2xx, and quarantined requests by reason.
// Counts only; no payload, no key.
import type { Buckets, Series } from "../charts.ts";
import { num, type PgSpool } from "./db.ts";

type Row = { name: string; i: number; n: number };

function fill(b: Buckets, rows: Record<string, unknown>[]): Series {
  const out: Series = {};
  for (const r of rows.map((x): Row => ({ name: String(x.name), i: num(x.i), n: num(x.n) }))) {
    if (r.i < 0 || r.i >= b.count) continue;
    out[r.name] ??= new Array<number>(b.count).fill(0);
    out[r.name][r.i] += r.n;
  }
  return out;
}

/** Events received per bucket, per source (tee copies counted once per copy). */
export async function eventsBySourcePg(spool: PgSpool, b: Buckets): Promise<Series> {
  const rows = await spool.sql`SELECT source AS name, floor((received_at - ${b.since}) / ${b.bucketS})::int AS i,
      COUNT(*)::int AS n
      FROM events WHERE received_at >= ${b.since} GROUP BY 1, 2`;
  return fill(b, rows as Record<string, unknown>[]);
}

/** Attempts finished per bucket, per outcome (ok, retry, dead, discarded). */
export async function attemptsByOutcomePg(spool: PgSpool, b: Buckets): Promise<Series> {
  const rows = await spool.sql`SELECT outcome AS name, floor((started_at - ${b.since}) / ${b.bucketS})::int AS i,
      COUNT(*)::int AS n
      FROM attempts WHERE started_at >= ${b.since} AND outcome IS NOT NULL GROUP BY 1, 2`;
  return fill(b, rows as Record<string, unknown>[]);
}

/** How many delivered batches the latency chart reads at most (the newest). */
const LATENCY_SAMPLE = 20_000;

/** Readiness to 2xx, p50 and p99 per bucket, in seconds: the rule of sqlite/charts.ts's readyToOkLatency. */
export async function readyToOkLatencyPg(
  spool: PgSpool,
  b: Buckets,
): Promise<{ p50: (number | null)[]; p99: (number | null)[] }> {
  const rows = (await spool.sql`SELECT floor((a.finished_at - ${b.since}) / ${b.bucketS})::int AS i,
        a.finished_at - GREATEST(LEAST(x.last_at + x.quiet_s, x.first_at + x.max_s,
          COALESCE(x.sealed_at, x.last_at + x.quiet_s)), COALESCE(x.not_before, 0)) AS s
      FROM attempts a JOIN batches x ON x.id = a.batch_id
      WHERE a.outcome = 'ok' AND a.started_at >= ${b.since} AND a.finished_at IS NOT NULL
      ORDER BY a.started_at DESC LIMIT ${LATENCY_SAMPLE}`) as Record<string, unknown>[];
  const per: number[][] = Array.from({ length: b.count }, () => []);
  for (const r of rows) {
    const i = num(r.i);
    if (i >= 0 && i < b.count) per[i].push(Math.max(0, Number(r.s)));
  }
  const pick = (xs: number[], q: number) => (xs.length ? xs[Math.min(xs.length - 1, Math.floor(q * xs.length))] : null);
  const sorted = per.map((xs) => xs.sort((x, y) => x - y));
  return { p50: sorted.map((xs) => pick(xs, 0.5)), p99: sorted.map((xs) => pick(xs, 0.99)) };
}

/** Quarantined requests per source and reason since `since` (the reason from each one's trace). */
export async function quarantineReasonsPg(
  spool: PgSpool,
  since: number,
): Promise<{ source: string; reason: string; n: number }[]> {
  const rows =
    (await spool.sql`SELECT source, COALESCE(trace::jsonb ->> 'reason', 'unknown') AS reason, COUNT(*)::int AS n
      FROM events WHERE payload IS NULL AND received_at >= ${since} AND trace::jsonb ->> 'stage' = 'quarantined'
      GROUP BY 1, 2`) as Record<string, unknown>[];
  // Ordered here, by code unit, as SQLite's binary collation orders them (not by the database's locale).
  const by = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
  return rows
    .map((r) => ({ source: String(r.source), reason: String(r.reason), n: num(r.n) }))
    .sort((a, b) => by(a.source, b.source) || by(a.reason, b.reason));
}
