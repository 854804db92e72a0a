// The operator verbs on PostgreSQL, with SQLite's rules and messages: replay (a dead batch back
// into its queue, or a quarantine batch's requests classified again), replay --delivered, retry,
// drop, split and exclude. Each in one transaction, the batch's row locked first.
import { HookspoolError } from "../../errors.ts";
import { notApplicable, type BatchHead } from "../batches.ts";
import { contentHash } from "../content.ts";
import { checkSplitOptions, pieces, type SplitOptions, splitEvents } from "../split.ts";
import { type NewEvent, quarantineIssue, type EnqueueResult } from "../enqueue.ts";
import { DEAD_CLASSES } from "../issues.ts";
import type { Reclassify, ReplayResult, StoredRequest } from "../replay.ts";
import { num, type PgSpool, type Tx } from "./db.ts";
import { batchContentPg, enqueueEventsPgTx } from "./enqueue.ts";
import { resolveIssuePg } from "./issues.ts";
import { journalPg } from "./journal.ts";

/** The batch an operator named, locked, or E_NOT_FOUND. */
async function requireBatchPg(tx: Tx, id: number): Promise<BatchHead> {
  const [b] = await tx`SELECT id, state, destination, source FROM batches WHERE id = ${id}::bigint FOR UPDATE`;
  if (!b) throw new HookspoolError("E_NOT_FOUND", `no batch ${id}`);
  return { id: num(b.id), state: String(b.state), destination: String(b.destination), source: String(b.source) };
}

/** A destination's dead-batch issues that no dead batch keeps open any more are resolved. */
async function resolveDeadIssuesPg(tx: Tx, destination: string, now: number): Promise<void> {
  for (const [lastClass, reasonClass] of DEAD_CLASSES) {
    const [{ n }] =
      await tx`SELECT COUNT(*)::int AS n FROM batches WHERE state = 'dead' AND destination = ${destination}
        AND last_class = ${lastClass}`;
    if (n === 0) await resolveIssuePg(tx, `delivery:${destination}:${reasonClass}`, now);
  }
}

/** A source's quarantine issues that no dead quarantine batch keeps open any more are resolved. */
async function resolveQuarantineIssuesPg(tx: Tx, source: string, now: number): Promise<void> {
  const left = (await tx`SELECT last_error FROM batches WHERE destination = 'quarantine' AND state = 'dead'
      AND source = ${source}`) as {
    last_error: string | null;
  }[];
  const open = new Set(left.map((b) => quarantineIssue(source, b.last_error ?? "").fingerprint));
  for (const reason of ["bad_payload", "plugin_error:Error"]) {
    const { fingerprint } = quarantineIssue(source, reason);
    if (!open.has(fingerprint)) await resolveIssuePg(tx, fingerprint, now);
  }
}

