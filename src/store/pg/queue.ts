// Delivery on PostgreSQL with any number of dispatchers: readiness sealing, the candidates
// (deliverable batches that head their (route, key) group), claims that lock each candidate
// with FOR UPDATE SKIP LOCKED under the group's advisory lock and check again that it is the
// head, so FIFO per key holds whoever claims; the next instant a batch becomes ready, whether
// one is ready now, config retries made due after a reload; and the recovery of leases whose
// owner is gone (lease_until passed), never of a live one.
import type { Candidate, Claim, ClaimInput } from "../queue.ts";
import type { Resume } from "../../delivery.ts";
import { admits } from "../gate-plan.ts";
import { type DestinationRow, closedRow } from "../destinations.ts";
import { type Rate, rateMarginS, type WindowHit } from "../../pacing.ts";
import { num, numOrNull, type PgSpool, type Tx } from "./db.ts";
import { destinationRowOf, markProbePg } from "./destinations.ts";
import { contentOfBatchesPg, lockAll } from "./enqueue.ts";
import { contentHash } from "../content.ts";
import { journalPg } from "./journal.ts";
import { budgetSpendsPg } from "./budgets.ts";
import { testHook } from "../../testhook.ts";

/** Ready open batches sealed per transaction: a tick's backlog in a few short transactions. */
const SEAL_CHUNK = 500;

/**
 * Seal every open batch that is ready at `now`, a chunk at a time: each chunk in one transaction
 * that takes every group's lock at once, in the order every intake takes them (so none is
 * mid-join, and none waits on another in a cycle), reads again which are still open and ready
 * (an intake may have joined one since), reads their content in one query, and seals them in one
 * statement with their hashes and their journal rows in another.
 */
export async function sealReadyPg(
  spool: PgSpool,
  now: number,
  keyBudgets: ReadonlyMap<string, Rate> = new Map(),
): Promise<number[]> {
  const found = (await spool.sql`SELECT id, destination, route, key FROM batches WHERE state = 'open'
      AND ((quiet_s = 0 AND max_s = 0) OR ${now} >= last_at + quiet_s OR ${now} >= first_at + max_s) ORDER BY id`) as {
    id: string;
    destination: string;
    route: string;
    key: string;
  }[];
  // A key whose key_budget is spent keeps its open batch open past the window (see sealReady).
  const ready: typeof found = [];
  for (const b of found) {
    const kb = keyBudgets.get(b.destination);
    if (!kb || (await budgetSpendsPg(spool.sql, b.destination, kb.windowS, now, b)).length < kb.limit) ready.push(b);
  }
  const sealed: number[] = [];
  for (let i = 0; i < ready.length; i += SEAL_CHUNK) {
    const chunk = ready.slice(i, i + SEAL_CHUNK);
    const done = await spool.sql.begin(async (tx) => {
      await lockAll(tx, { a: chunk.map((r) => `g${r.route}`), b: chunk.map((r) => r.key) });
      const ids = chunk.map((r) => num(r.id));
      const still = (
        (await tx`SELECT id FROM batches WHERE id = ANY(${ids}::bigint[]) AND state = 'open'
          AND ((quiet_s = 0 AND max_s = 0) OR ${now} >= last_at + quiet_s OR ${now} >= first_at + max_s)
            ORDER BY id`) as {
          id: string;
        }[]
      ).map((r) => num(r.id));
      if (still.length === 0) return [];
      const content = await contentOfBatchesPg(tx, still);
      const hashes = still.map((id) => contentHash(content.get(id) ?? []));
      await tx`UPDATE batches SET state = 'sealed', sealed_at = ${now}, content_hash = h.hash
          FROM unnest(${still}::bigint[], ${hashes}::text[]) AS h(id, hash) WHERE batches.id = h.id
            AND batches.state = 'open'`;
      await tx`INSERT INTO journal (at, kind, batch_id, source, destination, key)
          SELECT ${now}, 'sealed', id, source, destination, key FROM batches WHERE id = ANY(${still}::bigint[])
            ORDER BY id`;
      testHook("seal.before_commit");
      return still;
    });
    sealed.push(...done);
  }
  return sealed;
}

/** A batch heads its (route, key) group: no unfinished batch of the group came before it. */
const HEAD = `NOT EXISTS (SELECT 1 FROM batches p
      WHERE p.route = b.route AND p.key = b.key AND p.state IN ('open', 'sealed', 'retry', 'leased', 'awaiting')
        AND p.first_at <= b.first_at AND (p.first_at < b.first_at OR p.id < b.id))`;

