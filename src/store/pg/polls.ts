// The poll clock on PostgreSQL, with SQLite's steps (polls.ts's `due` decides): a new instance
// scheduled at a jittered first tick; a due one whose previous tick batch is unfinished only
// moves on (skipped + 1); otherwise its tick event is queued and next_at moved in one
// transaction, the instance's row locked. Only the maintenance holder runs it.
import type { Rng } from "../../clock.ts";
import type { NewEvent } from "../enqueue.ts";
import { due, type PollPlan, type PollStep, UNFINISHED } from "../polls.ts";
import { num, numOrNull, type PgSpool } from "./db.ts";
import { enqueueEventsPgTx } from "./enqueue.ts";
import { testHook } from "../../testhook.ts";

export async function stepPollPg(
  spool: PgSpool,
  p: PollPlan,
  now: number,
  rng: Rng,
  tick: (at: number) => NewEvent,
): Promise<PollStep | null> {
  const [peek] = await spool.sql`SELECT next_at FROM polls WHERE instance = ${p.instance}`;
  if (due(peek ? { next_at: Number(peek.next_at) } : null, p, now) === "wait") return null;
  return spool.sql.begin(async (tx): Promise<PollStep | null> => {
    const [r] = await tx`SELECT next_at, last_batch_id FROM polls WHERE instance = ${p.instance} FOR UPDATE`;
    const row = r ? { next_at: Number(r.next_at), last_batch_id: numOrNull(r.last_batch_id) } : null;
    const step = due(row, p, now);
    const next = now + p.everyS + rng.next() * p.jitterS;
    if (step === "wait") return null;
    if (step === "scheduled") {
      const made = await tx`INSERT INTO polls (instance, next_at, created_at)
          VALUES (${p.instance}, ${now + rng.next() * p.jitterS}, ${now}) ON CONFLICT (instance) DO NOTHING`;
      return made.count === 1 ? step : null;
    }
    if (step === "rescheduled" || !row) {
      await tx`UPDATE polls SET next_at = ${next} WHERE instance = ${p.instance}`;
      return "rescheduled";
    }
    const [last] =
      row.last_batch_id === null ? [] : await tx`SELECT state FROM batches WHERE id = ${row.last_batch_id}::bigint`;
    if (last && UNFINISHED.has(String(last.state))) {
      await tx`UPDATE polls SET next_at = ${next}, skipped = skipped + 1 WHERE instance = ${p.instance}`;
      return "skipped";
    }
    const [res] = await enqueueEventsPgTx(tx, [tick(row.next_at)], now);
    testHook("poll.after_enqueue");
    const batchId = res.status === "queued" ? res.placed[0].batchId : row.last_batch_id;
    await tx`UPDATE polls
      SET last_tick_at = ${row.next_at}, last_batch_id = ${batchId === null ? null : num(batchId)}::bigint,
        next_at = ${next} WHERE instance = ${p.instance}`;
    return "ticked";
  });
}
