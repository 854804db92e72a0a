// The frozen part of a batch: events + event_meta, and the content_hash over them.
export interface EventMeta {
  id: number;
  event_type: string;
  received_at: number;
  dedup_id: string | null;
  /** The source's keep_headers as they arrived; only present when the event kept any. */
  headers?: Record<string, string>;
}

/** One event as it goes into a document: its meta, its kept headers and its stored payload text. */
export interface ContentEvent extends Omit<EventMeta, "headers"> {
  payload: string | null;
  /** events.headers: a JSON object, "{}" when nothing was kept. */
  headers: string;
  /** events.trace, whose expose the document applies (outside the content_hash; absent: none). */
  trace?: string | null;
}

/** JSON with object keys sorted at every level and no whitespace. */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== "object") return JSON.stringify(value) ?? "null";
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  const obj = value as Record<string, unknown>;
  const keys = Object.keys(obj)
    .filter((k) => obj[k] !== undefined)
    .sort();
  return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson(obj[k])}`).join(",")}}`;
}

/**
 * An event's entry in event_meta. The headers a source keeps (keep_headers: GitHub's
 * X-GitHub-Event, say) are delivered here, so a receiver sees them without the sender's request.
 */
export function eventMeta(e: ContentEvent): EventMeta {
  const meta: EventMeta = { id: e.id, event_type: e.event_type, received_at: e.received_at, dedup_id: e.dedup_id };
  if (e.headers && e.headers !== "{}") {
    const kept = JSON.parse(e.headers) as Record<string, string>;
    if (Object.keys(kept).length > 0) meta.headers = kept;
  }
  return meta;
}

export const bytes = (s: string) => Buffer.byteLength(s, "utf8");

/**
 * A stored payload as JSON: without the byte-order mark a sender's body may start with. The
 * payload keeps it (an unwrap delivery, show --payload and export give the body as received), but
 * JSON cannot carry one inside a document, and parsers refuse it.
 */
export function jsonText(payload: string): string {
  return payload.charCodeAt(0) === 0xfeff ? payload.slice(1) : payload;
}

/**
 * The bytes one event takes in a batch document, exactly: its payload and its event_meta entry,
 * each with the comma before it. A batch's `bytes` is the sum of its events' shares, so
 * max_bytes bounds what is delivered (the document's head aside), kept headers included.
 */
export function documentShare(e: ContentEvent): number {
  return bytes(jsonText(e.payload ?? "null")) + bytes(JSON.stringify(eventMeta(e))) + 2;
}

/** An id at its widest: a new event's share is counted before the insert gives it its id. */
export const WIDEST_ID = Number.MAX_SAFE_INTEGER;

/** The JSON-encoded size each part of event_meta may take (enqueue refuses more). */
export const META_LIMITS = { eventType: 256, dedupId: 512, keptHeader: 1024 } as const;

/**
 * The most event_meta can add to one event with `keptHeaders` headers kept: the widest id and
 * time, and each part at its limit. check holds a source's body cap plus this to the
 * destination's max_body_bytes, so a batch of one event is never refused for its size.
 */
export function worstMetaBytes(keptHeaders: number): number {
  const fixed =
    bytes(
      JSON.stringify({
        id: WIDEST_ID,
        event_type: "",
        received_at: -1.7976931348623157e308,
        dedup_id: "",
        headers: {},
      }),
    ) - 4;
  return fixed + META_LIMITS.eventType + META_LIMITS.dedupId + keptHeaders * (META_LIMITS.keptHeader + 1) + 4;
}

/**
 * The canonical JSON of {"event_meta": [...], "events": [...]}. Payloads are embedded as the
 * stored text, byte for byte: they are immutable, so the form is stable, and no number is
 * ever re-encoded (a 64-bit id in a payload survives).
 */
export function canonicalContent(events: ContentEvent[]): string {
  const meta = canonicalJson(events.map(eventMeta));
  const payloads = events.map((e) => e.payload ?? "null").join(",");
  return `{"event_meta":${meta},"events":[${payloads}]}`;
}

/** sha256:<hex> of the canonical content; identical on every attempt. */
export function contentHash(events: ContentEvent[]): string {
  const h = new Bun.CryptoHasher("sha256");
  h.update(canonicalContent(events));
  return `sha256:${h.digest("hex")}`;
}
