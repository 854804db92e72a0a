// Claims on PostgreSQL with any number of dispatchers, a tick's batches in three statements
// whatever their number: the locks (each gated destination's claim lock, then each candidate's
// group lock tried), one read in a snapshot after them (the gates, the candidates locked FOR
// UPDATE SKIP LOCKED and checked again to head their group, so FIFO per key holds whoever
// claims), and one write of the attempts, the leases and their journal rows. The gate's rule
// (gate-plan.ts) runs in between, claim by claim; a paced destination's rate window is read here too.
import type { Claim, ClaimInput } from "../queue.ts";
import { admits } from "../gate-plan.ts";
import { type DestinationRow, closedRow } from "../destinations.ts";
import { type Rate, rateMarginS, type WindowHit } from "../../pacing.ts";
import { num, numOrNull, type PgSpool, type Tx } from "./db.ts";
import { destinationRowOf } from "./destinations.ts";
import { budgetFromKey } from "../budget-plan.ts";
import { testHook } from "../../testhook.ts";
import { HEAD } from "./queue.ts";

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

type ClaimIn = ClaimInput & { route: string; key: string };

/**
 * The claim's first statement: every gated destination's claim lock, blocking, in hash order
 * (the order every claim takes them, so two never wait on each other in a cycle), and only
 * then, since each try-lock waits on the materialized count of them, every candidate's group
 * lock tried (held by another dispatcher or an intake mid-join: that candidate is skipped this
 * time). Claims for one destination take turns under its lock (a lock only claims take: an
 * outcome, which frees a slot or trips the breaker, never waits for it). Whether each group lock
 * was taken, in input order.
 */
async function takeClaimLocks(tx: Tx, inputs: readonly ClaimIn[]): Promise<boolean[]> {
  const gated = [...new Set(inputs.filter((c) => c.maxInflight !== undefined).map((c) => `d${c.destination}`))];
  const rows = (await tx`WITH d AS MATERIALIZED (
        SELECT COUNT(*) AS n FROM (SELECT pg_advisory_xact_lock(s.h, 0) FROM (
          SELECT DISTINCT hashtext(x) AS h FROM unnest(${gated}::text[]) AS x ORDER BY 1 OFFSET 0) s) l)
      SELECT CASE WHEN d.n >= 0 THEN pg_try_advisory_xact_lock(hashtext('g' || x.route), hashtext(x.key)) END AS ok
        FROM d, unnest(${inputs.map((c) => c.route)}::text[], ${inputs.map((c) => c.key)}::text[])
          WITH ORDINALITY AS x(route, key, i)
        ORDER BY x.i`) as { ok: boolean }[];
  return rows.map((r) => r.ok === true);
}

/** What counts as a budget's spend (as budgets.ts reads it): an attempt in flight, or delivered. */
const SPEND = `((a.outcome IS NULL AND a.finished_at IS NULL) OR (a.outcome = 'ok' AND (a.klass IS NULL
  OR a.klass = 'await')))`;

/** A budget window's start: its floor (now - window), or the destination's last resume --budget if later. */
const budgetSince = (floor: string, key: string) =>
  `GREATEST(${floor}, (SELECT CASE WHEN value ~ '^[-+]?[0-9]+([.][0-9]*)?([eE][-+]?[0-9]+)?$' THEN value::float8 END
    FROM meta WHERE key = ${key}))`;

/**
 * The claim's second statement, in a snapshot taken after the locks (a read in the lock's own
 * statement would see one from before it, missing a claim committed while it waited): each
 * gated destination's facts ($1: what it has leased, its row, its rate window and its
 * budget's spends when a claim needs them), each candidate whose group lock was taken ($2)
 * looked up by its id (a LATERAL search each, so no stale estimate picks a scan of a partial
 * index instead), locked SKIP LOCKED and checked again to head its group, with its attempts,
 * its delivered attempts and an attempt id from the identity's sequence (so the delivery id is
 * known before the write), and the key budgets' spends ($3).
 */
