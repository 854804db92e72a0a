// The figures status, /healthz and /metrics show, on PostgreSQL: batches per state (quarantine
// apart), dead batches by reason, the oldest work still to deliver, what is leased.
import { DEAD_REASONS, type DeadReason } from "../../delivery.ts";
import { BATCH_STATES } from "../batches.ts";
import type { StateCounts } from "../stats.ts";
import type { PgSpool } from "./db.ts";

export async function countBatchesPg(spool: PgSpool): Promise<StateCounts> {
  const out = Object.fromEntries([...BATCH_STATES, "quarantined"].map((s) => [s, 0])) as StateCounts;
  const rows = (await spool.sql`SELECT state, destination = 'quarantine' AS q, COUNT(*)::int AS n FROM batches GROUP BY state, destination = 'quarantine'`) as { state: keyof StateCounts; q: boolean; n: number }[];
  for (const r of rows) {
    if (r.q && r.state === "dead") out.quarantined += r.n;
    else out[r.state] += r.n;
  }
  return out;
}

export async function deadByReasonPg(spool: PgSpool): Promise<Record<DeadReason, number>> {
  const out = Object.fromEntries(DEAD_REASONS.map((r) => [r, 0])) as Record<DeadReason, number>;
  const rows = (await spool.sql`SELECT dead_reason AS reason, COUNT(*)::int AS n FROM batches WHERE state = 'dead' GROUP BY dead_reason`) as { reason: string | null; n: number }[];
  for (const r of rows) if (r.reason !== null && Object.hasOwn(out, r.reason)) out[r.reason as DeadReason] += r.n;
  return out;
}

export async function oldestPendingPg(spool: PgSpool): Promise<{ overall: number | null; byDestination: Map<string, number> }> {
  const rows = (await spool.sql`SELECT destination, MIN(first_at) AS first_at FROM batches
      WHERE state IN ('open', 'sealed', 'leased', 'retry') AND destination <> 'quarantine' GROUP BY destination`) as { destination: string; first_at: number }[];
  const byDestination = new Map(rows.map((r) => [r.destination, Number(r.first_at)]));
  return { overall: rows.length ? Math.min(...rows.map((r) => Number(r.first_at))) : null, byDestination };
}

export async function leasedCountsPg(spool: PgSpool): Promise<Map<string, number>> {
  const rows = (await spool.sql`SELECT destination, COUNT(*)::int AS n FROM batches WHERE state = 'leased' GROUP BY destination`) as { destination: string; n: number }[];
  return new Map(rows.map((r) => [r.destination, r.n]));
}
