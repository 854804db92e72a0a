// The delivery queue, the dispatcher's side before an attempt ends: readiness sealing, the FIFO
// candidate query (heads of their (route, key) group; claim.ts leases them), lease recovery,
// a paced destination's rate window, and when the next batch becomes ready by itself. Every per-tick query here is held
// to an index by test/store/plans.test.ts (tickQueryPlans).
import { prepared, type SqliteSpool } from "./db.ts";
import { sealBatchTx } from "./enqueue.ts";
import { journalTx } from "./journal.ts";
import { budgetSpends } from "./budgets.ts";
import { testHook } from "../../testhook.ts";
import { type Rate, rateMarginS, type WindowHit } from "../../pacing.ts";
import type { Resume } from "../../delivery.ts";
import type { Candidate, RecoverOptions } from "../queue.ts";
import { PULL_OWNER_PREFIX } from "../pull.ts";

const READY = `SELECT id, destination, route, key FROM batches WHERE state = 'open'
  AND ((quiet_s = 0 AND max_s = 0) OR $now >= last_at + quiet_s OR $now >= first_at + max_s)
  ORDER BY id`;

/**
 * Seal the open batches that are ready at `now` (READY above), the oldest first, at most
 * `limit`; returns their ids. A batch whose destination has a key_budget (in `keyBudgets`) that
 * its key has spent stays open past its window, so the key's events keep coalescing into it and
 * the run the window next allows sees them all (max_events and max_bytes still seal it at the
 * enqueue); it is passed over, not counted, so held batches never keep others from sealing.
 */
export function sealReady(
  spool: SqliteSpool,
  now: number,
  keyBudgets: ReadonlyMap<string, Rate> = new Map(),
  limit = Number.POSITIVE_INFINITY,
): number[] {
  return spool.db
    .transaction(() => {
      const ready = prepared<{ id: number; destination: string; route: string; key: string }, Record<string, number>>(
        spool.db,
        READY,
      ).all({ now });
      const ids = ready
        .filter((b) => {
          const kb = keyBudgets.get(b.destination);
          return !kb || budgetSpends(spool, b.destination, kb.windowS, now, b).length < kb.limit;
        })
        .map((r) => r.id)
        .slice(0, limit);
      for (const id of ids) sealBatchTx(spool.db, id, now);
      testHook("seal.before_commit");
      return ids;
    })
    .immediate();
}

// The destinations that hold a deliverable batch: a loose index scan of batches_ready (one
// search per destination), never a pass over the batches themselves.
const READY_DESTINATIONS = `WITH RECURSIVE d(name) AS (
    SELECT MIN(destination) FROM batches INDEXED BY batches_ready WHERE state IN ('sealed', 'retry')
    UNION ALL
    SELECT (SELECT MIN(destination) FROM batches INDEXED BY batches_ready WHERE state IN ('sealed', 'retry')
      AND destination > d.name)
      FROM d WHERE d.name IS NOT NULL)
  SELECT name FROM d WHERE name IS NOT NULL AND name <> 'quarantine'`;

// One destination's deliverable batches that head their (route, key) group, oldest first_at
// (then id) first: a batch is a head when no unfinished batch of its group came before it, so
// a group whose head is open, leased or backing off yields nothing. The walk follows
// batches_ready in order and stops at $limit, so a wide backlog costs the slots it fills, not
// its size; rows it passes over are retries not yet due and the tails of groups whose head is
// out (each a search of batches_queue).
const CANDIDATES = `SELECT b.id, b.route, b.source, b.destination, b.key, b.state, b.first_at, b.attempts, b.count,
  b.bytes
  FROM batches b INDEXED BY batches_ready
  WHERE b.destination = $destination AND b.state IN ('sealed', 'retry')
    AND (b.state = 'sealed' OR b.next_attempt_at <= $now)
    AND (b.not_before IS NULL OR b.not_before <= $now)
    AND NOT EXISTS (SELECT 1 FROM batches p INDEXED BY batches_queue
      WHERE p.route = b.route AND p.key = b.key AND p.state IN ('open', 'sealed', 'retry', 'leased', 'awaiting')
        AND p.first_at <= b.first_at AND (p.first_at < b.first_at OR p.id < b.id))
  ORDER BY b.first_at, b.id
  LIMIT $limit`;

/**
 * Deliverable batches at `now`, oldest first_at first: strictly FIFO per group, parallel across
 * groups. At most `perDestination` of each destination's (the dispatcher asks for no more than
 * it has slots); all of them by default.
 */
