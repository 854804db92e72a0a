// Retention on PostgreSQL: SQLite's rules (delivered and dropped batches with their events after
// their days, finished attempts, dedup rows past their source's window, resolved and ignored
// issues, the journal as long as delivered batches, operators' actions as long as attempts;
// dead batches never) in small transactions of at most `batchSize` rows, each deleting what
// SKIP LOCKED leaves it, so a pass never waits on a row another transaction holds.
import {
  inChunks,
  planFinishedChunk,
  RETENTION_BATCH_SIZE,
  type RetentionCounts,
  type RetentionOptions,
  type RetentionPolicy,
} from "../retention.ts";
import { num, type PgSpool } from "./db.ts";

const DAY_S = 86_400;

/** `step` in transactions until one deletes nothing (inChunks), each SKIP LOCKED, yielding between them. */
const chunks = (spool: PgSpool, step: (tx: PgSpool["sql"]) => Promise<number>) =>
  inChunks(() => spool.sql.begin((tx) => step(tx)));

/**
 * A chunk of finished batches ($1 'delivered' or 'dropped') finished before $2, oldest first, at
 * most $3, locked, with their events' counts. The literal state list lets the generic plan
 * search batches_finished, which holds only those rows.
 */
export const FINISHED_CHUNK = `SELECT b.id, (SELECT COUNT(*)::int FROM events e WHERE e.batch_id = b.id) AS events
  FROM batches b WHERE b.state IN ('delivered', 'dropped') AND b.state = $1 AND b.delivered_at < $2
  ORDER BY b.delivered_at, b.id LIMIT $3 FOR UPDATE OF b SKIP LOCKED`;

/** Finished batches before `cutoff`, oldest first, a chunk (planFinishedChunk) per transaction. */
async function deleteFinishedBatches(
  spool: PgSpool,
  state: "delivered" | "dropped",
  cutoff: number,
  size: number,
  counts: RetentionCounts,
): Promise<void> {
  await chunks(spool, async (tx) => {
    const rows = (await tx.unsafe(FINISHED_CHUNK, [state, cutoff, size])) as { id: string; events: number }[];
    const chunk = planFinishedChunk(
      rows.map((r) => ({ id: num(r.id), events: r.events })),
      size,
    );
    let changed = 0;
    if (chunk.someEventsOf) {
      const { id, limit } = chunk.someEventsOf;
      changed += (
        await tx`DELETE FROM events WHERE id IN (
          SELECT id FROM events WHERE batch_id = ${id}::bigint ORDER BY id LIMIT ${limit})`
      ).count;
    }
    counts.events += changed;
    for (const id of chunk.batches) {
      const events = (await tx`DELETE FROM events WHERE batch_id = ${id}::bigint`).count;
      const gone = (await tx`DELETE FROM batches WHERE id = ${id}::bigint AND state IN ('delivered', 'dropped')`).count;
      counts.events += events;
      counts.batches += gone;
      changed += events + gone;
    }
    return changed;
  });
}

/** One retention pass at `now`; the counts of what it deleted. */
export async function runRetentionPg(
  spool: PgSpool,
  policy: RetentionPolicy,
  now: number,
  opts: RetentionOptions = {},
): Promise<RetentionCounts> {
  const size = Math.max(1, Math.floor(opts.batchSize ?? RETENTION_BATCH_SIZE));
  const counts: RetentionCounts = { batches: 0, events: 0, attempts: 0, dedup: 0, issues: 0 };
  await deleteFinishedBatches(spool, "delivered", now - policy.deliveredDays * DAY_S, size, counts);
  await deleteFinishedBatches(spool, "dropped", now - policy.droppedDays * DAY_S, size, counts);
  const attemptsCutoff = now - policy.attemptsDays * DAY_S;
  await chunks(spool, async (tx) => {
    const n = (
      await tx`DELETE FROM attempts WHERE id IN (SELECT id FROM attempts WHERE started_at < ${attemptsCutoff}
        AND finished_at IS NOT NULL ORDER BY started_at, id LIMIT ${size} FOR UPDATE SKIP LOCKED)`
    ).count;
    counts.attempts += n;
    return n;
  });
  const sources = ((await spool.sql`SELECT DISTINCT source FROM dedup ORDER BY source`) as { source: string }[]).map(
    (r) => r.source,
  );
  for (const source of sources) {
    const window = policy.dedupWindowS(source);
    if (!Number.isFinite(window)) continue;
    const cutoff = now - window;
    await chunks(spool, async (tx) => {
      const n = (
        await tx`DELETE FROM dedup WHERE (source, dedup_id) IN (SELECT source, dedup_id FROM dedup
          WHERE source = ${source} AND seen_at < ${cutoff} ORDER BY seen_at LIMIT ${size} FOR UPDATE SKIP LOCKED)`
      ).count;
      counts.dedup += n;
      return n;
    });
  }
  const issuesCutoff = now - policy.issuesDays * DAY_S;
  await chunks(spool, async (tx) => {
    const n = (
      await tx`DELETE FROM issues WHERE id IN (SELECT id FROM issues WHERE state IN ('resolved', 'ignored')
        AND last_at < ${issuesCutoff} ORDER BY last_at, id LIMIT ${size} FOR UPDATE SKIP LOCKED)`
    ).count;
    counts.issues += n;
    return n;
  });
  const journalCutoff = now - policy.deliveredDays * DAY_S;
  await chunks(
    spool,
    async (tx) =>
      (
        await tx`DELETE FROM journal WHERE id IN (SELECT id FROM journal WHERE at < ${journalCutoff} ORDER BY id
          LIMIT ${size} FOR UPDATE SKIP LOCKED)`
      ).count,
  );
  // A key's last delivered version is kept as long as a delivered batch (its age: the key's last delivery).
  await chunks(
    spool,
    async (tx) =>
      (
        await tx`DELETE FROM delivered_versions WHERE (route, key) IN (SELECT route, key FROM delivered_versions
          WHERE at < ${journalCutoff} ORDER BY at LIMIT ${size} FOR UPDATE SKIP LOCKED)`
      ).count,
  );
  await chunks(
    spool,
    async (tx) =>
      (
        await tx`DELETE FROM actions WHERE id IN (SELECT id FROM actions WHERE at < ${attemptsCutoff} ORDER BY id
          LIMIT ${size} FOR UPDATE SKIP LOCKED)`
      ).count,
  );
  return counts;
}

/** Which of `hashes` an events row names as its body_file (the partial index answers it). */
export async function namedBodiesPg(spool: PgSpool, hashes: readonly string[]): Promise<Set<string>> {
  if (hashes.length === 0) return new Set();
  const rows = (await spool.sql`SELECT DISTINCT body_file FROM events
      WHERE body_file = ANY(${hashes as string[]}::text[])`) as { body_file: string }[];
  return new Set(rows.map((r) => r.body_file));
}
