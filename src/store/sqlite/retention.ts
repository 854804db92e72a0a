// Retention on SQLite: delivered and dropped batches with their events after their days,
// finished attempts, dedup rows past their source's window, resolved and ignored issues, the
// journal; dead batches never. Small BEGIN IMMEDIATE transactions (retention.ts's inChunks),
// yielding to the event loop between them, so the intake never waits long for the write lock;
// then a WAL checkpoint, and VACUUM when asked.
import type { Database } from "bun:sqlite";
import { testHook } from "../../testhook.ts";
import { prepared, type SqliteSpool } from "./db.ts";
import {
  type RetentionCounts,
  RETENTION_BATCH_SIZE,
  type RetentionOptions,
  DAY_S,
  type RetentionPolicy,
  inChunks,
  type FinishedBatch,
  planFinishedChunk,
} from "../retention.ts";

export const Q = {
  // Oldest first through batches_delivered (state, delivered_at). A dropped batch's delivered_at
  // is when it was dropped (operator.ts). Dead batches are never selected.
  // With each batch's event count, which decides how many fit in one transaction.
  finished: `SELECT b.id, (SELECT COUNT(*) FROM events e WHERE e.batch_id = b.id) AS events
    FROM batches b WHERE b.state = $state AND b.delivered_at < $cutoff
    ORDER BY b.delivered_at, b.id LIMIT $limit`,
  deleteEvents: "DELETE FROM events WHERE batch_id = ?",
  // A batch with more events than one transaction may delete loses them a chunk at a time.
  deleteSomeEvents: "DELETE FROM events WHERE id IN (SELECT id FROM events WHERE batch_id = ? ORDER BY id LIMIT ?)",
  // The state is checked again: only a delivered or dropped batch is ever deleted.
  deleteBatch: "DELETE FROM batches WHERE id = ? AND state IN ('delivered', 'dropped')",
  // Attempts have no foreign key and outlive their batches; a running attempt is never touched.
  deleteAttempts: `DELETE FROM attempts WHERE id IN (
    SELECT id FROM attempts WHERE started_at < $cutoff AND finished_at IS NOT NULL ORDER BY started_at, id
      LIMIT $limit)`,
  // The sources present in dedup, one index probe each rather than a scan of every row.
  nextDedupSource: "SELECT MIN(source) AS source FROM dedup WHERE source > ?",
  deleteDedup: `DELETE FROM dedup WHERE rowid IN (
    SELECT rowid FROM dedup WHERE source = $source AND seen_at < $cutoff ORDER BY seen_at LIMIT $limit)`,
  // The journal keeps what `watch` can resume from as long as delivered batches are kept.
  deleteJournal: `DELETE FROM journal WHERE id IN (SELECT id FROM journal WHERE at < $cutoff ORDER BY id LIMIT $limit)`,
  // A key's last delivered version is kept as long as a delivered batch (its age: the key's last delivery).
  deleteVersions: `DELETE FROM delivered_versions WHERE rowid IN (
    SELECT rowid FROM delivered_versions WHERE at < $cutoff ORDER BY at LIMIT $limit)`,
  // Operators' actions are kept as long as attempts, the other half of a batch's story.
  deleteActions: `DELETE FROM actions WHERE id IN (SELECT id FROM actions WHERE at < $cutoff ORDER BY id LIMIT $limit)`,
  deleteIssues: `DELETE FROM issues WHERE id IN (
    SELECT id FROM issues WHERE state IN ('resolved', 'ignored') AND last_at < $cutoff ORDER BY last_at, id
      LIMIT $limit)`,
  checkpoint: "PRAGMA wal_checkpoint(TRUNCATE)",
} as const;

/**
 * Delete delivered or dropped batches whose delivered_at is before `cutoff`, with their events,
 * oldest first, a chunk (planFinishedChunk) per transaction.
 */
async function deleteFinishedBatches(
  spool: SqliteSpool,
  state: "delivered" | "dropped",
  cutoff: number,
  size: number,
  counts: RetentionCounts,
): Promise<void> {
  const db = spool.db;
  await chunks(spool, () => {
    const rows = prepared<FinishedBatch, Record<string, string | number>>(db, Q.finished).all({
      state,
      cutoff,
      limit: size,
    });
    const chunk = planFinishedChunk(rows, size);
    let changed = 0;
    if (chunk.someEventsOf)
      changed += prepared(db, Q.deleteSomeEvents).run(chunk.someEventsOf.id, chunk.someEventsOf.limit).changes;
    counts.events += changed;
    for (const id of chunk.batches) {
      const events = prepared(db, Q.deleteEvents).run(id).changes;
      const gone = prepared(db, Q.deleteBatch).run(id).changes;
      counts.events += events;
      counts.batches += gone;
      changed += events + gone;
    }
    return changed;
  });
}

async function deleteBy(
  spool: SqliteSpool,
  sql: string,
  params: Record<string, string | number>,
  add: (n: number) => void,
): Promise<void> {
  await chunks(spool, () => {
    const n = prepared(spool.db, sql).run(params).changes;
    add(n);
    return n;
  });
}

/**
 * Run one retention pass at `now`: delivered batches with their events and raw bodies
 * after deliveredDays; dropped batches after droppedDays; finished attempts by started_at after
 * attemptsDays; dedup rows older than their source's window; resolved and ignored issues after
 * issuesDays; the journal and each key's last delivered version after deliveredDays. Dead batches
 * (quarantine included) and unfinished batches are never deleted. Each transaction deletes at
 * most batchSize rows; the WAL is checkpointed (TRUNCATE) after.
 */