/** Replay a dead batch: -> retry, due now, attempts = 0; a quarantine batch is classified again. */
export async function replayBatchPg(
  spool: PgSpool,
  id: number,
  now: number,
  reclassify?: Reclassify,
): Promise<ReplayResult> {
  return spool.sql.begin(async (tx): Promise<ReplayResult> => {
    const b = await requireBatchPg(tx, id);
    if (b.state !== "dead") throw notApplicable(b, "replay", "dead");
    if (b.destination !== "quarantine") {
      await tx`UPDATE batches
        SET state = 'retry', attempts = 0, next_attempt_at = ${now}, not_before = ${now}, dead_reason = NULL,
          stale_floor = NULL, floor_at = NULL
        WHERE id = ${id}::bigint AND state = 'dead'`;
      await journalPg(tx, "retry", id, now, { detail: { replayed: true } });
      await resolveDeadIssuesPg(tx, b.destination, now);
      return { batchId: id, kind: "replayed" };
    }
    if (!reclassify)
      throw new HookspoolError("E_CONFIG", `batch ${id} is a quarantine batch; replaying it needs the source plugin`);
    const rows = (await tx`SELECT id, source, received_at, raw, headers, url FROM events WHERE batch_id = ${id}::bigint
        ORDER BY id`) as Record<string, unknown>[];
    const results: EnqueueResult[] = [];
    let ignored = 0;
    for (const r of rows) {
      const req: StoredRequest = {
        eventId: num(r.id),
        source: String(r.source),
        receivedAt: Number(r.received_at),
        raw: r.raw ? new Uint8Array(r.raw as Uint8Array) : new Uint8Array(),
        headers: JSON.parse(String(r.headers)),
        url: (r.url as string | null) ?? null,
      };
      const events: readonly NewEvent[] = reclassify(req);
      if (events.length === 0) ignored++;
      results.push(...(await enqueueEventsPgTx(tx, events, now)));
    }
    await tx`UPDATE batches SET state = 'delivered', delivered_at = ${now}, result = 'reclassified', dead_reason = NULL
      WHERE id = ${id}::bigint AND state = 'dead' AND destination = 'quarantine'`;
    await journalPg(tx, "delivered", id, now, { detail: { reclassified: results.length } });
    await resolveQuarantineIssuesPg(tx, b.source, now);
    return { batchId: id, kind: "reclassified", results, ignored };
  });
}

/** delivered -> retry, due now: delivered once more under a new delivery id. */
export async function resendDeliveredPg(spool: PgSpool, id: number, now: number): Promise<void> {
  await spool.sql.begin(async (tx) => {
    const b = await requireBatchPg(tx, id);
    if (b.state !== "delivered" || b.destination === "quarantine")
      throw notApplicable(b, "replay --delivered", "delivered");
    await tx`UPDATE batches
      SET state = 'retry', attempts = 0, next_attempt_at = ${now}, not_before = ${now}, delivered_at = NULL,
        result = NULL, last_class = NULL, last_error = NULL WHERE id = ${id}::bigint`;
    await journalPg(tx, "retry", id, now, { detail: { resend: true } });
  });
}

/** retry -> due now, skipping the backoff. */
export async function retryNowPg(spool: PgSpool, id: number, now: number): Promise<void> {
  await spool.sql.begin(async (tx) => {
    const b = await requireBatchPg(tx, id);
    if (b.state !== "retry") throw notApplicable(b, "retry", "retry");
    await tx`UPDATE batches SET next_attempt_at = ${now} WHERE id = ${id}::bigint`;
  });
}

/** -> dropped inside the caller's transaction; `result` says why ("dropped", "split"). */
async function dropBatchPgTx(tx: Tx, b: BatchHead, now: number, result: string, why: string): Promise<void> {
  const done = await tx`UPDATE batches
      SET state = 'dropped', delivered_at = ${now}, result = ${result}, last_error = ${why}, dead_reason = NULL,
      next_attempt_at = NULL, not_before = NULL
    WHERE id = ${b.id}::bigint AND state IN ('open', 'sealed', 'retry', 'awaiting', 'dead')`;
  if (done.count !== 1) throw notApplicable(b, "drop", "open, sealed, retry, awaiting or dead");
  await journalPg(tx, "dropped", b.id, now, { detail: { result } });
}

/** -> dropped, for each batch (all or none): open, sealed, retry, awaiting or dead; never automatic. */
export async function dropBatchesPg(spool: PgSpool, ids: readonly number[], now: number): Promise<void> {
  await spool.sql.begin(async (tx) => {
    const sources = new Set<string>();
    const destinations = new Set<string>();
    for (const id of ids) {
      const b = await requireBatchPg(tx, id);
      await dropBatchPgTx(tx, b, now, "dropped", "dropped by operator");
      if (b.destination === "quarantine") sources.add(b.source);
      else destinations.add(b.destination);
    }
    for (const d of destinations) await resolveDeadIssuesPg(tx, d, now);
    for (const s of sources) await resolveQuarantineIssuesPg(tx, s, now);
  });
}

