// Enqueue: dedup, the join rule for every copy, and quarantine, each in one BEGIN IMMEDIATE
// transaction so a 2xx always follows the COMMIT that holds the event.
import type { Database } from "bun:sqlite";
import { HookspoolError } from "../errors.ts";
import { testHook } from "../testhook.ts";
import { journalTx } from "./journal.ts";
import { batchContentTx, contentHash, documentShare, jsonText, META_LIMITS, WIDEST_ID } from "./content.ts";
import { prepared, type Spool } from "./db.ts";
import { raiseIssueTx, resolveDeadIssuesTx, resolveIssueTx } from "./issues.ts";
import { setMetaTx } from "./meta.ts";
import { replayDeadTx, sealBatchTx } from "./batches.ts";

/** The window a batch opens with. */
export interface BatchWindow {
  quiet_s: number;
  max_s: number;
  max_events: number;
  max_bytes: number;
}

/** One place the event goes: the primary copy first, then tee copies. */
export interface EventCopy {
  route: string;
  destination: string;
  tee: boolean;
  window: BatchWindow;
  /** Why the copy went here (config's routing trace), stored as JSON in events.trace. */
  trace?: unknown;
}

export interface NewEvent {
  source: string;
  key: string;
  eventType: string;
  dedupId: string | null;
  /** JSON text: what the destination receives, stored byte for byte. */
  payload: string;
  /** The original body, or null when the source does not store raw bodies. */
  raw: Uint8Array | null;
  /** The keep_headers of the source only. */
  headers: Record<string, string>;
  copies: EventCopy[];
  dedupWindowS: number;
  /**
   * The payload text came out of JSON.parse or JSON.stringify in this process (the intake's
   * classify), so it is JSON: the store does not parse it again. Every other caller leaves it unset.
   */
  payloadParsed?: true;
}

export interface Placed {
  eventId: number;
  batchId: number;
  route: string;
  destination: string;
  tee: boolean;
  /** The batch sealed in this transaction (size limit). */
  sealed: boolean;
}

export type EnqueueResult =
  /** requeued: the id was seen before, but its batch was dropped; the sender gets 200 queued. */
  | { status: "queued"; placed: Placed[]; requeued?: boolean }
  | { status: "duplicate"; eventId: number }
  | { status: "replayed"; eventId: number; batchId: number };

/** Keys are opaque strings of at most 512 bytes. */
export const MAX_KEY_BYTES = 512;
/** The primary copy plus at most 8 tees. */
export const MAX_COPIES = 9;

const utf8 = new TextEncoder();

/**
 * Why an event's meta (its type, dedup id or a kept header, as event_meta carries them) is too
 * large to deliver, or null: each has a bound, so check can bound what a batch document holds.
 */
export function eventMetaProblem(ev: Pick<NewEvent, "eventType" | "dedupId" | "headers">): string | null {
  const json = (v: unknown) => Buffer.byteLength(JSON.stringify(v), "utf8");
  if (json(ev.eventType) > META_LIMITS.eventType) return `the event type is over ${META_LIMITS.eventType} bytes`;
  if (ev.dedupId !== null && json(ev.dedupId) > META_LIMITS.dedupId) return `the dedup id is over ${META_LIMITS.dedupId} bytes`;
  for (const [name, value] of Object.entries(ev.headers)) {
    if (json(name) + 1 + json(value) > META_LIMITS.keptHeader) return `the kept header ${name.slice(0, 64)} is over ${META_LIMITS.keptHeader} bytes`;
  }
  return null;
}

/** The checks every enqueue path shares: intake, `hookspool enqueue`, script emits, reclassify. */
export function validateNewEvent(ev: NewEvent): void {
  const bad = (what: string, hint?: string) => new HookspoolError("E_INPUT", what, { hint });
  if (!ev.source) throw bad("the source is empty");
  const keyBytes = utf8.encode(ev.key).length;
  if (keyBytes === 0) throw bad("the coalesce key is empty");
  if (keyBytes > MAX_KEY_BYTES) throw bad(`the coalesce key is ${keyBytes} bytes; at most ${MAX_KEY_BYTES}`);
  if (ev.copies.length === 0) throw bad("the event has no destination");
  if (ev.copies.length > MAX_COPIES) throw bad(`the event has ${ev.copies.length - 1} tee copies; at most ${MAX_COPIES - 1}`);
  if (ev.copies[0].tee || ev.copies.slice(1).some((c) => !c.tee)) throw bad("the primary copy must come first, then tees");
  const seen = new Set<string>();
  for (const c of ev.copies) {
    if (c.destination === "quarantine") throw bad("quarantine is reserved and never delivers");
    if (seen.has(c.destination)) throw bad(`two copies of one event to ${c.destination}`);
    seen.add(c.destination);
    if (!(c.window.max_events >= 1 && c.window.max_bytes >= 1)) throw bad("a window needs max_events and max_bytes >= 1");
  }
  const metaProblem = eventMetaProblem(ev);
  if (metaProblem) throw bad(metaProblem);
  if (ev.payloadParsed) return;
  try {
    JSON.parse(jsonText(ev.payload));
  } catch {
    throw bad("the payload is not valid JSON");
  }
}

