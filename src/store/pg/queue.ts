// Delivery on PostgreSQL with any number of dispatchers: readiness sealing, the candidates
// (deliverable batches that head their (route, key) group; claim.ts takes them), the next
// instant a batch becomes ready, whether one is ready now, config retries made due after a
// reload, where an unwrapped retry resumes, and the recovery of leases whose owner is gone
// (lease_until passed), never of a live one. Each runs in as few statements as its snapshots
// allow, since statements, not rows, are what a tick costs the server.
import type { Candidate } from "../queue.ts";
import type { Resume } from "../../delivery.ts";
import type { Rate } from "../../pacing.ts";
import { num, numOrNull, type PgSpool, type Tx } from "./db.ts";
import { contentOfBatchesPg } from "./enqueue.ts";
import { contentHash } from "../content.ts";
import { budgetSpendsPg } from "./budgets.ts";
import { testHook } from "../../testhook.ts";

/** Ready open batches sealed per transaction: a tick's backlog in a few short transactions. */
const SEAL_CHUNK = 500;

/**
 * Seal the open batches that are ready at `now`, the oldest first, at most `limit` (a key whose
 * key_budget is spent is passed over, not counted, as on SQLite), a chunk at a time, each chunk in one
 * transaction of three statements: every group's lock tried (a group an intake holds mid-join
 * is left for the next tick, which its commit's wake-up brings), the content of the batches
 * locked read in a snapshot after the locks (no intake can join one before the commit), and
 * the seal with its journal rows in one statement that checks again that each is still open and
 * ready (an intake may have joined one before the lock). content_hash is computed here from the
 * events read, as on SQLite.
 */
export async function sealReadyPg(
  spool: PgSpool,
  now: number,
  keyBudgets: ReadonlyMap<string, Rate> = new Map(),
  limit = Number.POSITIVE_INFINITY,
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
    if (ready.length >= limit) break;
    const kb = keyBudgets.get(b.destination);
    if (!kb || (await budgetSpendsPg(spool.sql, b.destination, kb.windowS, now, b)).length < kb.limit) ready.push(b);
  }
  const sealed: number[] = [];
  for (let i = 0; i < ready.length; i += SEAL_CHUNK) {
    const ids = ready.slice(i, i + SEAL_CHUNK).map((r) => num(r.id));
    sealed.push(...(await spool.sql.begin((tx) => sealChunk(tx, ids, now))));
  }
  return sealed;
}

async function sealChunk(tx: Tx, ids: readonly number[], now: number): Promise<number[]> {
  const locked = (
    (await tx`SELECT id FROM batches WHERE id = ANY(${ids}::bigint[]) AND state = 'open'
        AND pg_try_advisory_xact_lock(hashtext('g' || route), hashtext(key)) ORDER BY id`) as { id: string }[]
  ).map((r) => num(r.id));
  if (locked.length === 0) return [];
  const content = await contentOfBatchesPg(tx, locked);
  const hashes = locked.map((id) => contentHash(content.get(id) ?? []));
  const rows = (await tx.unsafe(
    `WITH u AS (UPDATE batches SET state = 'sealed', sealed_at = $1, content_hash = h.hash
        FROM unnest($2::bigint[], $3::text[]) AS h(id, hash)
        WHERE batches.id = h.id AND batches.state = 'open'
          AND ((quiet_s = 0 AND max_s = 0) OR $1 >= last_at + quiet_s OR $1 >= first_at + max_s)
        RETURNING batches.id, batches.source, batches.destination, batches.key)
      INSERT INTO journal (at, kind, batch_id, source, destination, key)
        SELECT $1, 'sealed', id, source, destination, key FROM u ORDER BY id RETURNING batch_id`,
    [now, locked, hashes],
  )) as { batch_id: string }[];
  testHook("seal.before_commit");
  return rows.map((r) => num(r.batch_id));
}

/** A batch heads its (route, key) group: no unfinished batch of the group came before it. */
export const HEAD = `NOT EXISTS (SELECT 1 FROM batches p
      WHERE p.route = b.route AND p.key = b.key AND p.state IN ('open', 'sealed', 'retry', 'leased', 'awaiting')
        AND p.first_at <= b.first_at AND (p.first_at < b.first_at OR p.id < b.id))`;

