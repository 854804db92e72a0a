// Enqueue on PostgreSQL: the join rule and dedup decision of enqueue-plan.ts, safe with any
// number of intakes on different hosts. A group commit (group.ts) is one transaction for the
// requests gathered while the previous commit ran; each request runs in a savepoint of its own.
// Before any work it takes, in one sorted order, the transaction-scoped advisory locks of every
// (route, key) group and every (source, dedup id) its requests touch, so two intakes never
// deadlock, never both open a batch for one group (the partial unique index makes that a fact
// too), and never both accept one dedup id. The locks end with the COMMIT. Quarantine: a
// verified request whose classification failed is kept as a dead batch for the reserved
// destination quarantine, with its issue, in one transaction, as on SQLite.
import { HookspoolError } from "../../errors.ts";
import { contentHash, type ContentEvent } from "../content.ts";
import {
  type EnqueueResult,
  type EventCopy,
  eventSize,
  type NewEvent,
  type Placed,
  validateNewEvent,
  type QuarantineInput,
  quarantineIssue,
  quarantineRecord,
  rawIsPayload,
} from "../enqueue.ts";
import { num, type PgSpool, type Tx } from "./db.ts";
import { journalPg } from "./journal.ts";
import { notifyWork } from "./wakeups.ts";
import { testHook } from "../../testhook.ts";
import type { CommitStep, JobOutcome } from "../group.ts";
import {
  readyAfterJoin,
  redelivery,
  requeuedCount,
  sealsBeforeJoin,
  sealsOnSize,
  seenWithin,
} from "../enqueue-plan.ts";
import { advanceMetaTimesPg } from "./meta.ts";
import { raiseIssuePg } from "./issues.ts";
import { contentOfBatchesPg, enqueueSetPg } from "./enqueue-set.ts";

export { contentOfBatchesPg };

/** The lock names of a set of requests: "g" + route + key per copy, "d" + source + dedup id. */
function lockNames(jobs: readonly (readonly NewEvent[])[]): { a: string[]; b: string[] } {
  const seen = new Set<string>();
  const a: string[] = [];
  const b: string[] = [];
  const add = (x: string, y: string) => {
    const k = `${x}\u0001${y}`;
    if (seen.has(k)) return;
    seen.add(k);
    a.push(x);
    b.push(y);
  };
  for (const evs of jobs)
    for (const ev of evs) {
      for (const c of ev.copies) add(`g${c.route}`, ev.key);
      if (ev.dedupId !== null) add(`d${ev.source}`, ev.dedupId);
    }
  return { a, b };
}

/** Every lock of the transaction, taken in the order of their hashes (the same order in every intake). */
export async function lockAll(tx: Tx, names: { a: string[]; b: string[] }): Promise<void> {
  if (names.a.length === 0) return;
  await tx`SELECT pg_advisory_xact_lock(s.h1, s.h2) FROM (
      SELECT hashtext(x.a) AS h1, hashtext(x.b) AS h2 FROM unnest(${names.a}::text[], ${names.b}::text[]) AS x(a, b)
      ORDER BY 1, 2 OFFSET 0) s`;
}

/** Seal an open batch in the transaction: its content freezes, content_hash computed as on SQLite. */
/** The content of a batch as its hash covers it (excluded events left out), in id order. */
export async function batchContentPg(tx: Tx, batchId: number): Promise<ContentEvent[]> {
  return (await contentOfBatchesPg(tx, [batchId])).get(batchId) ?? [];
}

export async function sealBatchPg(tx: Tx, batchId: number, now: number): Promise<boolean> {
  const hash = contentHash(await batchContentPg(tx, batchId));
  const done = await tx`UPDATE batches SET state = 'sealed', sealed_at = ${now}, content_hash = ${hash}
      WHERE id = ${batchId}::bigint AND state = 'open'`;
  if (done.count !== 1) return false;
  await journalPg(tx, "sealed", batchId, now);
  return true;
}

/** What a transaction's enqueues leave for its end: the sources that got news, the earliest readiness. */
interface Acc {
  touched: Set<string>;
  readyAt: number;
}

const newAcc = (): Acc => ({ touched: new Set(), readyAt: Number.POSITIVE_INFINITY });