const Q = {
  findDedup: "SELECT event_id, seen_at, dup_count FROM dedup WHERE source = ? AND dedup_id = ?",
  dedupTarget: "SELECT b.id AS batch_id, b.state, b.destination FROM events e JOIN batches b ON b.id = e.batch_id WHERE e.id = ?",
  bumpDedup: "UPDATE dedup SET dup_count = dup_count + 1 WHERE source = ? AND dedup_id = ?",
  putDedup: `INSERT INTO dedup (source, dedup_id, event_id, seen_at, dup_count) VALUES ($source, $dedup, $event, $now, $dups)
    ON CONFLICT (source, dedup_id) DO UPDATE SET event_id = excluded.event_id, seen_at = excluded.seen_at, dup_count = excluded.dup_count`,
  findOpen: "SELECT id, count, bytes, max_bytes FROM batches WHERE route = ? AND key = ? AND state = 'open'",
  openBatch: `INSERT INTO batches (route, source, destination, key, state, first_at, last_at, quiet_s, max_s, max_events, max_bytes)
    VALUES ($route, $source, $destination, $key, 'open', $now, $now, $quiet, $max, $events, $bytes)`,
  joinBatch: `UPDATE batches SET count = count + 1, bytes = bytes + $size, last_at = MAX(last_at, $now)
    WHERE id = $id RETURNING count, bytes, max_events, max_bytes`,
  insertEvent: `INSERT INTO events (source, route, batch_id, event_type, dedup_id, received_at, payload, raw, headers, size, trace)
    VALUES ($source, $route, $batch, $type, $dedup, $now, $payload, $raw, $headers, $size, $trace)`,
} as const;

/** An event's size: its exact share of a batch document (content.ts), its id counted at its widest. */
export function eventSize(ev: NewEvent, now: number): number {
  return documentShare({ id: WIDEST_ID, event_type: ev.eventType, received_at: now, dedup_id: ev.dedupId, headers: JSON.stringify(ev.headers), payload: ev.payload });
}

/** The join rule for one copy, in the five numbered steps below. */
function placeCopy(db: Database, ev: NewEvent, copy: EventCopy, size: number, now: number): Placed {
  // 1. the open batch of the group (at most one; the schema enforces it)
  let open = prepared<{ id: number; count: number; bytes: number; max_bytes: number }, [string, string]>(db, Q.findOpen).get(copy.route, ev.key);
  // 2. pre-join seal: keep max_bytes a true bound
  if (open && open.bytes + size > open.max_bytes && open.count >= 1) {
    sealBatchTx(db, open.id, now);
    open = null;
  }
  // 4. else open a new batch with the route's window copied in
  const batchId = open
    ? open.id
    : Number(
        prepared(db, Q.openBatch).run({
          route: copy.route,
          source: ev.source,
          destination: copy.destination,
          key: ev.key,
          now,
          quiet: copy.window.quiet_s,
          max: copy.window.max_s,
          events: copy.window.max_events,
          bytes: copy.window.max_bytes,
        }).lastInsertRowid,
      );
  // 3. append the event
  const eventId = Number(
    prepared(db, Q.insertEvent).run({
      source: ev.source,
      route: copy.route,
      batch: batchId,
      type: ev.eventType,
      dedup: ev.dedupId,
      now,
      payload: ev.payload,
      raw: ev.raw,
      headers: JSON.stringify(ev.headers),
      size,
      trace: copy.trace === undefined ? null : JSON.stringify(copy.trace),
    }).lastInsertRowid,
  );
  const after = prepared<{ count: number; bytes: number; max_events: number; max_bytes: number }, Record<string, number>>(db, Q.joinBatch).get({ id: batchId, size, now });
  journalTx(db, "event", batchId, now, { event: eventId, detail: { type: ev.eventType, route: copy.route } });
  // 5. seal on size in the same transaction, so the bound holds with the dispatcher down
  let sealed = false;
  if (after && (after.count >= after.max_events || after.bytes >= after.max_bytes)) sealed = sealBatchTx(db, batchId, now);
  return { eventId, batchId, route: copy.route, destination: copy.destination, tee: copy.tee, sealed };
}

