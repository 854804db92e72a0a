// What an enqueueing sweep does with the events it listed: each one becomes the event the intake
// would have made of its webhook (the same source name, key, event type, dedup id and routes,
// from the source plugin's own steps after verify), its trace saying that the sweep brought it.
// One whose dedup id the spool holds is left alone; the rest are enqueued one at a time, and
// the store's dedup decides again inside each transaction, so an event the intake takes in the
// meantime is a duplicate and is never queued twice.
import type { Config } from "../config/types.ts";
import type { IntakeSource } from "../config/sources.ts";
import { afterVerify, quarantineReason } from "../intake/evaluate.ts";
import { hookRequest } from "../plugin/hook-request.ts";
import type { EnqueueResult, NewEvent } from "../store/enqueue.ts";

/** One thing a provider listed: the webhook's body and the headers it came with. */
export interface ListedEvent {
  /** The provider's id for it (the dedup id the source reads), or null when the item has none. */
  id: string | null;
  /** The webhook's body, parsed. */
  payload: unknown;
  /** Headers the webhook carried that the source reads (a template's header: selectors). */
  headers: Record<string, string>;
}

export interface LandOptions {
  config: Config;
  source: IntakeSource;
  /** The sweep's kind, for the trace. */
  kind: string;
  events: readonly ListedEvent[];
  dryRun: boolean;
  now: number;
  /** The dedup ids among these that the source has spooled. */
  spooled(ids: readonly string[]): Promise<Set<string>>;
  enqueue(ev: NewEvent, now: number): Promise<EnqueueResult>;
}

export interface Landed {
  id: string;
  eventType: string;
  /** The batch of its first copy; null on a dry run. */
  batchId: number | null;
}

export interface LandReport {
  /** Dedup ids the spool held before the sweep. */
  spooled: string[];
  /** Enqueued (or, on a dry run, would be). */
  enqueued: Landed[];
  /** Not spooled when looked up, taken by the intake before the sweep's own enqueue. */
  duplicates: string[];
  /** The id was in a dead batch, which the store replayed (as a redelivery would). */
  replayed: string[];
  /** The source's own steps ignore it (a ping) or answer it as a handshake: nothing to queue. */
  ignored: { id: string; reason: string }[];
  /** The intake would have quarantined it, or it has no dedup id: not enqueued. */
  failed: { id: string; reason: string }[];
}

const utf8 = new TextEncoder();

/** At most this many ids to one spooled() call. */
const LOOKUP_CHUNK = 500;

/**
 * The events the intake would have made of `item`, each copy's trace marked as the sweep's, or
 * why there are none. The plugin's verify is not run: the provider's API, reached with the
 * sweep's key, vouches for the event.
 */
export async function sweptEvents(
  config: Config,
  source: IntakeSource,
  kind: string,
  item: ListedEvent,
  now: number,
): Promise<{ events: NewEvent[] } | { ignored: string } | { failed: string }> {
  const body = JSON.stringify(item.payload);
  if (body === undefined) return { failed: "the listed event has no body" };
  const req = hookRequest({
    method: "POST",
    url: `/hooks/${source.name}`,
    headers: [["content-type", "application/json"], ...Object.entries(item.headers)],
    body: utf8.encode(body),
    peer: "sweep",
    now,
  });
  const ev = await afterVerify(config, source, req);
  if (ev.kind === "ignored") return { ignored: ev.reason };
  if (ev.kind === "answered" || ev.kind === "learn") return { ignored: "handshake" };
  if (ev.kind === "quarantine") return { failed: `the intake would quarantine it (${quarantineReason(ev.error)})` };
  return {
    events: ev.events.map((e) => ({
      ...e,
      copies: e.copies.map((c) => {
        const trace = (c.trace ?? {}) as Record<string, unknown>;
        return { ...c, trace: { ...trace, stage: "sweep", routed_as: trace.stage, sweep: kind } };
      }),
    })),
  };
}

/** Enqueue what the spool does not hold (or say what would be, on a dry run). */
export async function landSwept(o: LandOptions): Promise<LandReport> {
  const report: LandReport = { spooled: [], enqueued: [], duplicates: [], replayed: [], ignored: [], failed: [] };
  const built: { id: string; ev: NewEvent }[] = [];
  const seen = new Set<string>();
  for (const item of o.events) {
    const name = item.id ?? "(no id)";
    const r = await sweptEvents(o.config, o.source, o.kind, item, o.now);
    if ("ignored" in r) report.ignored.push({ id: name, reason: r.ignored });
    else if ("failed" in r) report.failed.push({ id: name, reason: r.failed });
    else
      for (const ev of r.events) {
        if (ev.dedupId === null) {
          report.failed.push({ id: name, reason: "the source reads no dedup id from it" });
          continue;
        }
        if (item.id !== null && ev.dedupId !== item.id) {
          // The spool would know it by another id than the one the provider lists it by.
          report.failed.push({ id: name, reason: "the source's dedup id is not the listed id" });
          continue;
        }
        // A provider may list one event twice (a page boundary that moved): once is enough.
        if (seen.has(ev.dedupId)) continue;
        seen.add(ev.dedupId);
        built.push({ id: ev.dedupId, ev });
      }
  }
  const held = new Set<string>();
  for (let i = 0; i < built.length; i += LOOKUP_CHUNK)
    for (const id of await o.spooled(built.slice(i, i + LOOKUP_CHUNK).map((b) => b.id))) held.add(id);
  for (const { id, ev } of built) {
    if (held.has(id)) {
      report.spooled.push(id);
      continue;
    }
    if (o.dryRun) {
      report.enqueued.push({ id, eventType: ev.eventType, batchId: null });
      continue;
    }
    const r = await o.enqueue(ev, o.now);
    if (r.status === "queued")
      report.enqueued.push({ id, eventType: ev.eventType, batchId: r.placed[0]?.batchId ?? null });
    else if (r.status === "duplicate") report.duplicates.push(id);
    else report.replayed.push(id);
  }
  return report;
}
