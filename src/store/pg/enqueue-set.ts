// A group commit on PostgreSQL in a fixed number of round trips, whatever its size: after the
// group's locks (enqueue.ts), one read of what the join rule needs (each (route, key)'s open
// batch and latest unfinished first_at, whether any of its dedup ids was seen, and the new
// events' ids from the identity), the join rule applied in memory (store/group-plan.ts), then
// one statement that writes everything: new batches in their final state, the joined batches'
// counts, the events (each with the values at the indexed paths as this process read them,
// store/paths.ts, so no payload index parses it), the dedup rows, the journal rows in the order
// the one-by-one path writes them, the liveness facts and the wake-up. A seal of a batch that
// was open before the group adds two statements (its content, and its update before the
// statement that may open the group's next batch: one open batch per group is a unique index).
//
// Taken only when every event is fresh: a dedup id seen before (a duplicate, a replay, a requeue)
// or twice in the group sends the whole group through the one-by-one path (enqueue.ts), as does
// a failed write, in a new transaction. The locks held throughout are the group's, so what the
// read saw stays true until the COMMIT.
import { contentHash, type ContentEvent } from "../content.ts";
import type { EnqueueResult, NewEvent } from "../enqueue.ts";
import { pathValuesOf } from "../paths.ts";
import {
  dedupColumns,
  dedupTwice,
  type GroupBatch,
  type GroupPlan,
  type GroupState,
  groupKey,
  type PlannedEvent,
  planGroup,
  storedBatch,
} from "../group-plan.ts";
import { batchRowOf } from "./reads.ts";
import { num, numOrNull, type Tx } from "./db.ts";
import { WORK_CHANNEL } from "./wakeups.ts";
import { metaNumberText } from "./meta.ts";

const UNFINISHED = "('open', 'sealed', 'retry', 'leased', 'awaiting')";

/**
 * The group's facts under its locks, in one statement: each group's open batch (or none) with the
 * latest first_at of its unfinished batches, and `k` event ids from the identity, or null when
 * one of the dedup ids was seen before (then no id is taken, and the caller goes one by one).
 */
async function readGroup(
  tx: Tx,
  jobs: readonly (readonly NewEvent[])[],
  k: number,
): Promise<{ groups: Map<string, GroupState>; ids: number[] } | null> {
  const routes: string[] = [];
  const keys: string[] = [];
  const seen = new Set<string>();
  const dedupSources: string[] = [];
  const dedupIds: string[] = [];
  for (const evs of jobs)
    for (const ev of evs) {
      for (const c of ev.copies) {
        const g = groupKey(c.route, ev.key);
        if (seen.has(g)) continue;
        seen.add(g);
        routes.push(c.route);
        keys.push(ev.key);
      }
      if (ev.dedupId !== null) {
        dedupSources.push(ev.source);
        dedupIds.push(ev.dedupId);
      }
    }
  const rows = (await tx.unsafe(
    `WITH seen AS (SELECT EXISTS (SELECT 1 FROM unnest($3::text[], $4::text[]) AS x(source, dedup_id),
          LATERAL (SELECT 1 FROM dedup d WHERE d.source = x.source AND d.dedup_id = x.dedup_id LIMIT 1) d) AS hit)
      SELECT 'g' AS kind, g.i, b.id, b.source, b.destination, b.count, b.bytes, b.max_events, b.max_bytes, b.first_at,
          b.last_at, b.quiet_s, b.max_s,
          (SELECT MAX(p.first_at) FROM batches p WHERE p.route = g.route AND p.key = g.key
            AND p.state IN ${UNFINISHED}) AS max_first
        FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS g(route, key, i)
        LEFT JOIN LATERAL (SELECT * FROM batches b WHERE b.route = g.route AND b.key = g.key AND b.state = 'open'
          LIMIT 1) b ON true
      UNION ALL
      SELECT 'n', n, nextval('events_id_seq'), NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
        FROM generate_series(1, (SELECT CASE WHEN hit THEN 0 ELSE $5::int END FROM seen)) AS n
      UNION ALL
      SELECT 's', 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL FROM seen WHERE hit`,
    [routes, keys, dedupSources, dedupIds, k],
  )) as Record<string, unknown>[];
  if (rows.some((r) => r.kind === "s")) return null;
  const groups = new Map<string, GroupState>();
  const ids: number[] = [];
  for (const r of rows) {
    if (r.kind === "n") {
      ids.push(num(r.id));
      continue;
    }
    const i = Number(r.i) - 1;
    const maxFirstAt = r.max_first === null ? 0 : Number(r.max_first);
    const open = r.id === null ? null : storedBatch({ ...batchRowOf(r), route: routes[i], key: keys[i] });
    groups.set(groupKey(routes[i], keys[i]), { open, maxFirstAt });
  }
  return { groups, ids: ids.sort((a, b) => a - b) };
}