export function candidates(spool: SqliteSpool, now: number, perDestination = Number.POSITIVE_INFINITY): Candidate[] {
  const db = spool.db;
  const limit = Number.isFinite(perDestination) ? Math.max(0, Math.floor(perDestination)) : -1;
  const out: Candidate[] = [];
  for (const { name } of prepared<{ name: string }, []>(db, READY_DESTINATIONS).all()) {
    out.push(
      ...prepared<Candidate, Record<string, string | number>>(db, CANDIDATES).all({ destination: name, now, limit }),
    );
  }
  return out.sort((a, b) => a.first_at - b.first_at || a.id - b.id);
}

/** One destination's deliverable heads at `now`, oldest first, at most `limit` (a pull destination's lease). */
export function headsOf(spool: SqliteSpool, destination: string, now: number, limit: number): Candidate[] {
  return prepared<Candidate, Record<string, string | number>>(spool.db, CANDIDATES).all({
    destination,
    now,
    limit: Math.max(0, Math.floor(limit)),
  });
}

const LEASED = "SELECT id, lease_owner, lease_until FROM batches WHERE state = 'leased' ORDER BY id";

const EXPIRE = `UPDATE batches SET state = 'retry', next_attempt_at = $now, lease_until = NULL, lease_owner = NULL,
    last_error = 'lease expired'
  WHERE id = $id AND state = 'leased' AND lease_owner = $owner`;

const EXPIRE_ATTEMPT = `UPDATE attempts SET finished_at = $now, outcome = 'retry', error = 'lease expired', counted = 0
  WHERE batch_id = $id AND finished_at IS NULL`;

/** Leased rows whose owner is gone -> retry, due now, uncounted, 'lease expired'. Returns their ids. */
export function recoverLeases(spool: SqliteSpool, o: RecoverOptions): number[] {
  const db = spool.db;
  return db
    .transaction(() => {
      const recovered: number[] = [];
      for (const row of prepared<{ id: number; lease_owner: string; lease_until: number }, []>(db, LEASED).all()) {
        if (o.live?.has(row.lease_owner)) continue;
        // At the start every dispatcher's lease is a dead process's (the flock says so); a pull
        // consumer's is not, and ends only when it expires.
        const expiredOnly = !o.all || row.lease_owner.startsWith(PULL_OWNER_PREFIX);
        if (expiredOnly && !(row.lease_until < o.now)) continue;
        if (prepared(db, EXPIRE).run({ id: row.id, owner: row.lease_owner, now: o.now }).changes === 1) {
          prepared(db, EXPIRE_ATTEMPT).run({ id: row.id, now: o.now });
          journalTx(db, "retry", row.id, o.now, { detail: { class: "lease expired" } });
          recovered.push(row.id);
        }
      }
      return recovered;
    })
    .immediate();
}

// A paced destination's window: its attempts in flight and those that ended within the window,
// two searches of attempts_window (only paced destinations' attempts are in it).
const RATE_WINDOW = `SELECT hits, finished_at AS finishedAt FROM attempts WHERE destination = $destination
  AND hits IS NOT NULL AND finished_at IS NULL
  UNION ALL
  SELECT hits, finished_at AS finishedAt FROM attempts WHERE destination = $destination AND hits IS NOT NULL
    AND finished_at > $since`;

/** The hits that may still be in a paced destination's window at `now` (pacing.ts reads them). */
export function rateWindow(spool: SqliteSpool, destination: string, now: number, rate: Rate): WindowHit[] {
  return prepared<WindowHit, Record<string, string | number>>(spool.db, RATE_WINDOW).all({
    destination,
    since: now - rate.windowS - rateMarginS(rate),
  });
}

// Since the batch's latest delivery (a resend's ids are new): the furthest event an attempt
// failed at (every event before it got through), and whether one took an unconfirmed duplicate.
// The latest failed event since the last delivery: each attempt starts where the one before it
// failed, so the latest is the furthest in the document's order (which is its versions' order).
const RESUME = `WITH since AS (SELECT COALESCE((SELECT MAX(id) FROM attempts
      WHERE batch_id = $batch AND outcome = 'ok'), 0) AS id)
  SELECT (SELECT a.failed_event_id FROM attempts a, since WHERE a.batch_id = $batch AND a.finished_at IS NOT NULL
      AND a.failed_event_id IS NOT NULL AND a.id > since.id ORDER BY a.id DESC LIMIT 1) AS before,
    (SELECT COALESCE(MAX(a.unconfirmed), 0) FROM attempts a, since WHERE a.batch_id = $batch
      AND a.finished_at IS NOT NULL AND a.id > since.id) AS unconfirmed`;