/** The destinations holding a sealed or retrying batch: one index search each (a loose index scan). */
const READY_DESTINATIONS = `WITH RECURSIVE d(name) AS (
    SELECT MIN(destination) FROM batches WHERE state IN ('sealed', 'retry')
    UNION ALL
    SELECT (SELECT MIN(destination) FROM batches WHERE state IN ('sealed', 'retry') AND destination > d.name) FROM d
      WHERE d.name IS NOT NULL)
  SELECT name FROM d WHERE name IS NOT NULL AND name <> 'quarantine'`;

/** One destination's deliverable heads, oldest first: $1 destination, $2 now, $3 limit. */
const CANDIDATES = `SELECT b.id, b.route, b.source, b.destination, b.key, b.state, b.first_at, b.attempts, b.count,
  b.bytes
    FROM batches b
   WHERE b.destination = $1 AND b.state IN ('sealed', 'retry')
     AND (b.state = 'sealed' OR b.next_attempt_at <= $2)
     AND (b.not_before IS NULL OR b.not_before <= $2)
     AND ${HEAD}
   ORDER BY b.first_at, b.id LIMIT $3`;

/**
 * Deliverable heads at `now`, oldest first_at first, at most `perDestination` of each
 * destination: as on SQLite, a loose index scan of batches_ready finds the destinations that
 * hold a deliverable batch, and each destination's walk follows that index in order and stops at
 * its limit, so a wide backlog costs the slots it fills, not its size.
 */
export async function candidatesPg(spool: PgSpool, now: number, perDestination = 1000): Promise<Candidate[]> {
  const limit = Math.max(0, Math.floor(Math.min(perDestination, 1_000_000)));
  const names = (await spool.sql.unsafe(READY_DESTINATIONS)) as { name: string }[];
  const out: Candidate[] = [];
  for (const { name } of names) {
    const rows = (await spool.sql.unsafe(CANDIDATES, [name, now, limit])) as Record<string, unknown>[];
    for (const r of rows)
      out.push({
        id: num(r.id),
        route: String(r.route),
        source: String(r.source),
        destination: String(r.destination),
        key: String(r.key),
        state: r.state as Candidate["state"],
        first_at: Number(r.first_at),
        attempts: Number(r.attempts),
        count: Number(r.count),
        bytes: num(r.bytes),
      });
  }
  return out.sort((a, b) => a.first_at - b.first_at || a.id - b.id);
}

/**
 * How PostgreSQL runs the candidates walk: the destinations' scan, and one destination's walk (a test holds them to the
 * indexes).
 */
export async function candidatesPlansPg(
  spool: PgSpool,
  destination: string,
  now: number,
  limit: number,
): Promise<{ destinations: string[]; walk: string[] }> {
  const plan = async (sql: string, params: (string | number)[] = []) =>
    ((await spool.sql.unsafe(`EXPLAIN ${sql}`, params)) as { "QUERY PLAN": string }[]).map((r) => r["QUERY PLAN"]);
  return { destinations: await plan(READY_DESTINATIONS), walk: await plan(CANDIDATES, [destination, now, limit]) };
}

/** A destination as the claims of one transaction see it: its row, what is leased, its rate window. */
interface Gate {
  row: DestinationRow;
  leased: number;
  window: WindowHit[];
  /** The destination budget's spends in its window (when a claim carries a budget). */
  spent: number;
}

/** A paced destination's window at `now` (two searches of attempts_window). */
export async function rateWindowPg(
  sql: PgSpool["sql"] | Tx,
  destination: string,
  now: number,
  rate: Rate,
): Promise<WindowHit[]> {
  const since = now - rate.windowS - rateMarginS(rate);
  const rows = (await sql`SELECT hits, finished_at FROM attempts WHERE destination = ${destination} AND hits IS NOT NULL
      AND finished_at IS NULL
      UNION ALL SELECT hits, finished_at FROM attempts WHERE destination = ${destination} AND hits IS NOT NULL
        AND finished_at > ${since}`) as Record<string, unknown>[];
  return rows.map((r) => ({ hits: Number(r.hits), finishedAt: numOrNull(r.finished_at) }));
}

/** Unwrap, on a retry: where the earlier attempts of this delivery left off (as on SQLite). */
export async function resumePointPg(spool: PgSpool, batchId: number): Promise<Resume | null> {
  const [r] = await spool.sql`SELECT MAX(failed_event_id) AS before, COALESCE(MAX(unconfirmed), 0)::int AS unconfirmed
      FROM attempts
      WHERE batch_id = ${batchId}::bigint AND finished_at IS NOT NULL
        AND id > COALESCE((SELECT MAX(id) FROM attempts WHERE batch_id = ${batchId}::bigint AND outcome = 'ok'), 0)`;
  return r && r.before !== null ? { before: num(r.before), unconfirmed: Number(r.unconfirmed) === 1 } : null;
}