export const CLAIM_READ = `WITH g AS (SELECT * FROM json_to_recordset($1::text::json)
    AS g(name text, rsince float8, bfloor float8, bkey text)),
  c AS MATERIALIZED (SELECT l.id FROM unnest($2::bigint[]) AS x(id) CROSS JOIN LATERAL (SELECT b.id FROM batches b
    WHERE b.id = x.id AND b.state IN ('sealed', 'retry') AND ${HEAD} LIMIT 1 FOR UPDATE OF b SKIP LOCKED) l),
  k AS (SELECT * FROM json_to_recordset($3::text::json)
    AS k(i int, destination text, route text, key text, floor float8, bkey text))
  SELECT
    (SELECT json_agg(json_build_object('name', g.name,
      'leased', (SELECT COUNT(*) FROM batches WHERE destination = g.name AND state = 'leased'),
      'row', (SELECT to_json(d) FROM destinations d WHERE d.name = g.name),
      'window', CASE WHEN g.rsince IS NOT NULL THEN (SELECT json_agg(json_build_array(w.hits, w.finished_at)) FROM (
        SELECT hits, finished_at FROM attempts WHERE destination = g.name AND hits IS NOT NULL AND finished_at IS NULL
        UNION ALL SELECT hits, finished_at FROM attempts WHERE destination = g.name AND hits IS NOT NULL
          AND finished_at > g.rsince) w) END,
      'spent', CASE WHEN g.bfloor IS NOT NULL THEN (SELECT COUNT(*) FROM attempts a WHERE a.destination = g.name
        AND a.started_at > ${budgetSince("g.bfloor", "g.bkey")} AND ${SPEND}) END)) FROM g) AS gates,
    (SELECT json_agg(json_build_object('id', c.id,
      'n', (SELECT COUNT(*) FROM attempts WHERE batch_id = c.id),
      'ok', (SELECT COUNT(*) FROM attempts WHERE batch_id = c.id AND outcome = 'ok'),
      'aid', nextval('attempts_id_seq'))) FROM c) AS cands,
    (SELECT json_agg(json_build_array(k.i, (SELECT COUNT(*) FROM attempts a JOIN batches b ON b.id = a.batch_id
      WHERE a.destination = k.destination AND a.started_at > ${budgetSince("k.floor", "k.bkey")} AND ${SPEND}
        AND b.route = k.route AND b.key = k.key))) FROM k) AS keys`;

/** A candidate as the claim's read found it, locked: its attempts so far, its deliveries, its new attempt's id. */
interface Locked {
  n: number;
  ok: number;
  aid: number;
}

/** What the claim's read found: the gates by destination, the locked candidates by id, key budgets' spends by input. */
interface ClaimFacts {
  gates: Map<string, Gate>;
  locked: Map<number, Locked>;
  /** Attempt ids, smallest first: given out in input order. */
  aids: number[];
  keySpent: Map<number, number>;
}

const parsed = (v: unknown): unknown => (typeof v === "string" ? JSON.parse(v) : v);

/** The read's parameters: each gated destination (sorted) with what its first paced and budgeted claim ask. */
function claimReadParams(inputs: readonly ClaimIn[], ids: readonly number[]): (string | number[])[] {
  const names = [...new Set(inputs.filter((c) => c.maxInflight !== undefined).map((c) => c.destination))].sort();
  const gates = names.map((name) => {
    const paced = inputs.find((c) => c.destination === name && c.rate);
    const budgeted = inputs.find((c) => c.destination === name && c.budget);
    return {
      name,
      rsince: paced?.rate ? paced.now - paced.rate.windowS - rateMarginS(paced.rate) : null,
      bfloor: budgeted?.budget ? budgeted.now - budgeted.budget.windowS : null,
      bkey: budgetFromKey(name),
    };
  });
  const keys = inputs.flatMap((c, i) =>
    c.keyBudget
      ? [
          {
            i,
            destination: c.destination,
            route: c.route,
            key: c.key,
            floor: c.now - c.keyBudget.windowS,
            bkey: budgetFromKey(c.destination),
          },
        ]
      : [],
  );
  return [JSON.stringify(gates), [...ids], JSON.stringify(keys)];
}

