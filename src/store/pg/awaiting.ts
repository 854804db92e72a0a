// Awaited outcomes on PostgreSQL: the same plan as SQLite's (awaiting-plan.ts), applied in one
// transaction that locks the batch's row first, so an outcome reported twice at once (the CLI
// and the endpoint, or an outcome racing the dispatcher's timeout) settles the batch once and
// finds it settled the second time.
import {
  AGENT_CLASS,
  type AwaitedDelivery,
  type AwaitingFacts,
  type AwaitingPlan,
  planAwaiting,
  type ReportInput,
  type Reported,
  reportedOf,
  settles,
  type OverdueOutcome,
} from "../awaiting-plan.ts";
import { scrubError } from "../marks.ts";
import { num, type PgSpool, type Tx } from "./db.ts";
import { raiseIssuePg, resolveIssuePg } from "./issues.ts";
import { journalPg } from "./journal.ts";
import { recordDeliveredVersionPg } from "./marks.ts";
import { transportStrikesPg } from "./outcome.ts";

interface Accepted {
  id: number;
  batchId: number;
  finishedAt: number;
}

/** The delivery's accepted attempt: the newest of class "await" with this webhook-id. */
async function acceptedPg(tx: Tx, deliveryId: string): Promise<Accepted | null> {
  const [a] =
    await tx`SELECT id, batch_id, finished_at FROM attempts WHERE delivery_id = ${deliveryId} AND klass = 'await'
      ORDER BY id DESC LIMIT 1`;
  return a ? { id: num(a.id), batchId: num(a.batch_id), finishedAt: Number(a.finished_at) } : null;
}

async function newestPg(tx: Tx, batchId: number): Promise<number | null> {
  const [r] = await tx`SELECT MAX(id) AS id FROM attempts WHERE batch_id = ${batchId}::bigint AND klass = 'await'`;
  return r?.id === null || r?.id === undefined ? null : num(r.id);
}

/** Where `deliveryId` points, or null when no delivery of ours has it. */
export async function awaitedDeliveryPg(spool: PgSpool, deliveryId: string): Promise<AwaitedDelivery | null> {
  // The delivery's request still in flight: its attempt row is written at the claim, before the request.
  const [f] =
    await spool.sql`SELECT a.batch_id, b.state, b.destination FROM attempts a JOIN batches b ON b.id = a.batch_id
      WHERE a.delivery_id = ${deliveryId} AND a.finished_at IS NULL ORDER BY a.id DESC LIMIT 1`;
  if (f)
    return {
      batchId: num(f.batch_id),
      destination: String(f.destination),
      state: String(f.state),
      awaiting: false,
      inFlight: true,
    };
  const a = await acceptedPg(spool.sql, deliveryId);
  if (!a) return null;
  const [b] = await spool.sql`SELECT state, destination FROM batches WHERE id = ${a.batchId}::bigint`;
  if (!b) return null;
  const state = String(b.state);
  return {
    batchId: a.batchId,
    destination: String(b.destination),
    state,
    awaiting: state === "awaiting" && (await newestPg(spool.sql, a.batchId)) === a.id,
    inFlight: false,
  };
}

async function factsPg(tx: Tx, r: ReportInput): Promise<AwaitingFacts | null> {
  const a = await acceptedPg(tx, r.deliveryId);
  if (!a) return null;
  // The batch's row, locked: every change to an awaiting batch takes this lock first.
  const [b] =
    await tx`SELECT state, destination, route, attempts FROM batches WHERE id = ${a.batchId}::bigint FOR UPDATE`;
  if (!b) return null;
  const [{ n }] = await tx`SELECT COUNT(*)::int AS n FROM attempts WHERE batch_id = ${a.batchId}::bigint`;
  const facts: AwaitingFacts = {
    attemptId: a.id,
    acceptedAt: a.finishedAt,
    batch: {
      id: a.batchId,
      state: String(b.state),
      destination: String(b.destination),
      route: String(b.route),
      attempts: Number(b.attempts),
    },
    newest: (await newestPg(tx, a.batchId)) === a.id,
    strikes: 0,
    attemptRows: Number(n),
  };
  const failing = r.status === "failed" || (r.status === "timeout" && r.onTimeout !== "delivered");
  if (failing && settles(facts))
    facts.strikes = await transportStrikesPg(tx, a.batchId, facts.batch.destination, r.now);
  return facts;
}

