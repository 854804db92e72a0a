// Enqueue on SQLite: the join rule and dedup decision of enqueue-plan.ts applied in one BEGIN
// IMMEDIATE transaction per group commit (group.ts), each request in a SAVEPOINT; sealing (its
// content hash), a batch's content, and quarantine: a verified request whose classification
// failed kept as a dead batch for the reserved destination quarantine, with its issue.
import type { Database } from "bun:sqlite";
import { prepared, type SqliteSpool, tx } from "./db.ts";
import { journalTx } from "./journal.ts";
import { testHook } from "../../testhook.ts";
import type { CommitStep, JobOutcome } from "../group.ts";
import { JOINS_WITHOUT_SEAL_SQL, redelivery, requeuedCount, sealsOnSize, seenWithin } from "../enqueue-plan.ts";
import { contentHash, type ContentEvent } from "../content.ts";
import { raiseIssueTx, resolveDeadIssuesTx, resolveIssueTx } from "./issues.ts";
import { setMetaTx } from "./meta.ts";
import { replayDeadTx } from "./operator.ts";
import {
  eventSize,
  type Placed,
  type EventCopy,
  type EnqueueResult,
  validateNewEvent,
  quarantineIssue,
  type NewEvent,
  quarantineRecord,
  type QuarantineInput,
  rawIsPayload,
} from "../enqueue.ts";

const SEAL = `UPDATE batches SET state = 'sealed', sealed_at = $now, content_hash = $hash
  WHERE id = $id AND state = 'open'`;

/** Seal an open batch: its content freezes and content_hash is set. */
export function sealBatchTx(db: Database, batchId: number, now: number): boolean {
  const hash = computeContentHashTx(db, batchId);
  const sealed = prepared(db, SEAL).run({ id: batchId, now, hash }).changes === 1;
  if (sealed) journalTx(db, "sealed", batchId, now);
  return sealed;
}

const CONTENT = `SELECT id, event_type, received_at, dedup_id, payload, headers, trace, version, body_file FROM events
  WHERE batch_id = ? AND excluded_at IS NULL ORDER BY id`;

/**
 * The events a document carries, in events.id order (commit order), excluded ones omitted; the
 * document and the content_hash put them in their versions' order (content.ts documentOrder).
 */
export function batchContent(spool: SqliteSpool, batchId: number): ContentEvent[] {
  return batchContentTx(spool.db, batchId);
}

export function batchContentTx(db: Database, batchId: number): ContentEvent[] {
  return prepared<ContentEvent, [number]>(db, CONTENT).all(batchId);
}

export function computeContentHashTx(db: Database, batchId: number): string {
  return contentHash(batchContentTx(db, batchId));
}

const Q = {
  findDedup: "SELECT event_id, seen_at, dup_count FROM dedup WHERE source = ? AND dedup_id = ?",
  dedupTarget:
    "SELECT b.id AS batch_id, b.state, b.destination FROM events e JOIN batches b ON b.id = e.batch_id WHERE e.id = ?",
  bumpDedup: "UPDATE dedup SET dup_count = dup_count + 1 WHERE source = ? AND dedup_id = ?",
  putDedup: `INSERT INTO dedup (source, dedup_id, event_id, seen_at, dup_count)
    VALUES ($source, $dedup, $event, $now, $dups)
    ON CONFLICT (source, dedup_id) DO UPDATE
      SET event_id = excluded.event_id, seen_at = excluded.seen_at, dup_count = excluded.dup_count`,
  findOpen: "SELECT id FROM batches WHERE route = ? AND key = ? AND state = 'open'",
  // A new batch holds its first event from the start.
  openBatch: `INSERT INTO batches (route, source, destination, key, state, first_at, last_at, quiet_s, max_s,
      max_events, max_bytes, count, bytes)
    VALUES ($route, $source, $destination, $key, 'open', $now, $now, $quiet, $max, $events, $bytes, 1, $size)`,
  // Steps 1-3 in one statement: the group's open batch takes the event when no seal must come first.
  joinOpen: `UPDATE batches SET count = count + 1, bytes = bytes + $size, last_at = MAX(last_at, $now)
    WHERE route = $route AND key = $key AND state = 'open' AND ${JOINS_WITHOUT_SEAL_SQL}
    RETURNING id, count, bytes, max_events, max_bytes`,
  // $id NULL: the next rowid; else the id a fresh dedup row already names (claimDedup).
  insertEvent: `INSERT INTO events (id, source, route, batch_id, event_type, dedup_id, received_at, payload, raw,
      raw_is_payload, headers, size, trace, version, body_file)
    VALUES ($id, $source, $route, $batch, $type, $dedup, $now, $payload, $raw, $once, $headers, $size, $trace,
      $version, $bodyFile)`,
  // A dedup id never seen, in one statement: its row names the event about to be inserted, the next
  // rowid (this transaction holds the write lock, so nobody else inserts one meanwhile). A row
  // already there is left alone and returns nothing: then the lookup decides (findDedup).
  claimDedup: `INSERT INTO dedup (source, dedup_id, event_id, seen_at, dup_count)
    VALUES ($source, $dedup, COALESCE((SELECT MAX(id) FROM events), 0) + 1, $now, 0)
    ON CONFLICT (source, dedup_id) DO NOTHING
    RETURNING event_id`,
} as const;