/**
 * split: consecutive sealed pieces in the same group, due now; the original dropped 'split'. Returns the pieces' ids.
 */
export async function splitBatchPg(spool: PgSpool, id: number, o: SplitOptions, now: number): Promise<number[]> {
  checkSplitOptions(o);
  return spool.sql.begin(async (tx) => {
    const b = await requireBatchPg(tx, id);
    if (!["sealed", "retry", "dead"].includes(b.state)) throw notApplicable(b, "split", "sealed, retry or dead");
    if (b.destination === "quarantine")
      throw new HookspoolError("E_NOTHING", `batch ${id} is a quarantine batch; replay or drop it`);
    const content = await batchContentPg(tx, id);
    const rows = (
      (await tx`SELECT id, received_at FROM events WHERE batch_id = ${id}::bigint ORDER BY id`) as Record<
        string,
        unknown
      >[]
    ).map((r) => ({ id: num(r.id), received_at: Number(r.received_at) }));
    const parts = pieces(splitEvents(rows, content), o);
    if (parts.length < 2) throw new HookspoolError("E_NOTHING", `batch ${id} already fits; nothing to split`);
    const ids: number[] = [];
    for (const part of parts) {
      const members = new Set(part.map((e) => e.id));
      const [row] = await tx`INSERT
          INTO batches (route, source, destination, key, state, first_at, last_at, quiet_s, max_s, max_events,
            max_bytes, not_before, count, bytes, sealed_at, content_hash)
          SELECT route, source, destination, key, 'sealed', ${Math.min(...part.map((e) => e.received_at))},
            ${Math.max(...part.map((e) => e.received_at))}, quiet_s, max_s, max_events, max_bytes,
                 ${now}, ${part.length}, ${part.reduce((sum, e) => sum + e.size, 0)}, ${now},
                   ${contentHash(content.filter((e) => members.has(e.id)))}
          FROM batches WHERE id = ${id}::bigint RETURNING id`;
      const newId = num(row.id);
      await tx`UPDATE events SET batch_id = ${newId}::bigint WHERE id = ANY(${part.map((e) => e.id)}::bigint[])`;
      ids.push(newId);
    }
    await dropBatchPgTx(tx, b, now, "split", `split into ${ids.map((x) => `#${x}`).join(", ")} by operator`);
    return ids;
  });
}

/** exclude: events stay stored and listed, are left out of the document, content_hash recomputed. */
export async function excludeEventsPg(
  spool: PgSpool,
  batchId: number,
  eventIds: readonly number[],
  now: number,
): Promise<void> {
  await spool.sql.begin(async (tx) => {
    const b = await requireBatchPg(tx, batchId);
    if (!["open", "sealed", "retry", "dead"].includes(b.state))
      throw notApplicable(b, "exclude", "open, sealed, retry or dead");
    if (b.destination === "quarantine")
      throw new HookspoolError("E_NOTHING", `batch ${batchId} is a quarantine batch; replay or drop it`);
    for (const eid of eventIds) {
      const [e] = await tx`SELECT batch_id FROM events WHERE id = ${eid}::bigint`;
      if (!e || num(e.batch_id) !== batchId)
        throw new HookspoolError("E_NOT_FOUND", `event ${eid} is not in batch ${batchId}`);
      await tx`UPDATE events SET excluded_at = ${now} WHERE id = ${eid}::bigint AND excluded_at IS NULL`;
    }
    const [{ n }] =
      await tx`SELECT COUNT(*)::int AS n FROM events WHERE batch_id = ${batchId}::bigint AND excluded_at IS NULL`;
    if (n === 0)
      throw new HookspoolError("E_NOTHING", `that would exclude every event of batch ${batchId}`, {
        hint: `drop it instead: hookspool drop ${batchId} --yes`,
      });
    if (b.state !== "open")
      await tx`UPDATE batches SET content_hash = ${contentHash(await batchContentPg(tx, batchId))}
        WHERE id = ${batchId}::bigint`;
  });
}