/** The destinations holding a sealed or retrying batch: one index search each (a loose index scan). */
const READY_CTE = `WITH RECURSIVE d(name) AS (
    SELECT MIN(destination) FROM batches WHERE state IN ('sealed', 'retry')
    UNION ALL
    SELECT (SELECT MIN(destination) FROM batches WHERE state IN ('sealed', 'retry') AND destination > d.name) FROM d
      WHERE d.name IS NOT NULL)`;

export const READY_DESTINATIONS = `${READY_CTE} SELECT name FROM d WHERE name IS NOT NULL AND name <> 'quarantine'`;

/** One destination's deliverable heads, oldest first. */
const walkOf = (destination: string, now: string, limit: string) => `SELECT b.id, b.route, b.source, b.destination,
  b.key, b.state, b.first_at, b.attempts, b.count, b.bytes
    FROM batches b
   WHERE b.destination = ${destination} AND b.state IN ('sealed', 'retry')
     AND (b.state = 'sealed' OR b.next_attempt_at <= ${now})
     AND (b.not_before IS NULL OR b.not_before <= ${now})
     AND ${HEAD}
   ORDER BY b.first_at, b.id LIMIT ${limit}`;

/** One destination's walk: $1 destination, $2 now, $3 limit. */
export const CANDIDATES = walkOf("$1", "$2", "$3");

/** Every ready destination's walk in one statement: $1 now, $2 limit. */
export const ALL_CANDIDATES = `${READY_CTE} SELECT c.* FROM d CROSS JOIN LATERAL (${walkOf("d.name", "$1", "$2")}) c
  WHERE d.name IS NOT NULL AND d.name <> 'quarantine'`;

/**
 * Deliverable heads at `now`, oldest first_at first, at most `perDestination` of each
 * destination, in one statement: as on SQLite, a loose index scan of batches_ready finds the
 * destinations that hold a deliverable batch, and each destination's walk follows that index in
 * order and stops at its limit, so a wide backlog costs the slots it fills, not its size.
 */
export async function candidatesPg(spool: PgSpool, now: number, perDestination = 1000): Promise<Candidate[]> {
  const limit = Math.max(0, Math.floor(Math.min(perDestination, 1_000_000)));
  const rows = (await spool.sql.unsafe(ALL_CANDIDATES, [now, limit])) as Record<string, unknown>[];
  return rows.map(candidateOf).sort((a, b) => a.first_at - b.first_at || a.id - b.id);
}