/** One copy's join rule; `once`: the raw body is the payload byte for byte (rawIsPayload, once per event). */
async function placeCopy(
  tx: Tx,
  ev: NewEvent,
  copy: EventCopy,
  size: number,
  now: number,
  acc: Acc,
  once: boolean,
  id: number | null,
): Promise<Placed> {
  // 1. the open batch of the group (the group's lock is held: nobody else can open or seal it)
  let [open] = (await tx`SELECT id, count, bytes, max_bytes FROM batches WHERE route = ${copy.route} AND key = ${ev.key}
      AND state = 'open'`) as {
    id: string;
    count: number;
    bytes: string;
    max_bytes: string;
  }[];
  // 2. pre-join seal: keep max_bytes a true bound
  if (open && sealsBeforeJoin({ count: open.count, bytes: num(open.bytes), max_bytes: num(open.max_bytes) }, size)) {
    await sealBatchPg(tx, num(open.id), now);
    open = undefined as unknown as typeof open;
  }
  let batchId: number;
  if (open) batchId = num(open.id);
  else {
    // 4. open a new batch. Its first_at is never before an unfinished batch of its group, so FIFO
    // by first_at holds even when this intake's clock is behind another's (the lock orders them).
    const w = copy.window;
    const [row] = await tx`INSERT
        INTO batches (route, source, destination, key, state, first_at, last_at, quiet_s, max_s, max_events, max_bytes)
        SELECT ${copy.route}, ${ev.source}, ${copy.destination}, ${ev.key}, 'open', t.at, t.at, ${w.quiet_s},
          ${w.max_s}, ${w.max_events}, ${w.max_bytes}
          FROM (SELECT GREATEST(${now}::float8, COALESCE(MAX(first_at), 0)) AS at FROM batches
                 WHERE route = ${copy.route} AND key = ${ev.key}
                   AND state IN ('open', 'sealed', 'retry', 'leased', 'awaiting')) t
        RETURNING id`;
    batchId = num(row.id);
  }
  // 3. append the event
  // A raw body that is the payload byte for byte is stored once.
  // id null: the identity's next value (events_id_seq, the sequence its identity column made; named,
  // not looked up per insert); else the id a fresh dedup row already names (enqueueOne).
  const [e] = await tx`INSERT INTO events (id, source, route, batch_id, event_type, dedup_id, received_at, payload,
        raw, raw_is_payload, headers, size, trace, version, body_file)
      VALUES (COALESCE(${id}::bigint, nextval('events_id_seq')), ${ev.source}, ${copy.route},
        ${batchId}, ${ev.eventType}, ${ev.dedupId}, ${now}, ${ev.payload},
        ${once ? null : ev.raw}, ${once ? 1 : 0}, ${JSON.stringify(ev.headers)}, ${size},
          ${copy.trace === undefined ? null : JSON.stringify(copy.trace)}, ${ev.version ?? null}::float8,
          ${ev.body?.sha256 ?? null})
      RETURNING id`;
  const eventId = num(e.id);
  const [after] =
    await tx`UPDATE batches SET count = count + 1, bytes = bytes + ${size}, last_at = GREATEST(last_at, ${now})
      WHERE id = ${batchId}::bigint RETURNING count, bytes, max_events, max_bytes, first_at, last_at, quiet_s, max_s`;
  await journalPg(tx, "event", batchId, now, { event: eventId, detail: { type: ev.eventType, route: copy.route } });
  // 5. seal on size in the same transaction
  let sealed = false;
  if (
    sealsOnSize({
      count: after.count,
      bytes: num(after.bytes),
      max_events: after.max_events,
      max_bytes: num(after.max_bytes),
    })
  )
    sealed = await sealBatchPg(tx, batchId, now);
  const window = {
    first_at: Number(after.first_at),
    last_at: Number(after.last_at),
    quiet_s: Number(after.quiet_s),
    max_s: Number(after.max_s),
  };
  acc.readyAt = Math.min(acc.readyAt, readyAfterJoin(window, sealed, now));
  return { eventId, batchId, route: copy.route, destination: copy.destination, tee: copy.tee, sealed };
}

