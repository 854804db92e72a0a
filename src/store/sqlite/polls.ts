// The poll clock: the dispatcher's durable schedule for sources with no push. Each step for one
// instance is one BEGIN IMMEDIATE: a new instance is scheduled at a jittered first tick; a due
// instance whose previous tick batch is unfinished only moves on (skipped + 1), so ticks never
// pile up; otherwise one tick event is enqueued and next_at moved in the same transaction, so a
// kill between them cannot happen, and the dedup id poll:<i>:<next_at> guards a second try.
import type { Database } from "bun:sqlite";
import type { Rng } from "../../clock.ts";
import { testHook } from "../../testhook.ts";
import { prepared, type SqliteSpool } from "./db.ts";
import { enqueueTx } from "./enqueue.ts";
import type { NewEvent } from "../enqueue.ts";
import { due, type PollStep, type PollPlan, UNFINISHED } from "../polls.ts";

interface Row {
  next_at: number;
  last_batch_id: number | null;
}

const Q = {
  row: "SELECT next_at, last_batch_id FROM polls WHERE instance = ?",
  insert: "INSERT INTO polls (instance, next_at, created_at) VALUES (?, ?, ?)",
  batchState: "SELECT state FROM batches WHERE id = ?",
  skip: "UPDATE polls SET next_at = ?, skipped = skipped + 1 WHERE instance = ?",
  tick: "UPDATE polls SET last_tick_at = ?, last_batch_id = ?, next_at = ? WHERE instance = ?",
  move: "UPDATE polls SET next_at = ? WHERE instance = ?",
  delivered: "UPDATE polls SET delivered_at = ?, delivered_tick_at = last_tick_at WHERE last_batch_id = ?",
};

/**
 * Advance one instance's clock; null when nothing was due. `tick(at)` builds the tick event for
 * the scheduled time `at` (routing is config's, so the caller makes it).
 */
export function stepPoll(
  spool: SqliteSpool,
  p: PollPlan,
  now: number,
  rng: Rng,
  tick: (at: number) => NewEvent,
): PollStep | null {
  if (due(prepared<Row, [string]>(spool.db, Q.row).get(p.instance), p, now) === "wait") return null;
  return spool.db
    .transaction((): PollStep | null => {
      const db = spool.db;
      const row = prepared<Row, [string]>(db, Q.row).get(p.instance);
      const step = due(row, p, now);
      const next = now + p.everyS + rng.next() * p.jitterS;
      if (step === "wait") return null;
      if (step === "scheduled") {
        prepared(db, Q.insert).run(p.instance, now + rng.next() * p.jitterS, now);
        return step;
      }
      if (step === "rescheduled" || !row) {
        prepared(db, Q.move).run(next, p.instance);
        return "rescheduled";
      }
      const last =
        row.last_batch_id === null
          ? null
          : prepared<{ state: string }, [number]>(db, Q.batchState).get(row.last_batch_id);
      if (last && UNFINISHED.has(last.state)) {
        prepared(db, Q.skip).run(next, p.instance);
        return "skipped";
      }
      const r = enqueueTx(db, tick(row.next_at), now);
      // Crash point: the tick is enqueued and next_at not yet moved, in one transaction.
      testHook("poll.after_enqueue");
      const batchId = r.status === "queued" ? r.placed[0].batchId : (row.last_batch_id ?? null);
      prepared(db, Q.tick).run(row.next_at, batchId, next, p.instance);
      return "ticked";
    })
    .immediate();
}

/** Inside the delivery mark: a delivered tick batch is its instance's last delivered tick. */
export function pollDeliveredTx(db: Database, batchId: number, now: number): void {
  prepared(db, Q.delivered).run(now, batchId);
}
