// Claims on SQLite: the batches a tick's free slots take, leased in one BEGIN IMMEDIATE
// transaction, each in a savepoint of its own; the attempt row is written first (its id is part
// of the lease's fence), then the lease (the first one also fixes the batch's stale floor), the
// delivery id and the journal row; a batch an operator verb took first is null in its place.
import type { Database } from "bun:sqlite";
import { prepared, type SqliteSpool, tx } from "./db.ts";
import { markProbeTx } from "./destinations.ts";
import { journalTx } from "./journal.ts";
import { testHook } from "../../testhook.ts";
import type { Claim, ClaimInput } from "../queue.ts";

class LostRace extends Error {}

const Q = {
  attemptCount: "SELECT COUNT(*) AS n FROM attempts WHERE batch_id = ?",
  deliveredBefore: "SELECT COUNT(*) AS n FROM attempts WHERE batch_id = ? AND outcome = 'ok'",
  startAttempt: `INSERT INTO attempts (batch_id, n, destination, started_at, probe, counted, hits)
    VALUES ($batch, $n, $destination, $now, $probe, 0, $hits)`,
  setDeliveryId: "UPDATE attempts SET delivery_id = ? WHERE id = ?",
  // The first lease fixes the last version the batch's (route, key) delivered (stale-plan.ts):
  // every later attempt judges its events against the same floor.
  lease: `UPDATE batches SET state = 'leased', lease_until = $until, lease_owner = $owner,
      stale_floor = CASE WHEN floor_at IS NULL THEN (SELECT v.version FROM delivered_versions v
        WHERE v.route = batches.route AND v.key = batches.key) ELSE stale_floor END,
      floor_at = COALESCE(floor_at, $now)
    WHERE id = $id AND state IN ('sealed', 'retry')`,
};

/**
 * Lease a batch for one attempt: the attempt row is written first (its id is part of the
 * fence), then the lease. Returns null when the batch was no longer claimable.
 */
export function claimBatch(spool: SqliteSpool, c: ClaimInput): Claim | null {
  return claimBatches(spool, [c])[0] ?? null;
}

/**
 * Claim several batches in one BEGIN IMMEDIATE transaction (one commit for the slots a tick
 * fills), each under its own savepoint: a batch that is no longer sealed or retry (an operator
 * verb got there first) is null in its place and the others are claimed.
 */
export function claimBatches(spool: SqliteSpool, inputs: readonly ClaimInput[]): (Claim | null)[] {
  const db = spool.db;
  if (inputs.length === 0) return [];
  const t = tx(db);
  return t.immediate((): (Claim | null)[] => {
    const claims = inputs.map((c) => {
      try {
        return t.nested(() => claimTx(db, c));
      } catch (e) {
        // A lost race is undone alone; anything else (a full disk ends the transaction) fails the tick's claims.
        if (e instanceof LostRace && db.inTransaction) return null;
        throw e;
      }
    });
    testHook("claim.before_commit");
    return claims;
  });
}

function claimTx(db: Database, c: ClaimInput): Claim {
  const n = (prepared<{ n: number }, [number]>(db, Q.attemptCount).get(c.batchId)?.n ?? 0) + 1;
  const attemptId = Number(
    prepared(db, Q.startAttempt).run({
      batch: c.batchId,
      n,
      destination: c.destination,
      now: c.now,
      probe: c.probe ? 1 : 0,
      hits: c.rate ? (c.hits ?? 1) : null,
    }).lastInsertRowid,
  );
  const owner = `${c.host}:${c.pid}:${attemptId}`;
  if (prepared(db, Q.lease).run({ id: c.batchId, until: c.leaseUntil, owner, now: c.now }).changes !== 1)
    throw new LostRace();
  // Each earlier successful attempt is a delivery this one repeats (replay --delivered).
  const resend = prepared<{ n: number }, [number]>(db, Q.deliveredBefore).get(c.batchId)?.n ?? 0;
  const deliveryId = c.deliveryId ? c.deliveryId(attemptId, n, resend) : null;
  if (deliveryId !== null) prepared(db, Q.setDeliveryId).run(deliveryId, attemptId);
  if (c.probe) markProbeTx(db, c.destination, c.batchId, c.leaseUntil);
  journalTx(db, "leased", c.batchId, c.now, { attempt: attemptId, detail: { n, ...(resend ? { resend } : {}) } });
  return { attemptId, n, owner, leaseUntil: c.leaseUntil, deliveryId, resend };
}