/** Unwrap, on a retry: where the earlier attempts of this delivery left off; null when nothing got through. */
export function resumePoint(spool: SqliteSpool, batchId: number): Resume | null {
  const r = prepared<{ before: number | null; unconfirmed: number }, Record<string, number>>(spool.db, RESUME).get({
    batch: batchId,
  });
  return r && r.before !== null ? { before: r.before, unconfirmed: r.unconfirmed === 1 } : null;
}

const NEXT_OPEN_READY = `SELECT MIN(MIN(last_at + quiet_s, first_at + max_s)) AS at FROM batches
  WHERE state = 'open' AND NOT (quiet_s = 0 AND max_s = 0) AND MIN(last_at + quiet_s, first_at + max_s) > $now`;
// A retry falls due, or an awaiting batch's outcome is overdue (the dispatcher times it out).

const NEXT_RETRY_DUE =
  "SELECT MIN(next_attempt_at) AS at FROM batches WHERE state IN ('retry', 'awaiting') AND next_attempt_at > $now";

/**
 * The next instant after `now` at which a batch becomes ready by itself: an open batch's quiet window or maximum wait
 * ends, a retry falls due, or an awaited outcome is overdue. Null when none will. Its cost follows the open and
 * retrying batches, never the delivered history.
 */
export function nextReadyAt(spool: SqliteSpool, now: number): number | null {
  const open =
    prepared<{ at: number | null }, Record<string, number>>(spool.db, NEXT_OPEN_READY).get({ now })?.at ?? null;
  const retry =
    prepared<{ at: number | null }, Record<string, number>>(spool.db, NEXT_RETRY_DUE).get({ now })?.at ?? null;
  if (open === null) return retry;
  return retry === null ? open : Math.min(open, retry);
}

const ANY_READY_NOW = `SELECT EXISTS (SELECT 1 FROM batches WHERE state = 'sealed')
  OR EXISTS (SELECT 1 FROM batches WHERE state IN ('retry', 'awaiting') AND next_attempt_at <= $now)
  OR EXISTS (SELECT 1 FROM batches WHERE state = 'open'
    AND ((quiet_s = 0 AND max_s = 0) OR $now >= last_at + quiet_s OR $now >= first_at + max_s)) AS ready`;

/**
 * Whether some batch is ready at `now` (sealed, due for a retry, open past its window, or
 * awaiting an outcome now overdue): the
 * dispatcher asks when another process wrote, and ticks only if so. Read-only, index searches.
 */
export function anyReadyNow(spool: SqliteSpool, now: number): boolean {
  return (prepared<{ ready: number }, Record<string, number>>(spool.db, ANY_READY_NOW).get({ now })?.ready ?? 0) === 1;
}

/** How SQLite runs the dispatcher's per-tick queries (tests hold them to indexes, never a scan of history). */
export function tickQueryPlans(spool: SqliteSpool): Record<string, string[]> {
  const plan = (sql: string) => {
    const q = spool.db.query(`EXPLAIN QUERY PLAN ${sql}`);
    const args = Object.fromEntries(
      q.paramsCount
        ? ["now", "destination", "limit", "since"]
            .filter((k) => sql.includes(`$${k}`))
            .map((k) => [k, k === "destination" ? "d" : 4])
        : [],
    );
    return (q.all(args as never) as { detail: string }[]).map((r) => r.detail);
  };
  return {
    ready: plan(READY),
    readyDestinations: plan(READY_DESTINATIONS),
    candidates: plan(CANDIDATES),
    nextOpenReady: plan(NEXT_OPEN_READY),
    nextRetryDue: plan(NEXT_RETRY_DUE),
    anyReadyNow: plan(ANY_READY_NOW),
    rateWindow: plan(RATE_WINDOW),
  };
}

/** A successful config reload makes every config-class retry due now. */
export function redueConfigRetries(spool: SqliteSpool, now: number): number {
  return spool.db
    .transaction(
      () =>
        prepared(
          spool.db,
          "UPDATE batches SET next_attempt_at = $now WHERE state = 'retry' AND last_class = 'config' " +
            "AND next_attempt_at > $now",
        ).run({ now }).changes,
    )
    .immediate();
}