/** The checks every enqueue makes, and the one PostgreSQL adds: no NUL in a stored name or id. */
function checkStorable(ev: NewEvent): void {
  validateNewEvent(ev);
  const nul = [
    ev.source,
    ev.key,
    ev.eventType,
    ev.dedupId ?? "",
    ...ev.copies.flatMap((c) => [c.route, c.destination]),
  ].some((v) => v.includes("\u0000"));
  if (nul)
    throw new HookspoolError(
      "E_INPUT",
      "a key, event type, dedup id or name holds a NUL character, which the PostgreSQL spool cannot store",
    );
}

/** One event inside the caller's transaction, its locks already held. */
async function enqueueOne(tx: Tx, ev: NewEvent, now: number, acc: Acc): Promise<EnqueueResult> {
  validateNewEvent(ev);
  let dupCount = 0;
  let requeued = false;
  // A dedup id never seen, in one statement: its row names the first copy's event by the identity's
  // next value (the id's lock is held). A row already there returns nothing, and takes no value
  // from the sequence (the SELECT's list is not evaluated): the lookup decides.
  let claimed: number | null = null;
  if (ev.dedupId !== null) {
    const [fresh] = await tx`INSERT INTO dedup (source, dedup_id, event_id, seen_at, dup_count)
        SELECT ${ev.source}, ${ev.dedupId}, nextval('events_id_seq'), ${now}, 0
          WHERE NOT EXISTS (SELECT 1 FROM dedup WHERE source = ${ev.source} AND dedup_id = ${ev.dedupId})
        ON CONFLICT (source, dedup_id) DO NOTHING
        RETURNING event_id`;
    claimed = fresh ? num(fresh.event_id) : null;
  }
  if (ev.dedupId !== null && claimed === null) {
    const [seen] = (await tx`SELECT event_id, seen_at, dup_count FROM dedup WHERE source = ${ev.source}
        AND dedup_id = ${ev.dedupId}`) as {
      event_id: string;
      seen_at: number;
      dup_count: number;
    }[];
    if (seenWithin(seen, ev.dedupWindowS, now)) {
      const [target] =
        (await tx`SELECT b.id AS batch_id, b.state, b.destination FROM events e JOIN batches b ON b.id = e.batch_id
          WHERE e.id = ${num(seen.event_id)}::bigint`) as {
          batch_id: string;
          state: string;
          destination: string;
        }[];
      const does = redelivery(target?.state);
      if (does === "replay" && target) {
        const replayed = await tx`UPDATE batches
            SET state = 'retry', attempts = 0, next_attempt_at = ${now}, not_before = ${now}, dead_reason = NULL,
              stale_floor = NULL, floor_at = NULL
            WHERE id = ${num(target.batch_id)}::bigint AND state = 'dead' AND destination <> 'quarantine'`;
        if (replayed.count === 1) {
          await journalPg(tx, "retry", num(target.batch_id), now, { detail: { replayed: true } });
          acc.readyAt = Math.min(acc.readyAt, now);
          await tx`UPDATE dedup SET dup_count = dup_count + 1 WHERE source = ${ev.source} AND dedup_id = ${ev.dedupId}`;
          return { status: "replayed", eventId: num(seen.event_id), batchId: num(target.batch_id) };
        }
      }
      if (does !== "requeue") {
        await tx`UPDATE dedup SET dup_count = dup_count + 1 WHERE source = ${ev.source} AND dedup_id = ${ev.dedupId}`;
        return { status: "duplicate", eventId: num(seen.event_id) };
      }
      dupCount = requeuedCount(seen);
      requeued = true;
    }
  }
  acc.touched.add(ev.source);
  const size = eventSize(ev, now);
  const placed: Placed[] = [];
  const once = rawIsPayload(ev);
  for (const [i, copy] of ev.copies.entries())
    placed.push(await placeCopy(tx, ev, copy, size, now, acc, once, i === 0 ? claimed : null));
  if (claimed !== null && placed[0].eventId !== claimed)
    throw new Error(`enqueue: the dedup row names event ${claimed}, the event went in as ${placed[0].eventId}`);
  if (ev.dedupId !== null && claimed === null) {
    await tx`INSERT INTO dedup (source, dedup_id, event_id, seen_at, dup_count)
      VALUES (${ev.source}, ${ev.dedupId}, ${placed[0].eventId}, ${now}, ${dupCount})
        ON CONFLICT (source, dedup_id) DO UPDATE
          SET event_id = excluded.event_id, seen_at = excluded.seen_at, dup_count = excluded.dup_count`;
  }
  return requeued ? { status: "queued", placed, requeued } : { status: "queued", placed };
}