/** Enqueue inside the caller's transaction (script emits, reclassify, group commit). */
export function enqueueTx(db: Database, ev: NewEvent, now: number): EnqueueResult {
  validateNewEvent(ev);
  let dupCount = 0;
  let requeued = false;
  if (ev.dedupId !== null) {
    const seen = prepared<{ event_id: number; seen_at: number; dup_count: number }, [string, string]>(db, Q.findDedup).get(ev.source, ev.dedupId);
    if (seen && now - seen.seen_at < ev.dedupWindowS) {
      const target = prepared<{ batch_id: number; state: string; destination: string }, [number]>(db, Q.dedupTarget).get(seen.event_id);
      if (target?.state === "dead" && replayDeadTx(db, target.batch_id, now)) {
        // A redelivery of a dead batch's event is the operator asking for a retry.
        prepared(db, Q.bumpDedup).run(ev.source, ev.dedupId);
        resolveDeadIssuesTx(db, target.destination, now);
        return { status: "replayed", eventId: seen.event_id, batchId: target.batch_id };
      }
      if (target?.state !== "dropped") {
        prepared(db, Q.bumpDedup).run(ev.source, ev.dedupId);
        return { status: "duplicate", eventId: seen.event_id };
      }
      // dropped: the operator discarded it; enqueue anew and re-point the row.
      dupCount = seen.dup_count + 1;
      requeued = true;
    }
  }
  // Only a new event is news: a duplicate (or a redelivery that replays a dead batch) changes
  // nothing else, so it neither refreshes the last enqueue nor the source's liveness.
  setMetaTx(db, "last_enqueue_at", now);
  setMetaTx(db, `source:${ev.source}:last_event_at`, now);
  const size = eventSize(ev, now);
  const placed: Placed[] = [];
  ev.copies.forEach((copy, i) => {
    placed.push(placeCopy(db, ev, copy, size, now));
    testHook(`enqueue.after_copy.${i}`);
  });
  if (ev.dedupId !== null) {
    prepared(db, Q.putDedup).run({ source: ev.source, dedup: ev.dedupId, event: placed[0].eventId, now, dups: dupCount });
  }
  return requeued ? { status: "queued", placed, requeued } : { status: "queued", placed };
}

/** Enqueue one event with every copy in one BEGIN IMMEDIATE transaction. */
export function enqueue(spool: Spool, ev: NewEvent, now: number = spool.clock.now()): EnqueueResult {
  return spool.db
    .transaction(() => {
      const r = enqueueTx(spool.db, ev, now);
      testHook("enqueue.before_commit");
      return r;
    })
    .immediate();
}

export interface QuarantineInput {
  source: string;
  raw: Uint8Array;
  /** The headers the source lets a quarantined request keep (its allowlist). */
  headers: Record<string, string>;
  /** The source's auth_headers (signature, token, authorization): never stored. */
  authHeaders: readonly string[];
  /** Path and query string with every secret-bearing parameter removed, for the replay. */
  url: string | null;
  /**
   * Why it was quarantined, a short fixed phrase: the sender's fault (not_json, not_utf8,
   * key_missing, key_too_long, meta_too_long, bad_payload), or ours to fix (no_destination, plugin_error:<Class>).
   */
  reason: string;
}

/** The sender's faults: their quarantines are filed under the source, not as a config problem. */
export const SENDER_FAULTS: ReadonlySet<string> = new Set(["not_json", "not_utf8", "key_missing", "key_too_long", "meta_too_long", "bad_payload"]);

/** The issue a quarantine with this reason opens (and which its replay or drop resolves). */
export function quarantineIssue(source: string, reason: string): { fingerprint: string; kind: "source" | "config" } {
  return SENDER_FAULTS.has(reason) ? { fingerprint: `source:quarantine:${source}`, kind: "source" } : { fingerprint: `config:plugin:${source}`, kind: "config" };
}

