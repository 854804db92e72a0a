// The batch document (docs/receiving.md), identical for Hermes, scripts and HTTP. Payloads are
// spliced in as stored, byte for byte, so the document never re-encodes a sender's numbers; an
// event whose route set expose carries only those paths (each value still as stored), by the
// rule its trace kept when it was routed. The events go in their versions' order; one older than
// its key's last delivered version when the batch was first leased is marked "stale" or left
// out, as its route's stale rule said when it was routed (store/stale-plan.ts): the floor is
// fixed on the batch at that lease, so every attempt builds the same document.
import { compileExpose, type ExposeRule, exposePayload, tracedExpose } from "../config/expose.ts";
import type { StoredEvent } from "../delivery.ts";
import { type ContentEvent, documentOrder, type EventMeta, eventMeta, jsonText } from "../store/content.ts";
import type { BatchRow } from "../store/batches.ts";
import { judge, staleCounts } from "../store/stale-plan.ts";

export interface DocumentInput {
  batch: BatchRow;
  content: ContentEvent[];
  deliveryId: string;
  attempt: number;
}

/** "7 github event(s) for owner/repo:ci (check_suite x5, workflow_run x2)": a count, never an interpretation. */
export function summary(source: string, key: string, types: Record<string, number>, count: number): string {
  const parts = Object.entries(types)
    .sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1))
    .map(([t, n]) => `${t || "untyped"} x${n}`);
  return `${count} ${source} event(s) for ${key}${parts.length ? ` (${parts.join(", ")})` : ""}`;
}

/** Each event's payload as its route delivers it: the stored text, or with expose only its paths. */
function deliveredPayloads(content: readonly ContentEvent[]): string[] {
  const rules = new Map<string, ExposeRule>();
  return content.map((e) => {
    const payload = e.payload ?? "null";
    const paths = e.trace ? tracedExpose(e.trace) : null;
    if (paths === null) return payload;
    const id = JSON.stringify(paths);
    let rule = rules.get(id);
    if (!rule) rules.set(id, (rule = compileExpose(paths)));
    return exposePayload(payload, rule).text;
  });
}

/** A built document: its text, the events as delivered, and what the stale rules made of the batch. */
export interface BuiltDocument {
  body: string;
  /** The events as delivered (each payload exposed), for unwrap. */
  events: StoredEvent[];
  /** Events delivered with "stale": true, and events left out as stale. */
  marked: number;
  skipped: number;
  /** Every event of the batch was left out as stale: there is nothing to send. */
  allSkipped: boolean;
}

/** The document as JSON text, and the events as delivered (each payload exposed) for unwrap. */
export function buildDocument(d: DocumentInput): BuiltDocument {
  const { batch } = d;
  const judged = judge(documentOrder(d.content), batch);
  const { marked, skipped } = staleCounts(judged);
  const kept = judged.filter((j) => j.stale !== "skip");
  const content = kept.map((j) => j.event);
  const payloads = deliveredPayloads(content);
  const types: Record<string, number> = {};
  for (const e of content) types[e.event_type] = (types[e.event_type] ?? 0) + 1;
  const head = {
    source: batch.source,
    route: batch.route,
    key: batch.key,
    batch_id: batch.id,
    delivery_id: d.deliveryId,
    attempt: d.attempt,
    count: content.length,
    first_at: batch.first_at,
    last_at: batch.last_at,
    event_type: content.length ? content[content.length - 1].event_type : "",
    event_types: types,
    summary: summary(batch.source, batch.key, types, content.length),
    content_hash: batch.content_hash,
  };
  const headText = JSON.stringify(head);
  const events = payloads.map(jsonText).join(",");
  // "stale" comes last in its entry, the bytes content.ts STALE_MARK counts.
  const meta = JSON.stringify(
    kept.map((j): EventMeta & { stale?: true } =>
      j.stale === "mark" ? { ...eventMeta(j.event), stale: true } : eventMeta(j.event),
    ),
  );
  const body = `${headText.slice(0, -1)},"events":[${events}],"event_meta":${meta}}`;
  return {
    body,
    events: kept.map(({ event: e, stale }, i) => ({
      id: e.id,
      eventType: e.event_type,
      dedupId: e.dedup_id,
      payload: payloads[i],
      ...(stale === "mark" ? { stale: true as const } : {}),
    })),
    marked,
    skipped,
    allSkipped: content.length === 0 && skipped > 0,
  };
}