type Joined = { id: number; count: number; bytes: number; max_events: number; max_bytes: number };

/** The query plans of an enqueue's lookups (held to their indexes by the plans test). */
export function enqueuePlans(
  spool: SqliteSpool,
): Record<"findDedup" | "claimDedup" | "joinOpen" | "findOpen", string[]> {
  const plan = (sql: string, params: Record<string, string | number>) =>
    (spool.db.query(`EXPLAIN QUERY PLAN ${sql}`).all(params as never) as { detail: string }[]).map((r) => r.detail);
  return {
    findDedup: plan(Q.findDedup.replace("?", "$s").replace("?", "$d"), { s: "s", d: "d" }),
    claimDedup: plan(Q.claimDedup, { source: "s", dedup: "d", now: 0 }),
    joinOpen: plan(Q.joinOpen, { route: "r", key: "k", size: 1, now: 0 }),
    findOpen: plan(Q.findOpen.replace("?", "$r").replace("?", "$k"), { r: "r", k: "k" }),
  };
}

/**
 * One copy of an event as the join rule places it: its size, its arrival, `once` (the raw body
 * is the payload byte for byte, so the row keeps it once: rawIsPayload, decided once per event)
 * and its headers as JSON (made once per event).
 */
interface CopyAt {
  copy: EventCopy;
  size: number;
  now: number;
  once: boolean;
  headers: string;
}

/** The join rule for one copy, in the five numbered steps below. */
function placeCopy(db: Database, ev: NewEvent, at: CopyAt, id: number | null): Placed {
  const { copy, size, now, once } = at;
  // 1. the open batch of the group (at most one; the schema enforces it) takes the event, in
  // one statement, unless 2. it must be sealed first to keep max_bytes a true bound.
  let after = prepared<Joined, Record<string, string | number>>(db, Q.joinOpen).get({
    route: copy.route,
    key: ev.key,
    size,
    now,
  });
  if (!after) {
    // 2. pre-join seal: an open batch that did not take the event is one it would push past max_bytes
    const open = prepared<{ id: number }, [string, string]>(db, Q.findOpen).get(copy.route, ev.key);
    if (open) sealBatchTx(db, open.id, now);
    // 4. a new batch with the route's window copied in, holding this event
    const { window } = copy;
    const id = Number(
      prepared(db, Q.openBatch).run({
        route: copy.route,
        source: ev.source,
        destination: copy.destination,
        key: ev.key,
        now,
        quiet: window.quiet_s,
        max: window.max_s,
        events: window.max_events,
        bytes: window.max_bytes,
        size,
      }).lastInsertRowid,
    );
    after = { id, count: 1, bytes: size, max_events: window.max_events, max_bytes: window.max_bytes };
  }
  const batchId = after.id;
  // 3. append the event
  const eventId = Number(
    prepared(db, Q.insertEvent).run({
      id,
      source: ev.source,
      route: copy.route,
      batch: batchId,
      type: ev.eventType,
      dedup: ev.dedupId,
      now,
      payload: ev.payload,
      ...(once ? { raw: null, once: 1 } : { raw: ev.raw, once: 0 }),
      headers: at.headers,
      size,
      trace: copy.trace === undefined ? null : JSON.stringify(copy.trace),
      version: ev.version ?? null,
      bodyFile: ev.body?.sha256 ?? null,
    }).lastInsertRowid,
  );
  journalTx(db, "event", batchId, now, { event: eventId, detail: { type: ev.eventType, route: copy.route } });
  // 5. seal on size in the same transaction, so the bound holds with the dispatcher down
  let sealed = false;
  if (sealsOnSize(after)) sealed = sealBatchTx(db, batchId, now);
  return { eventId, batchId, route: copy.route, destination: copy.destination, tee: copy.tee, sealed };
}