/** The liveness facts of what the transaction queued: written once, last, so they are held briefly. */
async function touch(tx: Tx, sources: Set<string>, now: number): Promise<void> {
  if (sources.size === 0) return;
  const keys = ["last_enqueue_at", ...[...sources].sort().map((s) => `source:${s}:last_event_at`)];
  await advanceMetaTimesPg(tx, keys, now);
}

/**
 * The end of a transaction that queued: the liveness facts, and a wake-up for every dispatcher
 * on every host (NOTIFY, delivered only if the transaction commits) saying when the earliest
 * batch it touched may be delivered.
 */
async function finish(tx: Tx, acc: Acc, now: number): Promise<void> {
  await touch(tx, acc.touched, now);
  if (Number.isFinite(acc.readyAt)) await notifyWork(tx, acc.readyAt);
}

/** A write of the set path that failed: the group goes again one by one, in a new transaction. */
class SetPathFailed extends Error {}

/** How this process's group commits went: as a set, one by one, and sets whose write failed and went again. */
export const groupPaths = { set: 0, oneByOne: 0, retried: 0 };

/**
 * One transaction for several requests (each one or more events, all or none of a request's
 * queued). When every event is fresh the group is written as a set (enqueue-set.ts: the same
 * rows in a fixed number of statements); else one by one, each request in a savepoint: one that
 * fails is rolled back to it and reported alone. A failed COMMIT throws, so every request in it
 * fails. `nows`, when given, is each request's own time (when it arrived); `now` is the latest of
 * them. `oneByOne`: never as a set (the tests that hold the two paths to the same rows).
 */
export async function enqueueGroupPg(
  spool: PgSpool,
  jobs: readonly (readonly NewEvent[])[],
  now: number,
  nows?: readonly number[],
  o: { oneByOne?: boolean } = {},
): Promise<JobOutcome[]> {
  // Checked before any lock: a request that cannot be stored fails alone, and never reaches a
  // statement (PostgreSQL's text holds no NUL, and one in a lock name would fail every request).
  const refused = jobs.map((evs) => {
    try {
      for (const ev of evs) checkStorable(ev);
      return null;
    } catch (error) {
      return error;
    }
  });
  const valid = jobs.filter((_, i) => refused[i] === null);
  const times = jobs.map((_, i) => nows?.[i] ?? now);
  const validTimes = times.filter((_, i) => refused[i] === null);
  const merge = (ok: EnqueueResult[][]): JobOutcome[] => {
    let next = 0;
    return jobs.map((_, i) => (refused[i] !== null ? { error: refused[i] } : { ok: ok[next++] }));
  };
  try {
    return await spool.sql.begin(async (tx) => {
      await lockAll(tx, lockNames(valid));
      if (!o.oneByOne && valid.length > 0) {
        const set = await enqueueSetPg(tx, valid, validTimes, now, spool.paths).catch((e) => {
          throw new SetPathFailed("the group's write failed", { cause: e });
        });
        if (set !== null) {
          groupPaths.set++;
          for (const _ of valid) testHook("enqueue.after_savepoint");
          testHook("enqueue.before_commit");
          return merge(set);
        }
      }
      groupPaths.oneByOne++;
      return oneByOne(tx, jobs, refused, times, now);
    });
  } catch (e) {
    if (!(e instanceof SetPathFailed)) throw e;
    groupPaths.retried++;
    return enqueueGroupPg(spool, jobs, now, nows, { oneByOne: true });
  }
}

/** The requests one by one in the caller's transaction (its locks held), each in a savepoint. */
async function oneByOne(
  tx: Tx & { savepoint<T>(fn: (sp: Tx) => Promise<T>): Promise<T> },
  jobs: readonly (readonly NewEvent[])[],
  refused: readonly unknown[],
  times: readonly number[],
  now: number,
): Promise<JobOutcome[]> {
  const acc = newAcc();
  const out: JobOutcome[] = [];
  for (const [i, evs] of jobs.entries()) {
    if (refused[i] !== null) {
      out.push({ error: refused[i] });
      continue;
    }
    const mine = newAcc();
    try {
      const results = await tx.savepoint(async (sp) => {
        const rs: EnqueueResult[] = [];
        // Each request at the time it arrived (as on SQLite); the transaction's facts at the latest.
        for (const ev of evs) rs.push(await enqueueOne(sp, ev, times[i], mine));
        return rs;
      });
      for (const s of mine.touched) acc.touched.add(s);
      acc.readyAt = Math.min(acc.readyAt, mine.readyAt);
      out.push({ ok: results });
    } catch (error) {
      out.push({ error });
    }
    // Outside the savepoint: a failure here undoes the whole group, and none is acked.
    testHook("enqueue.after_savepoint");
  }
  await finish(tx, acc, now);
  testHook("enqueue.before_commit");
  return out;
}