/** The content_hash of every batch the group sealed: a batch open before it also holds the events already stored. */
async function sealHashes(tx: Tx, plan: GroupPlan): Promise<Map<GroupBatch, string>> {
  const sealed = plan.batches.filter((b) => b.sealedAt !== null);
  const stored = sealed.filter((b) => b.id !== null).map((b) => b.id as number);
  const before = stored.length > 0 ? await contentOfBatchesPg(tx, stored) : new Map<number, ContentEvent[]>();
  return new Map(
    sealed.map((b) => [b, contentHash([...(b.id === null ? [] : (before.get(b.id) ?? [])), ...b.content])]),
  );
}

/**
 * The content of several batches (their hashes' content), each in id order, in one query (the
 * hash and the document order it by version: content.ts documentOrder).
 */
export async function contentOfBatchesPg(tx: Tx, batchIds: readonly number[]): Promise<Map<number, ContentEvent[]>> {
  const rows =
    (await tx`SELECT batch_id, id, event_type, received_at, dedup_id, payload, headers, trace, version, body_file
      FROM events
      WHERE batch_id = ANY(${batchIds}::bigint[]) AND excluded_at IS NULL ORDER BY batch_id, id`) as Record<
      string,
      unknown
    >[];
  const out = new Map<number, ContentEvent[]>();
  for (const r of rows) {
    const b = num(r.batch_id);
    const list = out.get(b) ?? [];
    list.push(contentEventOf(r));
    out.set(b, list);
  }
  return out;
}

/** An event's content from its row (its columns named with `prefix` before each: a join's). */
export function contentEventOf(r: Record<string, unknown>, prefix = ""): ContentEvent {
  return {
    id: num(r[`${prefix}id`]),
    event_type: String(r[`${prefix}event_type`]),
    received_at: Number(r[`${prefix}received_at`]),
    dedup_id: (r[`${prefix}dedup_id`] as string | null) ?? null,
    payload: (r[`${prefix}payload`] as string | null) ?? null,
    headers: String(r[`${prefix}headers`]),
    trace: (r[`${prefix}trace`] as string | null) ?? null,
    version: numOrNull(r[`${prefix}version`]),
    body_file: (r[`${prefix}body_file`] as string | null) ?? null,
  };
}

/**
 * The batches open before the group that it seals, in a statement of their own before the one
 * that may open their group's next batch (at most one open batch per group, a unique index).
 */
async function sealStored(tx: Tx, batches: readonly GroupBatch[], hashes: Map<GroupBatch, string>): Promise<void> {
  if (batches.length === 0) return;
  const done = await tx`UPDATE batches b SET count = b.count + u.n, bytes = b.bytes + u.bytes,
      last_at = GREATEST(b.last_at, u.last_at), state = 'sealed', sealed_at = u.sealed_at, content_hash = u.hash
      FROM unnest(${batches.map((b) => b.id)}::bigint[], ${batches.map((b) => b.addedCount)}::int[],
        ${batches.map((b) => b.addedBytes)}::bigint[], ${batches.map((b) => b.last_at)}::float8[],
        ${batches.map((b) => b.sealedAt)}::float8[], ${batches.map((b) => hashes.get(b) ?? null)}::text[])
        AS u(id, n, bytes, last_at, sealed_at, hash)
      WHERE b.id = u.id AND b.state = 'open'`;
  if (done.count !== batches.length) throw new Error(`enqueue: ${done.count} of ${batches.length} batches still open`);
}