export async function runRetention(
  spool: SqliteSpool,
  policy: RetentionPolicy,
  now: number,
  opts: RetentionOptions = {},
): Promise<RetentionCounts> {
  const size = Math.max(1, Math.floor(opts.batchSize ?? RETENTION_BATCH_SIZE));
  const db = spool.db;
  const counts: RetentionCounts = { batches: 0, events: 0, attempts: 0, dedup: 0, issues: 0 };
  await deleteFinishedBatches(spool, "delivered", now - policy.deliveredDays * DAY_S, size, counts);
  await deleteFinishedBatches(spool, "dropped", now - policy.droppedDays * DAY_S, size, counts);
  await deleteBy(spool, Q.deleteAttempts, { cutoff: now - policy.attemptsDays * DAY_S, limit: size }, (n) => {
    counts.attempts += n;
  });
  for (const source of dedupSources(db)) {
    const window = policy.dedupWindowS(source);
    if (!Number.isFinite(window)) continue;
    await deleteBy(spool, Q.deleteDedup, { source, cutoff: now - window, limit: size }, (n) => {
      counts.dedup += n;
    });
  }
  await deleteBy(spool, Q.deleteIssues, { cutoff: now - policy.issuesDays * DAY_S, limit: size }, (n) => {
    counts.issues += n;
  });
  await deleteBy(spool, Q.deleteJournal, { cutoff: now - policy.deliveredDays * DAY_S, limit: size }, () => {});
  await deleteBy(spool, Q.deleteVersions, { cutoff: now - policy.deliveredDays * DAY_S, limit: size }, () => {});
  await deleteBy(spool, Q.deleteActions, { cutoff: now - policy.attemptsDays * DAY_S, limit: size }, () => {});
  await checkpointAfterPass(spool);
  return counts;
}

/**
 * The pass's checkpoint. A connection that waits off the event loop (busy_timeout 0) checkpoints
 * without waiting, so a reader or a writer in the way makes it give up at once: it is tried again
 * after short awaited pauses, for as long as a connection that waits would have waited.
 */
async function checkpointAfterPass(spool: SqliteSpool): Promise<void> {
  const until = performance.now() + CHECKPOINT_WAIT_MS;
  while (checkpoint(spool).busy && spool.line.waits && performance.now() < until) await Bun.sleep(25);
}

/** How long the checkpoint may wait for writers and readers; an hour later there is another. */
const CHECKPOINT_WAIT_MS = 2000;

/**
 * PRAGMA wal_checkpoint(TRUNCATE): copy the WAL into the database and empty it. TRUNCATE waits
 * (busy handler) for writers and old readers, and bun:sqlite waits synchronously, so the wait
 * is capped well below the connection's busy_timeout; busy = true means it gave up this time.
 */
export function checkpoint(spool: SqliteSpool): { busy: boolean; log: number; checkpointed: number } {
  const db = spool.db;
  const saved = prepared<{ timeout: number }, []>(db, "PRAGMA busy_timeout").get()?.timeout ?? 0;
  db.run(`PRAGMA busy_timeout = ${Math.min(saved, CHECKPOINT_WAIT_MS)}`);
  try {
    const r = prepared<{ busy: number; log: number; checkpointed: number }, []>(db, Q.checkpoint).get();
    return { busy: (r?.busy ?? 0) !== 0, log: r?.log ?? 0, checkpointed: r?.checkpointed ?? 0 };
  } finally {
    db.run(`PRAGMA busy_timeout = ${saved}`);
  }
}

/**
 * VACUUM, for `hookspool prune --vacuum` only: rebuilds the file, which needs about
 * twice its size free and holds the write lock throughout; then truncates the WAL it filled.
 */
export function vacuum(spool: SqliteSpool): void {
  spool.db.run("VACUUM");
  checkpoint(spool);
}

function dedupSources(db: Database): string[] {
  const out: string[] = [];
  let s = prepared<{ source: string | null }, [string]>(db, Q.nextDedupSource).get("")?.source ?? null;
  // "" sorts first among TEXT values; an empty source name cannot be enqueued (validateNewEvent).
  while (s !== null) {
    out.push(s);
    s = prepared<{ source: string | null }, [string]>(db, Q.nextDedupSource).get(s)?.source ?? null;
  }
  return out;
}

/** `step` in BEGIN IMMEDIATE transactions until one deletes nothing (inChunks), each in the line (wait.ts). */
function chunks(spool: SqliteSpool, step: () => number): Promise<void> {
  const tx = spool.db.transaction(() => {
    const n = step();
    testHook("retention.before_commit");
    return n;
  });
  return inChunks(() => spool.line.write(() => tx.immediate()));
}

/** Which of `hashes` an events row names as its body_file (the partial index answers it). */
export function namedBodies(spool: SqliteSpool, hashes: readonly string[]): Set<string> {
  const out = new Set<string>();
  if (hashes.length === 0) return out;
  const rows = spool.db
    .query(`SELECT DISTINCT body_file FROM events WHERE body_file IN (${hashes.map(() => "?").join(",")})`)
    .all(...hashes) as { body_file: string }[];
  for (const r of rows) out.add(r.body_file);
  return out;
}