const candidateOf = (r: Record<string, unknown>): Candidate => ({
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

/** One destination's deliverable heads at `now`, oldest first, at most `limit` (a pull destination's lease). */
export async function headsOfPg(spool: PgSpool, destination: string, now: number, limit: number): Promise<Candidate[]> {
  const rows = (await spool.sql.unsafe(CANDIDATES, [destination, now, Math.max(0, Math.floor(limit))])) as Record<
    string,
    unknown
  >[];
  return rows.map(candidateOf);
}

/** Unwrap, on a retry: where the earlier attempts of this delivery left off (as on SQLite). */
export async function resumePointPg(spool: PgSpool, batchId: number): Promise<Resume | null> {
  // The latest failed event since the last delivery (as SQLite's RESUME): the furthest in document order.
  const [r] = await spool.sql`WITH since AS (SELECT COALESCE((SELECT MAX(id) FROM attempts
        WHERE batch_id = ${batchId}::bigint AND outcome = 'ok'), 0) AS id)
      SELECT (SELECT a.failed_event_id FROM attempts a, since WHERE a.batch_id = ${batchId}::bigint
          AND a.finished_at IS NOT NULL AND a.failed_event_id IS NOT NULL AND a.id > since.id
          ORDER BY a.id DESC LIMIT 1) AS before,
        (SELECT COALESCE(MAX(a.unconfirmed), 0)::int FROM attempts a, since WHERE a.batch_id = ${batchId}::bigint
          AND a.finished_at IS NOT NULL AND a.id > since.id) AS unconfirmed`;
  return r && r.before !== null ? { before: num(r.before), unconfirmed: Number(r.unconfirmed) === 1 } : null;
}

/** Recover the expired leases: $1 now, $2 the live owners (text[]). */
export const RECOVER_EXPIRED = `WITH r AS (UPDATE batches
        SET state = 'retry', next_attempt_at = $1, lease_until = NULL, lease_owner = NULL,
          last_error = 'lease expired'
        WHERE id IN (SELECT id FROM batches WHERE state = 'leased' AND lease_until < $1
          AND NOT (lease_owner = ANY($2::text[])) FOR UPDATE SKIP LOCKED)
          RETURNING id, source, destination, key),
      a AS (UPDATE attempts SET finished_at = $1, outcome = 'retry', error = 'lease expired', counted = 0
        FROM r WHERE attempts.batch_id = r.id AND attempts.finished_at IS NULL)
      INSERT INTO journal (at, kind, batch_id, source, destination, key, detail)
        SELECT $1, 'retry', id, source, destination, key, '{"class":"lease expired"}' FROM r
          ORDER BY id
      RETURNING batch_id`;

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
  // One statement, so no transaction of its own: a tick with nothing expired costs one search.
  const rows = (await spool.sql.unsafe(RECOVER_EXPIRED, [now, [...live]])) as { batch_id: string }[];
  return rows.map((r) => num(r.batch_id)).sort((a, b) => a - b);
}

/**
 * The next instant a batch becomes ready after $1 (now): an open batch's window end, a retry
 * due, an await overdue (each state's minimum its own search of batches_due).
 */
export const NEXT_READY_AT = `SELECT LEAST(
      (SELECT MIN(LEAST(last_at + quiet_s, first_at + max_s)) FROM batches
        WHERE state = 'open' AND NOT (quiet_s = 0 AND max_s = 0)
          AND LEAST(last_at + quiet_s, first_at + max_s) > $1),
      (SELECT MIN(next_attempt_at) FROM batches WHERE state = 'retry' AND next_attempt_at > $1),
      (SELECT MIN(next_attempt_at) FROM batches WHERE state = 'awaiting' AND next_attempt_at > $1)) AS at`;

/**
 * The next instant after `now` at which an open batch's window ends, a retry falls due or an awaited outcome is
 * overdue; null when none will.
 */
export async function nextReadyAtPg(spool: PgSpool, now: number): Promise<number | null> {
  const [r] = await spool.sql.unsafe(NEXT_READY_AT, [now]);
  return numOrNull(r?.at);
}

/**
 * Whether some batch is ready at $1 (now). The first search is an index search of batches_due
 * in the order of its columns, so no plan made while sealed batches abound (when a scan finds
 * one soonest) scans the whole table once none is left.
 */
export const ANY_READY_NOW = `SELECT
      (SELECT true FROM batches WHERE state = 'sealed' ORDER BY state, next_attempt_at LIMIT 1)
      OR EXISTS (SELECT 1 FROM batches WHERE state IN ('retry', 'awaiting') AND next_attempt_at <= $1)
      OR EXISTS (SELECT 1 FROM batches WHERE state = 'open'
        AND ((quiet_s = 0 AND max_s = 0) OR $1 >= last_at + quiet_s OR $1 >= first_at + max_s)) AS ready`;

/**
 * Whether some batch is ready at `now`: sealed, due for a retry, open past its window, or awaiting an overdue outcome.
 */
export async function anyReadyNowPg(spool: PgSpool, now: number): Promise<boolean> {
  const [r] = await spool.sql.unsafe(ANY_READY_NOW, [now]);
  return r?.ready === true;
}

/** A successful config reload makes every config-class retry due now. */
export async function redueConfigRetriesPg(spool: PgSpool, now: number): Promise<number> {
  const r = await spool.sql`UPDATE batches SET next_attempt_at = ${now} WHERE state = 'retry' AND last_class = 'config'
      AND next_attempt_at > ${now}`;
  return r.count;
}
