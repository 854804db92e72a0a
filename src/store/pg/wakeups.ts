// Wake-ups across hosts: a transaction that makes work (a batch queued or sealed) NOTIFYs the
// channel with the Unix time its earliest batch may be delivered; every dispatcher LISTENs and
// ticks at once or arms its readiness timer for it, with no query. A notification is delivered only when
// its transaction commits. The dispatcher's tick stays the safety net (a dropped listening
// connection is re-subscribed by the client, and anything missed meanwhile waits a tick at most).
import type { PgSpool, Tx } from "./db.ts";

export const WORK_CHANNEL = "hookspool_work";

/** In the caller's transaction: work may be delivered from `readyAt` on. */
export async function notifyWork(tx: Tx, readyAt: number): Promise<void> {
  await tx`SELECT pg_notify(${WORK_CHANNEL}, ${String(readyAt)})`;
}

/** Call `onWork(readyAt)` for every committed notification; resolves once listening. */
export async function listenForWork(
  spool: PgSpool,
  onWork: (readyAt: number) => void,
): Promise<{ stop(): Promise<void> }> {
  const sub = await spool.sql.listen(WORK_CHANNEL, (payload) => {
    const at = Number(payload);
    if (Number.isFinite(at)) onWork(at);
  });
  return { stop: () => sub.unlisten() };
}
