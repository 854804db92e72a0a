// Replay and retry as both backends take them: a stored request of a quarantine batch, how it
// is classified again, what a replay returns, and the filter (with its WHERE clause, shared
// SQL, and the dialect's for --where) of `replay --dead` and `resend`.
import { batchWhere, payloadWhere } from "./batches.ts";
import type { EnqueueResult, NewEvent } from "./enqueue.ts";
import type { PayloadCondition, PayloadSql } from "./where.ts";

/** A quarantined request as stored, for the plugin to classify again. */
export interface StoredRequest {
  eventId: number;
  source: string;
  receivedAt: number;
  raw: Uint8Array;
  headers: Record<string, string>;
  /** Path and query as received (secret-bearing parameters removed); null before schema 4. */
  url: string | null;
}

/**
 * Classify a stored request again through the (fixed) plugin: the event it becomes, or null
 * when the plugin now ignores it or answers it as a handshake (nothing to queue). Throws when
 * it still cannot be classified.
 */
/** What a stored request becomes now: its events, or none when the plugin ignores or answers it. */
export type Reclassify = (req: StoredRequest) => readonly NewEvent[];

export type ReplayResult =
  | { batchId: number; kind: "replayed" }
  | { batchId: number; kind: "reclassified"; results: EnqueueResult[]; ignored: number };

export interface DeadFilter {
  destination?: string;
  source?: string;
  /** Only batches whose last event arrived at or after this time. */
  since?: number;
  /** Only batches that died for this reason. */
  reason?: string;
  /** Only batches with an event whose payload matches every one of these (store/where.ts). */
  where?: PayloadCondition[];
}

/** The WHERE terms of `replay --dead`'s selection (both backends): quarantine only when asked for by destination. */
export function deadWhere(
  f: DeadFilter,
  payload?: PayloadSql,
): { where: string[]; params: Record<string, string | number> } {
  const where = ["state = 'dead'"];
  const params: Record<string, string | number> = {};
  if (f.destination !== undefined) {
    where.push("destination = $destination");
    params.destination = f.destination;
  } else {
    where.push("destination <> 'quarantine'");
  }
  if (f.source !== undefined) {
    where.push("source = $source");
    params.source = f.source;
  }
  if (f.since !== undefined) {
    where.push("last_at >= $since");
    params.since = f.since;
  }
  if (f.reason !== undefined) {
    where.push("dead_reason = $reason");
    params.reason = f.reason;
  }
  payloadWhere(where, params, f.where, payload);
  return { where, params };
}

/** The WHERE terms of `replay --delivered`'s selection (both backends): never the quarantine. */
export function deliveredWhere(
  f: Omit<DeadFilter, "reason">,
  payload?: PayloadSql,
): {
  where: string[];
  params: Record<string, string | number>;
} {
  const w = batchWhere(
    { state: "delivered", destination: f.destination, source: f.source, since: f.since, where: f.where },
    payload,
  );
  w.where.push("destination <> 'quarantine'");
  return w;
}

/** A replay selection's statement over its WHERE terms: the batches' ids, oldest first. */
export const replayIdsSql = (where: readonly string[]): string =>
  `SELECT id FROM batches WHERE ${where.join(" AND ")} ORDER BY first_at, id`;