/** One event in its own transaction (the CLI's enqueue, tests). */
export async function enqueuePg(spool: PgSpool, ev: NewEvent, now: number): Promise<EnqueueResult> {
  const [r] = await enqueueGroupPg(spool, [[ev]], now);
  if ("error" in r) throw r.error;
  return r.ok[0];
}

/**
 * Events queued inside the caller's transaction (a delivered script's emits, with its mark): the
 * same checks, locks and join rule as a request's. Throws when one cannot be queued, which fails
 * the caller's transaction (the mark with it), as on SQLite.
 */
export async function enqueueEventsPgTx(tx: Tx, evs: readonly NewEvent[], now: number): Promise<EnqueueResult[]> {
  if (evs.length === 0) return [];
  for (const ev of evs) checkStorable(ev);
  await lockAll(tx, lockNames([evs]));
  const acc = newAcc();
  const out: EnqueueResult[] = [];
  for (const ev of evs) out.push(await enqueueOne(tx, ev, now, acc));
  await finish(tx, acc, now);
  return out;
}

export async function quarantinePg(
  spool: PgSpool,
  q: QuarantineInput,
  now: number,
): Promise<{ eventId: number; batchId: number; reason: string }> {
  const { reason, headers } = quarantineRecord(q);
  const issue = quarantineIssue(q.source, reason);
  return spool.sql.begin(async (tx) => {
    await advanceMetaTimesPg(tx, ["last_enqueue_at"], now);
    const size = q.raw.length;
    const [b] = await tx`INSERT INTO batches (route, source, destination, key, state, first_at, last_at, quiet_s, max_s,
        max_events, max_bytes, count, bytes, sealed_at, last_class, last_error, dead_reason)
      VALUES (${q.source}, ${q.source}, 'quarantine', 'quarantine', 'dead', ${now}, ${now}, 0, 0, 1,
        ${Math.max(1, size)}, 1, ${size}, ${now}, 'quarantine', ${reason}, 'quarantined')
      RETURNING id`;
    const batchId = num(b.id);
    const headersText = JSON.stringify(headers);
    const [e] = await tx`INSERT
        INTO events (source, route, batch_id, event_type, dedup_id, received_at, payload, raw, headers, size, url,
          trace)
      VALUES (${q.source}, ${q.source}, ${batchId}::bigint, '', NULL, ${now}, NULL, ${q.raw}, ${headersText}, ${size},
        ${q.url}, ${JSON.stringify({ stage: "quarantined", reason })})
      RETURNING id`;
    const eventId = num(e.id);
    const content: ContentEvent[] = [
      { id: eventId, event_type: "", received_at: now, dedup_id: null, payload: null, headers: headersText },
    ];
    await tx`UPDATE batches SET content_hash = ${contentHash(content)} WHERE id = ${batchId}::bigint`;
    await journalPg(tx, "event", batchId, now, { event: eventId, detail: { quarantined: reason } });
    await journalPg(tx, "dead", batchId, now, { detail: { reason: "quarantined" } });
    await raiseIssuePg(tx, { ...issue, route: q.source, batchId, error: `quarantined: ${reason}`, now });
    testHook("quarantine.before_commit");
    return { eventId, batchId, reason };
  });
}

/**
 * The group commit's step on PostgreSQL: one transaction, one now (the latest of its requests'), each request at its
 * arrival.
 */
export function pgCommitStep(spool: PgSpool): CommitStep {
  return (group) =>
    enqueueGroupPg(
      spool,
      group.map((j) => j.evs),
      Math.max(...group.map((j) => j.now)),
      group.map((j) => j.now),
    );
}