/**
 * For every destination the claims are for (in name order), take the claims' lock of that
 * destination and read its gate, what it has leased and its rate window: with several
 * dispatchers, the gate each read in its tick may be stale by now, and max_inflight, the one
 * probe of a half-open breaker, the 429 gate's one probe and the rate hold across all of them
 * only if the claim checks again, one claim at a time.
 */
async function lockGates(tx: Tx, inputs: readonly ClaimInput[]): Promise<Map<string, Gate>> {
  const gates = new Map<string, Gate>();
  for (const name of [...new Set(inputs.filter((c) => c.maxInflight !== undefined).map((c) => c.destination))].sort()) {
    // Claims for one destination take turns (a lock only claims take: an outcome, which frees a
    // slot or trips the breaker, never waits for it); what they read is then every committed claim's.
    await tx`SELECT pg_advisory_xact_lock(hashtext(${`d${name}`}), 0)`;
    const [d] = await tx`SELECT (SELECT COUNT(*)::int FROM batches WHERE destination = ${name}
        AND state = 'leased') AS leased, destinations.*
        FROM (SELECT 1) one LEFT JOIN destinations ON name = ${name}`;
    const paced = inputs.find((c) => c.destination === name && c.rate);
    const window = paced?.rate ? await rateWindowPg(tx, name, paced.now, paced.rate) : [];
    const budgeted = inputs.find((c) => c.destination === name && c.budget);
    const spent = budgeted?.budget ? (await budgetSpendsPg(tx, name, budgeted.budget.windowS, budgeted.now)).length : 0;
    gates.set(name, {
      row: d.name === null || d.name === undefined ? closedRow(name) : destinationRowOf(d),
      leased: Number(d.leased),
      window,
      spent,
    });
  }
  return gates;
}

/**
 * The gate's rule (store/gate-plan.ts) on the locked row, for a dispatcher's claim (one that says its max_inflight).
 */
function gateAdmits(g: Gate, c: ClaimInput): boolean {
  if (c.maxInflight === undefined) return true;
  return admits(
    { row: g.row, inflight: g.leased, maxInflight: c.maxInflight, now: c.now, rate: c.rate ?? null, window: g.window },
    { probe: c.probe === true, hits: c.rate ? (c.hits ?? 1) : 0 },
  );
}

/**
 * Claim each batch in one transaction: the group's lock tried (held by another dispatcher or an
 * intake mid-join: skipped this time), the row locked SKIP LOCKED and checked again to head its
 * group, the attempt written, the lease taken. A batch that is not claimable is null in its place.
 */
export async function claimPg(
  spool: PgSpool,
  inputs: readonly (ClaimInput & { route: string; key: string })[],
): Promise<(Claim | null | "gated")[]> {
  if (inputs.length === 0) return [];
  return spool.sql.begin(async (tx) => {
    const gates = await lockGates(tx, inputs);
    const out: (Claim | null | "gated")[] = [];
    for (const c of inputs) {
      const g = gates.get(c.destination);
      if (g && !gateAdmits(g, c)) {
        out.push("gated");
        continue;
      }
      // Run budgets, counted under the destination's lock: every committed claim's spend is in.
      if (g && c.budget && g.spent >= c.budget.limit) {
        out.push("gated");
        continue;
      }
      if (
        c.keyBudget &&
        (await budgetSpendsPg(tx, c.destination, c.keyBudget.windowS, c.now, { route: c.route, key: c.key })).length >=
          c.keyBudget.limit
      ) {
        out.push("gated");
        continue;
      }
      const [lock] = await tx`SELECT pg_try_advisory_xact_lock(hashtext(${`g${c.route}`}), hashtext(${c.key})) AS ok`;
      if (!lock.ok) {
        out.push(null);
        continue;
      }
      const [row] = await tx.unsafe(
        `SELECT b.id FROM batches b WHERE b.id = $1 AND b.state IN ('sealed', 'retry') AND ${HEAD}
          FOR UPDATE SKIP LOCKED`,
        [c.batchId],
      );
      if (!row) {
        out.push(null);
        continue;
      }
      const [{ n }] = await tx`SELECT COUNT(*)::int + 1 AS n FROM attempts WHERE batch_id = ${c.batchId}::bigint`;
      const hits = c.rate ? (c.hits ?? 1) : null;
      const [a] = await tx`INSERT INTO attempts (batch_id, n, destination, started_at, probe, counted, hits)
          VALUES (${c.batchId}::bigint, ${n}, ${c.destination}, ${c.now}, ${c.probe ? 1 : 0}, 0, ${hits}) RETURNING id`;
      const attemptId = num(a.id);
      const owner = `${c.host}:${c.pid}:${attemptId}`;
      await tx`UPDATE batches SET state = 'leased', lease_until = ${c.leaseUntil}, lease_owner = ${owner}
        WHERE id = ${c.batchId}::bigint`;
      const [{ resend }] =
        await tx`SELECT COUNT(*)::int AS resend FROM attempts WHERE batch_id = ${c.batchId}::bigint AND outcome = 'ok'`;
      const deliveryId = c.deliveryId ? c.deliveryId(attemptId, n, resend) : null;
      if (deliveryId !== null)
        await tx`UPDATE attempts SET delivery_id = ${deliveryId} WHERE id = ${attemptId}::bigint`;
      if (c.probe) await markProbePg(tx, c.destination, c.batchId, c.leaseUntil);
      if (g) {
        g.leased++;
        g.spent++;
        if (c.probe) g.row = { ...g.row, probe_until: c.leaseUntil };
        if (hits !== null) g.window.push({ hits, finishedAt: null });
      }
      await journalPg(tx, "leased", c.batchId, c.now, {
        attempt: attemptId,
        detail: { n, ...(resend ? { resend } : {}) },
      });
      out.push({ attemptId, n, owner, leaseUntil: c.leaseUntil, deliveryId, resend });
    }
    testHook("claim.before_commit");
    return out;
  });
}