/** The one statement that writes the group. Returns the new batches' ids, in the order they were opened. */
async function writeGroup(
  tx: Tx,
  plan: GroupPlan,
  hashes: Map<GroupBatch, string>,
  metaKeys: readonly string[],
  now: number,
  values: readonly (string | null)[],
): Promise<number[]> {
  const opened = plan.opened;
  const joined = plan.batches.filter((b) => b.id !== null && b.sealedAt === null);
  const ref = (b: GroupBatch) => ({ id: b.id, ord: b.id === null ? b.ord : null });
  const evs = plan.events;
  const js = plan.journal;
  const col = <T, V>(xs: readonly T[], f: (x: T) => V) => xs.map(f);
  const notify = Number.isFinite(plan.readyAt) ? String(plan.readyAt) : null;
  const dedup = dedupColumns(plan);
  const bodies = bodiesOf(evs);
  const [r] = (await tx.unsafe(
    `WITH nid AS MATERIALIZED (SELECT n AS ord, nextval('batches_id_seq') AS id FROM generate_series(1, $1::int) AS n),
    nb AS (INSERT INTO batches (id, route, source, destination, key, state, first_at, last_at, quiet_s, max_s,
        max_events, max_bytes, count, bytes, sealed_at, content_hash)
      SELECT nid.id, u.route, u.source, u.destination, u.key,
        CASE WHEN u.sealed_at IS NULL THEN 'open' ELSE 'sealed' END,
        u.first_at, u.last_at, u.quiet_s, u.max_s, u.max_events, u.max_bytes, u.count, u.bytes, u.sealed_at, u.hash
      FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::float8[], $7::float8[], $8::float8[],
          $9::float8[], $10::int[], $11::bigint[], $12::int[], $13::bigint[], $14::float8[], $15::text[])
          WITH ORDINALITY AS u(route, source, destination, key, first_at, last_at, quiet_s, max_s, max_events,
            max_bytes, count, bytes, sealed_at, hash, ord)
        JOIN nid ON nid.ord = u.ord
      RETURNING 1),
    ub AS (UPDATE batches b
      SET count = b.count + u.n, bytes = b.bytes + u.bytes, last_at = GREATEST(b.last_at, u.last_at)
      FROM unnest($16::bigint[], $17::int[], $18::bigint[], $19::float8[]) AS u(id, n, bytes, last_at)
      WHERE b.id = u.id AND b.state = 'open'
      RETURNING 1),
    ev AS (INSERT INTO events (id, source, route, batch_id, event_type, dedup_id, received_at, payload, raw,
        raw_is_payload, headers, size, trace, version, body_file, path_values)
      SELECT u.id, u.source, u.route, COALESCE(u.batch_id, nid.id), u.event_type, u.dedup_id, u.received_at,
        convert_from(substring($52::bytea FROM u.poff FOR u.plen), 'UTF8'),
        CASE WHEN u.rlen < 0 THEN NULL ELSE substring($53::bytea FROM u.roff FOR u.rlen) END,
        u.once, u.headers, u.size, u.trace, u.version, u.body_file, u.path_values::jsonb
      FROM unnest($20::bigint[], $21::text[], $22::text[], $23::bigint[], $24::int[], $25::text[], $26::text[],
          $27::float8[], $28::int[], $29::int[], $30::smallint[], $31::text[], $32::bigint[], $33::text[], $50::int[],
          $51::int[], $54::float8[], $55::text[], $56::text[])
          AS u(id, source, route, batch_id, batch_ord, event_type, dedup_id, received_at, poff, plen, once, headers,
            size, trace, roff, rlen, version, body_file, path_values)
        LEFT JOIN nid ON nid.ord = u.batch_ord
      RETURNING 1),
    dd AS (INSERT INTO dedup (source, dedup_id, event_id, seen_at, dup_count)
      SELECT u.source, u.dedup_id, u.event_id, u.seen_at, 0
        FROM unnest($34::text[], $35::text[], $36::bigint[], $37::float8[]) AS u(source, dedup_id, event_id, seen_at)
      RETURNING 1),
    jn AS (INSERT INTO journal (at, kind, batch_id, event_id, source, destination, key, detail)
      SELECT u.at, u.kind, COALESCE(u.batch_id, nid.id), u.event_id, u.source, u.destination, u.key, u.detail
        FROM unnest($38::float8[], $39::text[], $40::bigint[], $41::int[], $42::bigint[], $43::text[], $44::text[],
            $45::text[], $46::text[]) WITH ORDINALITY
            AS u(at, kind, batch_id, batch_ord, event_id, source, destination, key, detail, ord)
          LEFT JOIN nid ON nid.ord = u.batch_ord
        ORDER BY u.ord
      RETURNING 1),
    mt AS (INSERT INTO meta (key, value) SELECT k, $47::text FROM unnest($48::text[]) AS k
      ON CONFLICT (key) DO UPDATE SET value = GREATEST(${metaNumberText("meta.value")}, excluded.value::float8)::text
      RETURNING 1)
    SELECT (SELECT array_agg(id ORDER BY ord) FROM nid) AS ids, (SELECT COUNT(*)::int FROM ub) AS joined,
      (SELECT COUNT(*)::int FROM ev) AS events, (SELECT COUNT(*)::int FROM jn) AS journal,
      (SELECT COUNT(*)::int FROM nb) AS opened, (SELECT COUNT(*)::int FROM dd) AS dedup,
      (SELECT COUNT(*)::int FROM mt) AS meta,
      (SELECT COUNT(*)::int FROM (SELECT pg_notify('${WORK_CHANNEL}', $49::text) WHERE $49::text IS NOT NULL) n)
        AS notified`,
    [
      opened.length,
      col(opened, (b) => b.route),
      col(opened, (b) => b.source),
      col(opened, (b) => b.destination),
      col(opened, (b) => b.key),
      col(opened, (b) => b.first_at),
      col(opened, (b) => b.last_at),
      col(opened, (b) => b.quiet_s),
      col(opened, (b) => b.max_s),
      col(opened, (b) => b.max_events),
      col(opened, (b) => b.max_bytes),
      col(opened, (b) => b.count),
      col(opened, (b) => b.bytes),
      col(opened, (b) => b.sealedAt),
      col(opened, (b) => hashes.get(b) ?? null),
      col(joined, (b) => b.id),
      col(joined, (b) => b.addedCount),
      col(joined, (b) => b.addedBytes),
      col(joined, (b) => b.last_at),
      col(evs, (e) => e.id),
      col(evs, (e) => e.ev.source),
      col(evs, (e) => e.route),
      col(evs, (e) => ref(e.batch).id),
      col(evs, (e) => ref(e.batch).ord),
      col(evs, (e) => e.ev.eventType),
      col(evs, (e) => e.ev.dedupId),
      col(evs, (e) => e.at),
      bodies.payloadAt,
      bodies.payloadLength,
      col(evs, (e) => (e.once ? 1 : 0)),
      col(evs, (e) => JSON.stringify(e.ev.headers)),
      col(evs, (e) => e.size),
      col(evs, (e) => e.trace),
      ...dedup,
      col(js, (j) => j.at),
      col(js, (j) => j.kind),
      col(js, (j) => ref(j.batch).id),
      col(js, (j) => ref(j.batch).ord),
      col(js, (j) => j.eventId),
      col(js, (j) => j.batch.source),
      col(js, (j) => j.batch.destination),
      col(js, (j) => j.batch.key),
      col(js, (j) => j.detail),
      String(now),
      metaKeys,
      notify,
      bodies.rawAt,
      bodies.rawLength,
      bodies.payloads,
      bodies.raws,
      col(evs, (e) => e.ev.version ?? null),
      col(evs, (e) => e.ev.body?.sha256 ?? null),
      values,
    ],
  )) as Record<string, unknown>[];
  const wrote = [r.joined, r.events, r.journal, r.opened, r.dedup, r.meta].map(Number);
  const meant = [joined.length, evs.length, js.length, opened.length, dedup[0].length, metaKeys.length];
  if (wrote.some((n, i) => n !== meant[i]))
    throw new Error(`enqueue: the group wrote ${wrote.join("/")} rows where ${meant.join("/")} were meant`);
  return ((r.ids as unknown[] | null) ?? []).map(num);
}