/**
 * Enqueue inside the caller's transaction (script emits, reclassify, group commit). A new event
 * refreshes meta's last_enqueue_at and its source's last_event_at; a caller that enqueues many
 * in one transaction passes `fresh: false` and writes them once (writeFreshnessTx).
 */
export function enqueueTx(db: Database, ev: NewEvent, now: number, fresh = true): EnqueueResult {
  validateNewEvent(ev);
  let dupCount = 0;
  let requeued = false;
  // The first copy's event id when a fresh dedup row already names it (no upsert after, then).
  let claimed: number | null = null;
  if (ev.dedupId !== null)
    claimed =
      prepared<{ event_id: number }, Record<string, string | number>>(db, Q.claimDedup).get({
        source: ev.source,
        dedup: ev.dedupId,
        now,
      })?.event_id ?? null;
  if (ev.dedupId !== null && claimed === null) {
    const seen = prepared<{ event_id: number; seen_at: number; dup_count: number }, [string, string]>(
      db,
      Q.findDedup,
    ).get(ev.source, ev.dedupId);
    if (seenWithin(seen, ev.dedupWindowS, now)) {
      const target = prepared<{ batch_id: number; state: string; destination: string }, [number]>(
        db,
        Q.dedupTarget,
      ).get(seen.event_id);
      const does = redelivery(target?.state);
      if (does === "replay" && target && replayDeadTx(db, target.batch_id, now)) {
        prepared(db, Q.bumpDedup).run(ev.source, ev.dedupId);
        resolveDeadIssuesTx(db, target.destination, now);
        return { status: "replayed", eventId: seen.event_id, batchId: target.batch_id };
      }
      if (does !== "requeue") {
        prepared(db, Q.bumpDedup).run(ev.source, ev.dedupId);
        return { status: "duplicate", eventId: seen.event_id };
      }
      dupCount = requeuedCount(seen);
      requeued = true;
    }
  }
  // Only a new event is news: a duplicate (or a redelivery that replays a dead batch) changes
  // nothing else, so it neither refreshes the last enqueue nor the source's liveness.
  if (fresh) writeFreshnessTx(db, now, new Map([[ev.source, now]]));
  const headers = JSON.stringify(ev.headers);
  const size = eventSize(ev, now, headers);
  const placed: Placed[] = [];
  const once = rawIsPayload(ev);
  ev.copies.forEach((copy, i) => {
    placed.push(placeCopy(db, ev, { copy, size, now, once, headers }, i === 0 ? claimed : null));
    testHook(`enqueue.after_copy.${i}`);
  });
  if (claimed !== null && placed[0].eventId !== claimed)
    throw new Error(`enqueue: the dedup row names event ${claimed}, the event went in as ${placed[0].eventId}`);
  if (ev.dedupId !== null && claimed === null) {
    prepared(db, Q.putDedup).run({
      source: ev.source,
      dedup: ev.dedupId,
      event: placed[0].eventId,
      now,
      dups: dupCount,
    });
  }
  return requeued ? { status: "queued", placed, requeued } : { status: "queued", placed };
}

/** What new events refresh: meta's last_enqueue_at (`last`) and each source's last_event_at. */
export function writeFreshnessTx(db: Database, last: number, sources: ReadonlyMap<string, number>): void {
  setMetaTx(db, "last_enqueue_at", last);
  for (const [source, at] of sources) setMetaTx(db, `source:${source}:last_event_at`, at);
}

/** Enqueue one event with every copy in one BEGIN IMMEDIATE transaction. */
export function enqueue(spool: SqliteSpool, ev: NewEvent, now: number = spool.clock.now()): EnqueueResult {
  return tx(spool.db).immediate(() => {
    const r = enqueueTx(spool.db, ev, now);
    testHook("enqueue.before_commit");
    return r;
  });
}

const QUARANTINE_BATCH = `INSERT
  INTO batches (route, source, destination, key, state, first_at, last_at, quiet_s, max_s,
    max_events, max_bytes, count, bytes, sealed_at, last_class, last_error, dead_reason)
  VALUES ($source, $source, 'quarantine', 'quarantine', 'dead', $now, $now, 0, 0, 1, $bytes, 1, $size, $now,
    'quarantine', $error, 'quarantined')`;

