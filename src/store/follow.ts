// What `hookspool send --follow` reads: the event a request became, and its batch's state as it
// changes, from another connection, without holding a transaction between reads. It looks again
// only when the database changed (PRAGMA data_version), every 50 ms at most.
import { prepared, type Spool } from "./db.ts";

export interface FollowStep {
  batch: number;
  state: string;
  /** The last error or class of a retry or a dead batch, the result of a delivered one. */
  detail?: string;
}

/** The highest event id so far (0 for none): the request sent next makes a higher one. */
export function newestEventId(spool: Spool): number {
  return prepared<{ id: number | null }, []>(spool.db, "SELECT MAX(id) AS id FROM events").get()?.id ?? 0;
}

const FIRST_AFTER = "SELECT batch_id FROM events WHERE source = ? AND id > ? ORDER BY id LIMIT 1";
const BATCH = "SELECT state, last_class, dead_reason, result FROM batches WHERE id = ?";
const TERMINAL = new Set(["delivered", "dead", "dropped"]);

/** Each state the event's batch takes, until it is delivered, dead or dropped, or `timeoutMs` ran out. */
export async function* followEvent(spool: Spool, o: { source: string; after: number; timeoutMs: number }): AsyncGenerator<FollowStep> {
  const until = performance.now() + o.timeoutMs;
  let version = -1;
  let batch: number | null = null;
  let last = "";
  while (performance.now() < until) {
    const v = prepared<{ data_version: number }, []>(spool.db, "PRAGMA data_version").get()?.data_version ?? 0;
    if (v !== version) {
      version = v;
      if (batch === null) batch = prepared<{ batch_id: number }, [string, number]>(spool.db, FIRST_AFTER).get(o.source, o.after)?.batch_id ?? null;
      if (batch !== null) {
        const b = prepared<{ state: string; last_class: string | null; dead_reason: string | null; result: string | null }, [number]>(spool.db, BATCH).get(batch);
        if (b && b.state !== last) {
          last = b.state;
          const detail = b.state === "dead" ? (b.dead_reason ?? undefined) : b.state === "retry" ? (b.last_class ?? undefined) : b.state === "delivered" ? (b.result ?? undefined) : undefined;
          yield detail ? { batch, state: b.state, detail } : { batch, state: b.state };
          if (TERMINAL.has(b.state)) return;
        }
      }
    }
    await Bun.sleep(50);
  }
}