/**
 * Leases whose lease_until has passed -> retry, due now, uncounted, 'lease expired'. Any
 * dispatcher may run it: a live owner renews nothing, but its lease_until is its deadline plus
 * grace, so a lease still running is never taken. `live`: the owners this dispatcher knows are
 * still delivering (its own workers), whose leases it never takes even past lease_until (after
 * a clock step, say), as SQLite's recovery does. Returns the recovered ids.
 */
export async function recoverExpiredPg(
  spool: PgSpool,
  now: number,
  live: ReadonlySet<string> = new Set(),
): Promise<number[]> {
  return spool.sql.begin(async (tx) => {
    const rows = (await tx`UPDATE batches
        SET state = 'retry', next_attempt_at = ${now}, lease_until = NULL, lease_owner = NULL,
          last_error = 'lease expired'
        WHERE id IN (SELECT id FROM batches WHERE state = 'leased' AND lease_until < ${now}
          AND NOT (lease_owner = ANY(${[...live]}::text[])) FOR UPDATE SKIP LOCKED)
          RETURNING id`) as {
      id: string;
    }[];
    const ids = rows.map((r) => num(r.id)).sort((a, b) => a - b);
    for (const id of ids) {
      await tx`UPDATE attempts SET finished_at = ${now}, outcome = 'retry', error = 'lease expired', counted = 0
        WHERE batch_id = ${id}::bigint AND finished_at IS NULL`;
      await journalPg(tx, "retry", id, now, { detail: { class: "lease expired" } });
    }
    return ids;
  });
}

/**
 * The next instant after `now` at which an open batch's window ends, a retry falls due or an awaited outcome is
 * overdue; null when none will.
 */
export async function nextReadyAtPg(spool: PgSpool, now: number): Promise<number | null> {
  const [r] = await spool.sql`SELECT LEAST(
      (SELECT MIN(LEAST(last_at + quiet_s, first_at + max_s)) FROM batches
        WHERE state = 'open' AND NOT (quiet_s = 0 AND max_s = 0)
          AND LEAST(last_at + quiet_s, first_at + max_s) > ${now}),
      (SELECT MIN(next_attempt_at) FROM batches WHERE state IN ('retry', 'awaiting')
        AND next_attempt_at > ${now})) AS at`;
  return numOrNull(r?.at);
}

/**
 * Whether some batch is ready at `now`: sealed, due for a retry, open past its window, or awaiting an overdue outcome.
 */
export async function anyReadyNowPg(spool: PgSpool, now: number): Promise<boolean> {
  const [r] = await spool.sql`SELECT EXISTS (SELECT 1 FROM batches WHERE state = 'sealed')
      OR EXISTS (SELECT 1 FROM batches WHERE state IN ('retry', 'awaiting') AND next_attempt_at <= ${now})
      OR EXISTS (SELECT 1 FROM batches WHERE state = 'open'
        AND ((quiet_s = 0 AND max_s = 0) OR ${now} >= last_at + quiet_s OR ${now} >= first_at + max_s)) AS ready`;
  return r?.ready === true;
}

/** A successful config reload makes every config-class retry due now. */
export async function redueConfigRetriesPg(spool: PgSpool, now: number): Promise<number> {
  const r = await spool.sql`UPDATE batches SET next_attempt_at = ${now} WHERE state = 'retry' AND last_class = 'config'
      AND next_attempt_at > ${now}`;
  return r.count;
}