async function applyPg(tx: Tx, f: AwaitingFacts, r: ReportInput, plan: AwaitingPlan): Promise<boolean> {
  const id = f.batch.id;
  const m = plan.mark;
  const a = plan.attempt;
  const counted = a.counted ? 1 : 0;
  let changed: number;
  if (m.kind === "delivered") {
    changed = (
      await tx`UPDATE batches
        SET state = 'delivered', delivered_at = ${r.now}, result = ${m.result}, next_attempt_at = NULL,
        attempts = attempts + ${counted}, last_class = NULL, last_error = NULL WHERE id = ${id}::bigint
          AND state = 'awaiting'`
    ).count;
  } else if (m.kind === "retry") {
    changed = (
      await tx`UPDATE batches
        SET state = 'retry', next_attempt_at = ${m.nextAttemptAt}, attempts = attempts + 1, last_class = ${AGENT_CLASS},
        last_error = ${scrubError(m.error)} WHERE id = ${id}::bigint AND state = 'awaiting'`
    ).count;
  } else {
    changed = (
      await tx`UPDATE batches
        SET state = 'dead', next_attempt_at = NULL, attempts = attempts + ${counted},
          last_class = ${m.deadReason === "poison" ? "poison" : AGENT_CLASS},
        last_error = ${scrubError(m.error)}, dead_reason = ${m.deadReason} WHERE id = ${id}::bigint
          AND state = 'awaiting'`
    ).count;
  }
  if (changed !== 1) return false;
  if (m.kind === "delivered") await recordDeliveredVersionPg(tx, id, r.now);
  const [row] = await tx`INSERT
      INTO attempts (batch_id, n, destination, started_at, finished_at, outcome, klass, error, duration_ms, counted,
        delivery_id, answer)
      VALUES (${id}::bigint, ${a.n}, ${f.batch.destination}, ${r.now}, ${r.now}, ${a.outcome}, ${AGENT_CLASS},
        ${scrubError(a.error)}, ${a.durationMs}, ${counted}, ${r.deliveryId}, ${a.answer})
      RETURNING id`;
  const detail: Record<string, unknown> = { class: AGENT_CLASS, outcome: a.answer, via: r.via };
  if (m.kind === "retry") detail.next_attempt_at = m.nextAttemptAt;
  if (m.kind === "dead") detail.reason = m.deadReason;
  await journalPg(tx, m.kind, id, r.now, { attempt: num(row.id), detail });
  for (const issue of plan.raise) await raiseIssuePg(tx, issue);
  for (const fp of plan.resolve) await resolveIssuePg(tx, fp, r.now);
  return true;
}

/** The outcome of the run a delivery started (see awaiting.ts reportOutcome), in one transaction. */
export async function reportOutcomePg(spool: PgSpool, r: ReportInput): Promise<Reported> {
  return spool.sql.begin(async (tx): Promise<Reported> => {
    const facts = await factsPg(tx, r);
    if (!facts) return { kind: "unknown" };
    if (!settles(facts)) return { kind: "settled_already", batchId: facts.batch.id, state: facts.batch.state };
    const plan = planAwaiting(facts, r);
    if (!(await applyPg(tx, facts, r, plan)))
      return { kind: "settled_already", batchId: facts.batch.id, state: facts.batch.state };
    return reportedOf(facts, plan);
  });
}

/** Awaiting batches overdue at $1 (now), the most overdue first, at most $2, with the delivery each awaits. */
export const OVERDUE_OUTCOMES = `SELECT b.id, b.destination,
    (SELECT a.delivery_id FROM attempts a WHERE a.batch_id = b.id AND a.klass = 'await' ORDER BY a.id DESC
      LIMIT 1) AS delivery_id
  FROM batches b WHERE b.state = 'awaiting' AND b.next_attempt_at <= $1 ORDER BY b.next_attempt_at LIMIT $2`;

/** Awaiting batches whose outcome is overdue at `now`, the most overdue first, at most `limit`. */
export async function overdueOutcomesPg(spool: PgSpool, now: number, limit: number): Promise<OverdueOutcome[]> {
  const rows = (await spool.sql.unsafe(OVERDUE_OUTCOMES, [now, limit])) as Record<string, unknown>[];
  return rows.map((r) => ({
    batchId: num(r.id),
    destination: String(r.destination),
    deliveryId: (r.delivery_id as string | null) ?? null,
  }));
}
