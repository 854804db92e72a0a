// How a batch goes out over HTTP, shared by the hermes and http destinations: the batch document
// as one request, or with unwrap one request per event, in events.id order, each with the
// event's stored payload as its body and a per-event webhook-id; an unwrap attempt stops at the
// first failure, which is classified exactly as a document's would be.
import { type DeliveryContext, deliveryId, outcome, type Outcome, type StoredEvent } from "../delivery.ts";

/** One event's request, as the destination sends it. */
export interface EventRequest {
  event: StoredEvent;
  /** events.payload encoded once; these exact bytes are signed and sent. */
  body: Uint8Array;
  /** hs_<instance>_<batch>_<event id>: the same on every attempt. */
  webhookId: string;
}

export interface UnwrapOptions {
  instanceId: string;
  /** Applies to each event's body, not to the document. */
  maxBodyBytes: number;
  /** An event's body (default: its stored payload, byte for byte). */
  payload?: (event: StoredEvent) => string;
  /**
   * Do not send again the events an earlier attempt of this delivery got through (ctx.resume):
   * on a paced destination each request spends its window, and a batch larger than the window
   * would otherwise never finish.
   */
  skipTaken?: boolean;
  /** Send one event; its outcome is the one a document would get for the same answer. */
  send(req: EventRequest): Promise<Outcome>;
}

const encoder = new TextEncoder();

/**
 * Deliver every event of the batch, in the document's order (its versions', then arrival). The
 * batch is ok only when every request was; a retry starts again at the first event (receivers
 * that keep ids answer duplicate), or with skipTaken at the event the last attempt failed on, so
 * no event is ever sent before an earlier one of its batch has been accepted.
 */
export async function deliverEach(ctx: DeliveryContext, opts: UnwrapOptions): Promise<Outcome> {
  const events = ctx.events;
  const total = events.length;
  const resume = opts.skipTaken ? ctx.resume : undefined;
  // Where the last attempt failed, in this (unchanging) order; an event no longer there (an
  // operator excluded it): every event that came before it by id.
  const at = resume ? events.findIndex((e) => e.id === resume.before) : -1;
  const taken = (i: number, id: number) => (resume ? (at >= 0 ? i < at : id < resume.before) : false);
  let last: Outcome | null = null;
  let sent = 0;
  for (const [i, event] of events.entries()) {
    if (taken(i, event.id)) continue;
    const where = `event ${event.id} (${i + 1} of ${total})`;
    const fail = (o: Outcome): Outcome => ({
      ...o,
      detail: `${where}: ${o.detail}`,
      eventsDelivered: i,
      failedEventId: event.id,
      sent,
    });
    if (ctx.deadline.expired) return fail(ctx.deadline.outcome());
    const body = encoder.encode(opts.payload ? opts.payload(event) : event.payload);
    if (body.byteLength > opts.maxBodyBytes) {
      return fail(
        outcome({
          kind: "dead",
          klass: "permanent",
          reason: "body over max_body_bytes",
          detail: `${body.byteLength} bytes > max_body_bytes ${opts.maxBodyBytes}`,
          deadReason: "config",
        }),
      );
    }
    const webhookId = deliveryId("per-event", opts.instanceId, ctx.batchId, 0, event.id, ctx.resend ?? 0);
    sent++;
    const o = await opts.send({ event, body, webhookId });
    if (o.kind !== "ok") return fail(o);
    last = o;
  }
  const skipped = total - sent;
  return outcome({
    kind: "ok",
    reason: `${total} event(s) delivered`,
    status: last?.status ?? null,
    detail: skipped
      ? `${sent} event(s) delivered one by one, ${skipped} taken by an earlier attempt`
      : `${total} event(s) delivered one by one`,
    eventsDelivered: total,
    failedEventId: null,
    sent,
  });
}

/** A header to set from the batch or event (skipped when either the name or the value is missing). */
export interface NamedHeader {
  name: string | null | undefined;
  value: string | null;
}

export interface BatchSend {
  instanceId: string;
  /** The document's cap, or with unwrap each event's. */
  maxBodyBytes: number;
  unwrap: boolean;
  /** Carries the batch's event type (its last event's), or with unwrap each event's. */
  eventHeader: string | null | undefined;
  /** With unwrap: carries each event's dedup id. */
  dedupHeader: string | null | undefined;
  /** With unwrap: an event's body (default: its stored payload). */
  payload?: (event: StoredEvent) => string;
  /** With unwrap: skip the events an earlier attempt got through (a paced destination). */
  skipTaken?: boolean;
  /** Send one request; `unwrapped` says it carries one event's payload (`event`) rather than the document. */
  send(
    body: Uint8Array,
    webhookId: string,
    named: NamedHeader[],
    unwrapped: boolean,
    event?: StoredEvent,
  ): Promise<Outcome>;
}

/** Deliver a batch: its document as one request, or with unwrap each event as its own. */
export async function deliverBatch(body: string, ctx: DeliveryContext, o: BatchSend): Promise<Outcome> {
  if (o.unwrap) {
    return deliverEach(ctx, {
      instanceId: o.instanceId,
      maxBodyBytes: o.maxBodyBytes,
      payload: o.payload,
      skipTaken: o.skipTaken,
      send: (r) =>
        o.send(
          r.body,
          r.webhookId,
          [
            { name: o.eventHeader, value: r.event.eventType },
            { name: o.dedupHeader, value: r.event.dedupId },
            // An event its route marks stale says so, as its event_meta entry would.
            { name: "X-Hookspool-Stale", value: r.event.stale ? "true" : null },
          ],
          true,
          r.event,
        ),
    });
  }
  const bytes = encoder.encode(body);
  if (bytes.byteLength > o.maxBodyBytes) {
    return outcome({
      kind: "dead",
      klass: "permanent",
      reason: "body over max_body_bytes",
      detail: `${bytes.byteLength} bytes > max_body_bytes ${o.maxBodyBytes}`,
      deadReason: "config",
    });
  }
  const lastType = ctx.events.at(-1)?.eventType ?? null;
  return o.send(bytes, ctx.deliveryId, [{ name: o.eventHeader, value: lastType }], false);
}