const QUARANTINE_EVENT = `INSERT
  INTO events (source, route, batch_id, event_type, dedup_id, received_at, payload, raw, headers, size, url, trace)
  VALUES ($source, $source, $batch, '', NULL, $now, NULL, $raw, $headers, $size, $url, $trace)`;

export function quarantine(
  spool: SqliteSpool,
  q: QuarantineInput,
  now: number = spool.clock.now(),
): { eventId: number; batchId: number; reason: string } {
  const { reason, headers } = quarantineRecord(q);
  const issue = quarantineIssue(q.source, reason);
  return spool.db
    .transaction(() => {
      const db = spool.db;
      setMetaTx(db, "last_enqueue_at", now);
      const size = q.raw.length;
      const batchId = Number(
        prepared(db, QUARANTINE_BATCH).run({ source: q.source, now, bytes: Math.max(1, size), size, error: reason })
          .lastInsertRowid,
      );
      const eventId = Number(
        prepared(db, QUARANTINE_EVENT).run({
          source: q.source,
          batch: batchId,
          now,
          raw: q.raw,
          headers: JSON.stringify(headers),
          size,
          url: q.url,
          trace: JSON.stringify({ stage: "quarantined", reason }),
        }).lastInsertRowid,
      );
      prepared(db, "UPDATE batches SET content_hash = ? WHERE id = ?").run(
        contentHash(batchContentTx(db, batchId)),
        batchId,
      );
      // What watch shows: a request came, and its batch is dead at once, quarantined.
      journalTx(db, "event", batchId, now, { event: eventId, detail: { quarantined: reason } });
      journalTx(db, "dead", batchId, now, { detail: { reason: "quarantined" } });
      raiseIssueTx(db, { ...issue, route: q.source, batchId, error: `quarantined: ${reason}`, now });
      testHook("quarantine.before_commit");
      return { eventId, batchId, reason };
    })
    .immediate();
}

const QUARANTINED_LEFT =
  "SELECT last_error FROM batches WHERE destination = 'quarantine' AND state = 'dead' AND source = ?";

/** Resolve a source's quarantine issues that no dead quarantine batch keeps open any more. */
export function resolveQuarantineIssuesTx(db: Database, source: string, now: number): void {
  const left = prepared<{ last_error: string | null }, [string]>(db, QUARANTINED_LEFT).all(source);
  const open = new Set(left.map((b) => quarantineIssue(source, b.last_error ?? "").fingerprint));
  for (const reason of ["bad_payload", "plugin_error:Error"]) {
    const { fingerprint } = quarantineIssue(source, reason);
    if (!open.has(fingerprint)) resolveIssueTx(db, fingerprint, now);
  }
}

/**
 * The group commit's step on SQLite: one BEGIN IMMEDIATE ... COMMIT over the group, each job in
 * a SAVEPOINT of its own (rolled back alone when its enqueue throws), each at its arrival's now.
 * A lone job needs no savepoint: the transaction is its own, and its failure rolls it back. The
 * meta rows new events refresh are written once, after the last job.
 */
export function sqliteCommitStep(spool: SqliteSpool): (group: Parameters<CommitStep>[0]) => JobOutcome[] {
  return (group) => {
    const db = spool.db;
    const t = tx(db);
    return t.immediate(() => {
      let last: number | null = null;
      const sources = new Map<string, number>();
      const out = group.map((job): JobOutcome => {
        const run = () => job.evs.map((ev) => enqueueTx(db, ev, job.now, false));
        let o: JobOutcome;
        if (group.length === 1) o = { ok: run() };
        else {
          try {
            // Nested: a SAVEPOINT, rolled back alone when this event's enqueue throws.
            o = { ok: t.nested(run) };
          } catch (error) {
            // A full disk or an I/O error ends the whole transaction, not just this savepoint:
            // then nothing of the group may commit, and every request in it is refused.
            if (!db.inTransaction) throw error;
            o = { error };
          }
        }
        if ("ok" in o)
          o.ok.forEach((r, i) => {
            if (r.status !== "queued") return;
            last = job.now;
            sources.set(job.evs[i].source, job.now);
          });
        // Outside the savepoint: a failure here undoes the whole group, and none is acked.
        testHook("enqueue.after_savepoint");
        return o;
      });
      if (last !== null) writeFreshnessTx(db, last, sources);
      testHook("enqueue.before_commit");
      return out;
    });
  };
}