/**
 * The events' payloads and raw bodies as two byte strings, each event's part at its 1-based
 * offset and length (a raw body stored once, as its payload, is length -1). A parameter of type
 * bytea reaches the server as it is, where a text[] of the same bodies is parsed character by
 * character (measured: 0.06 ms of server CPU for each 6 KB body).
 */
function bodiesOf(evs: readonly PlannedEvent[]): {
  payloads: Buffer;
  payloadAt: number[];
  payloadLength: number[];
  raws: Buffer;
  rawAt: number[];
  rawLength: number[];
} {
  const payloads: Buffer[] = [];
  const raws: Buffer[] = [];
  const out = {
    payloadAt: [] as number[],
    payloadLength: [] as number[],
    rawAt: [] as number[],
    rawLength: [] as number[],
  };
  let p = 1;
  let r = 1;
  for (const e of evs) {
    const bytes = Buffer.from(e.ev.payload, "utf8");
    payloads.push(bytes);
    out.payloadAt.push(p);
    out.payloadLength.push(bytes.length);
    p += bytes.length;
    const raw = e.once ? null : e.ev.raw;
    out.rawAt.push(r);
    out.rawLength.push(raw === null ? -1 : raw.length);
    if (raw !== null) {
      raws.push(Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength));
      r += raw.length;
    }
  }
  return { ...out, payloads: Buffer.concat(payloads), raws: Buffer.concat(raws) };
}