/** Credentials no plugin needs to classify a request again; never stored whatever the source says. */
const ALWAYS_SECRET_HEADERS = ["authorization", "proxy-authorization", "cookie"];

const QUARANTINE_BATCH = `INSERT INTO batches (route, source, destination, key, state, first_at, last_at, quiet_s, max_s,
    max_events, max_bytes, count, bytes, sealed_at, last_class, last_error, dead_reason)
  VALUES ($source, $source, 'quarantine', 'quarantine', 'dead', $now, $now, 0, 0, 1, $bytes, 1, $size, $now, 'quarantine', $error, 'quarantined')`;
const QUARANTINE_EVENT = `INSERT INTO events (source, route, batch_id, event_type, dedup_id, received_at, payload, raw, headers, size, url, trace)
  VALUES ($source, $source, $batch, '', NULL, $now, NULL, $raw, $headers, $size, $url, $trace)`;

/** A reason as stored: one of the fixed phrases, or plugin_error with a plausible class name. */
function storedReason(reason: string): string {
  if (SENDER_FAULTS.has(reason) || reason === "no_destination") return reason;
  return /^plugin_error:[A-Za-z_$][\w$.]{0,63}$/.test(reason) ? reason : "plugin_error:Error";
}

/**
 * Keep a verified request whose classification failed: a dead batch for the reserved
 * destination quarantine holding the raw body, the allowed headers and the URL, and the issue
 * for its reason (source:quarantine:<source> for the sender's fault, config:plugin:<source>
 * for ours).
 */
/** What a quarantine keeps, on either backend: the reason as stored, and the headers minus every credential. */
export function quarantineRecord(q: QuarantineInput): { reason: string; headers: Record<string, string> } {
  const auth = new Set([...ALWAYS_SECRET_HEADERS, ...q.authHeaders.map((h) => h.toLowerCase())]);
  return { reason: storedReason(q.reason), headers: Object.fromEntries(Object.entries(q.headers).filter(([name]) => !auth.has(name.toLowerCase()))) };
}

export function quarantine(spool: Spool, q: QuarantineInput, now: number = spool.clock.now()): { eventId: number; batchId: number; reason: string } {
  const { reason, headers } = quarantineRecord(q);
  const issue = quarantineIssue(q.source, reason);
  return spool.db
    .transaction(() => {
      const db = spool.db;
      setMetaTx(db, "last_enqueue_at", now);
      const size = q.raw.length;
      const batchId = Number(prepared(db, QUARANTINE_BATCH).run({ source: q.source, now, bytes: Math.max(1, size), size, error: reason }).lastInsertRowid);
      const eventId = Number(
        prepared(db, QUARANTINE_EVENT).run({ source: q.source, batch: batchId, now, raw: q.raw, headers: JSON.stringify(headers), size, url: q.url, trace: JSON.stringify({ stage: "quarantined", reason }) }).lastInsertRowid,
      );
      prepared(db, "UPDATE batches SET content_hash = ? WHERE id = ?").run(contentHash(batchContentTx(db, batchId)), batchId);
      // What watch shows: a request came, and its batch is dead at once, quarantined.
      journalTx(db, "event", batchId, now, { event: eventId, detail: { quarantined: reason } });
      journalTx(db, "dead", batchId, now, { detail: { reason: "quarantined" } });
      raiseIssueTx(db, { ...issue, route: q.source, batchId, error: `quarantined: ${reason}`, now });
      testHook("quarantine.before_commit");
      return { eventId, batchId, reason };
    })
    .immediate();
}

const QUARANTINED_LEFT = "SELECT last_error FROM batches WHERE destination = 'quarantine' AND state = 'dead' AND source = ?";

/** Resolve a source's quarantine issues that no dead quarantine batch keeps open any more. */
export function resolveQuarantineIssuesTx(db: Database, source: string, now: number): void {
  const left = prepared<{ last_error: string | null }, [string]>(db, QUARANTINED_LEFT).all(source);
  const open = new Set(left.map((b) => quarantineIssue(source, b.last_error ?? "").fingerprint));
  for (const reason of ["bad_payload", "plugin_error:Error"]) {
    const { fingerprint } = quarantineIssue(source, reason);
    if (!open.has(fingerprint)) resolveIssueTx(db, fingerprint, now);
  }
}