async function readClaimFacts(tx: Tx, inputs: readonly ClaimIn[], ids: readonly number[]): Promise<ClaimFacts> {
  const [r] = (await tx.unsafe(CLAIM_READ, claimReadParams(inputs, ids))) as Record<string, unknown>[];
  const gates = new Map<string, Gate>();
  for (const g of (parsed(r.gates) ?? []) as Record<string, unknown>[]) {
    const name = String(g.name);
    const row = g.row as Record<string, unknown> | null;
    gates.set(name, {
      row: row === null ? closedRow(name) : destinationRowOf(row),
      leased: Number(g.leased),
      window: ((g.window ?? []) as [number, number | null][]).map(([hits, at]) => ({
        hits: Number(hits),
        finishedAt: numOrNull(at),
      })),
      spent: Number(g.spent ?? 0),
    });
  }
  const locked = new Map<number, Locked>();
  for (const c of (parsed(r.cands) ?? []) as Record<string, unknown>[])
    locked.set(num(c.id), { n: Number(c.n), ok: Number(c.ok), aid: num(c.aid) });
  const keySpent = new Map(((parsed(r.keys) ?? []) as [number, number][]).map(([i, n]) => [i, Number(n)]));
  const aids = [...locked.values()].map((l) => l.aid).sort((a, b) => a - b);
  return { gates, locked, aids, keySpent };
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

/** A claim admitted, with what its write needs. */
interface Admitted {
  c: ClaimIn;
  claim: Claim;
  hits: number | null;
  ord: number;
}

/**
 * The gate, the budgets, the group lock and the head, claim by claim in input order, as each
 * earlier claim left the gate (one more leased, its hits in the window, its spend counted):
 * the rule of store/gate-plan.ts on what the read found.
 */
function decideClaims(inputs: readonly ClaimIn[], locks: readonly boolean[], f: ClaimFacts) {
  const out: (Claim | null | "gated")[] = [];
  const admitted: Admitted[] = [];
  // Spends this call adds to a (destination, route, key)'s key budget.
  const keyAdded = new Map<string, number>();
  for (const [i, c] of inputs.entries()) {
    const g = f.gates.get(c.destination);
    const group = `${c.destination}\u0000${c.route}\u0000${c.key}`;
    const keyed = (f.keySpent.get(i) ?? 0) + (keyAdded.get(group) ?? 0);
    const refused =
      (g && !gateAdmits(g, c)) ||
      // Run budgets, counted under the destination's lock: every committed claim's spend is in.
      (g && c.budget && g.spent >= c.budget.limit) ||
      (c.keyBudget && keyed >= c.keyBudget.limit);
    const row = f.locked.get(c.batchId);
    if (refused) out.push("gated");
    else if (!locks[i] || !row || admitted.some((a) => a.c.batchId === c.batchId)) out.push(null);
    else {
      const attemptId = f.aids[admitted.length];
      const n = row.n + 1;
      const resend = row.ok;
      const owner = `${c.host}:${c.pid}:${attemptId}`;
      const deliveryId = c.deliveryId ? c.deliveryId(attemptId, n, resend) : null;
      const claim = { attemptId, n, owner, leaseUntil: c.leaseUntil, deliveryId, resend };
      const hits = c.rate ? (c.hits ?? 1) : null;
      admitted.push({ c, claim, hits, ord: admitted.length });
      keyAdded.set(group, (keyAdded.get(group) ?? 0) + 1);
      if (g) {
        g.leased++;
        g.spent++;
        if (c.probe) g.row = { ...g.row, probe_until: c.leaseUntil };
        if (hits !== null) g.window.push({ hits, finishedAt: null });
      }
      out.push(claim);
    }
  }
  return { out, admitted };
}

/**
 * The claim's write ($1 the claims as JSON rows, $2 their batch ids, $3 the probes' rows): see
 * writeClaims.
 */
export const CLAIM_WRITE = `WITH c AS (SELECT * FROM json_to_recordset($1::text::json) AS c(aid bigint,
        batch_id bigint, n int, destination text, started_at float8, probe smallint, hits int, delivery_id text,
        lease_until float8, owner text, detail text, ord int)),
      a AS (INSERT INTO attempts (id, batch_id, n, destination, started_at, probe, counted, hits, delivery_id)
        SELECT aid, batch_id, n, destination, started_at, probe, 0, hits, delivery_id FROM c),
      u AS (UPDATE batches b SET state = 'leased', lease_until = c.lease_until, lease_owner = c.owner,
          stale_floor = CASE WHEN b.floor_at IS NULL THEN (SELECT v.version FROM delivered_versions v
            WHERE v.route = b.route AND v.key = b.key) ELSE b.stale_floor END,
          floor_at = COALESCE(b.floor_at, c.started_at) FROM c
        WHERE b.id = c.batch_id AND b.id = ANY($2::bigint[])
        RETURNING b.id, b.source, b.destination, b.key),
      j AS (INSERT INTO journal (at, kind, batch_id, attempt_id, source, destination, key, detail)
        SELECT c.started_at, 'leased', u.id, c.aid, u.source, u.destination, u.key, c.detail
          FROM c JOIN u ON u.id = c.batch_id
          ORDER BY c.ord),
      p AS (INSERT INTO destinations (name, last_probe_batch_id, probe_until)
        SELECT destination, batch_id, lease_until FROM json_to_recordset($3::text::json)
          AS p(destination text, batch_id bigint, lease_until float8) ORDER BY destination
        ON CONFLICT (name) DO UPDATE SET last_probe_batch_id = excluded.last_probe_batch_id,
          probe_until = excluded.probe_until)
    SELECT 1`;

/**
 * The claim's write, one statement: the attempts with their ids and delivery ids, the leases
 * (lease_owner host:pid:attempt; a batch's first also fixes its stale floor, the last version its
 * (route, key) delivered: a snapshot taken after the read that found it heads its group, so every
 * earlier batch's delivered mark is in it), the journal's 'leased' rows in claim order, and a probe's
 * bookkeeping on its destination's row (created on first use; the last probe of a destination wins).
 */
async function writeClaims(tx: Tx, admitted: readonly Admitted[]): Promise<void> {
  const rows = admitted.map(({ c, claim, hits, ord }) => ({
    aid: claim.attemptId,
    batch_id: c.batchId,
    n: claim.n,
    destination: c.destination,
    started_at: c.now,
    probe: c.probe ? 1 : 0,
    hits,
    delivery_id: claim.deliveryId,
    lease_until: c.leaseUntil,
    owner: claim.owner,
    detail: JSON.stringify({ n: claim.n, ...(claim.resend ? { resend: claim.resend } : {}) }),
    ord,
  }));
  const probes = new Map(
    admitted
      .filter((a) => a.c.probe)
      .map((a) => [a.c.destination, { batch_id: a.c.batchId, lease_until: a.c.leaseUntil }]),
  );
  const probeRows = [...probes].sort(([a], [b]) => (a < b ? -1 : 1)).map(([destination, p]) => ({ destination, ...p }));
  await tx.unsafe(CLAIM_WRITE, [JSON.stringify(rows), admitted.map((a) => a.c.batchId), JSON.stringify(probeRows)]);
}

/**
 * Claim the batches in one transaction of three statements: the locks (takeClaimLocks), the
 * facts in a snapshot after them (CLAIM_READ), the write (writeClaims). The gate's rule is
 * checked in between, claim by claim, against every dispatcher's committed claims: with several
 * dispatchers the gate each read in its tick may be stale by now, and max_inflight, the one
 * probe of a half-open breaker, the 429 gate's one probe, the rate and the budgets hold across
 * all of them only so. A batch that is not claimable is null in its place; one the gate or a
 * budget refuses, "gated".
 */
export async function claimPg(spool: PgSpool, inputs: readonly ClaimIn[]): Promise<(Claim | null | "gated")[]> {
  if (inputs.length === 0) return [];
  return spool.sql.begin(async (tx) => {
    const locks = await takeClaimLocks(tx, inputs);
    const ids = [...new Set(inputs.filter((_, i) => locks[i]).map((c) => c.batchId))];
    const facts = await readClaimFacts(tx, inputs, ids);
    const { out, admitted } = decideClaims(inputs, locks, facts);
    if (admitted.length > 0) await writeClaims(tx, admitted);
    testHook("claim.before_commit");
    return out;
  });
}