/**
 * Each event row's path_values (store/paths.ts), read once per event however many copies it has;
 * none for a body kept in a file (its payload is a reference, not the body's JSON).
 */
function rowPathValues(evs: readonly PlannedEvent[], paths: readonly string[]): (string | null)[] {
  if (paths.length === 0) return evs.map(() => null);
  const read = new Map<NewEvent, string | null>();
  return evs.map((e) => {
    if (!read.has(e.ev)) read.set(e.ev, e.ev.body ? null : pathValuesOf(e.ev.payload, paths));
    return read.get(e.ev) ?? null;
  });
}

/**
 * The group in the caller's transaction (its locks held), or null when it must go one by one (a
 * dedup id seen before or twice): each request's results, in order.
 */
export async function enqueueSetPg(
  tx: Tx,
  jobs: readonly (readonly NewEvent[])[],
  times: readonly number[],
  now: number,
  paths: readonly string[] = [],
): Promise<EnqueueResult[][] | null> {
  if (dedupTwice(jobs)) return null;
  const k = jobs.reduce((a, evs) => a + evs.reduce((b, ev) => b + ev.copies.length, 0), 0);
  const read = await readGroup(tx, jobs, k);
  if (read === null) return null;
  const plan = planGroup(jobs, times, read.groups, read.ids);
  const hashes = await sealHashes(tx, plan);
  await sealStored(
    tx,
    plan.batches.filter((b) => b.id !== null && b.sealedAt !== null),
    hashes,
  );
  const metaKeys =
    plan.touched.size === 0
      ? []
      : ["last_enqueue_at", ...[...plan.touched].sort().map((s) => `source:${s}:last_event_at`)];
  const newIds = await writeGroup(tx, plan, hashes, metaKeys, now, rowPathValues(plan.events, paths));
  const idOf = new Map<GroupBatch, number>();
  for (const b of plan.opened) idOf.set(b, newIds[b.ord - 1]);
  for (const b of plan.batches) if (b.id !== null) idOf.set(b, b.id);
  const byEvent = new Map(plan.events.map((e) => [e.id, e.batch]));
  for (const rs of plan.results)
    for (const r of rs)
      if (r.status === "queued")
        for (const p of r.placed) p.batchId = idOf.get(byEvent.get(p.eventId) as GroupBatch) ?? 0;
  return plan.results;
}
