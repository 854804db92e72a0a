// The frozen part of a batch: events + event_meta in their order (the providers' versions,
// then arrival), and the content_hash over them.
export interface EventMeta {
  id: number;
  event_type: string;
  received_at: number;
  dedup_id: string | null;
  /** The source's keep_headers as they arrived; only present when the event kept any. */
  headers?: Record<string, string>;
  /** The event's version by its provider's clock (events.version); only present when it has one. */
  version?: number;
}

/** One event as it goes into a document: its meta, its kept headers and its stored payload text. */
export interface ContentEvent extends Omit<EventMeta, "headers" | "version"> {
  payload: string | null;
  /** events.headers: a JSON object, "{}" when nothing was kept. */
  headers: string;
  /** events.trace, whose expose the document applies (outside the content_hash; absent: none). */
  trace?: string | null;
  /** events.version (absent or null: none). */
  version?: number | null;
  /**
   * events.body_file: the SHA-256 of a body kept in a file; payload is then its reference
   * (bodies.ts), and the hash covers the reference, which names the content.
   */
  body_file?: string | null;
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
  if (e.version !== undefined && e.version !== null) meta.version = e.version;
  return meta;
}

/**
 * A batch's events in the order its document carries them: by the providers' versions where
 * they have one, a tie by arrival (id), while each event without a version keeps its place in
 * arrival order. Versions are stored when an event is enqueued and never change, so the order,
 * and the content_hash over it, is the same at the seal and on every attempt.
 */
export function documentOrder<E extends Pick<ContentEvent, "id" | "version">>(events: readonly E[]): E[] {
  const byArrival = [...events].sort((a, b) => a.id - b.id);
  const has = (e: E) => e.version !== undefined && e.version !== null;
  const versioned = byArrival.filter(has);
  if (versioned.length < 2) return byArrival;
  versioned.sort((a, b) => (a.version as number) - (b.version as number) || a.id - b.id);
  let next = 0;
  return byArrival.map((e) => (has(e) ? versioned[next++] : e));
}

/**
 * What `"stale":true` adds to an event's entry in event_meta, comma included. An event with a
 * version counts it in its share whether it is marked or not: only its first lease knows.
 */
export const STALE_MARK = `,"stale":true`;

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
  const mark = e.version !== undefined && e.version !== null ? STALE_MARK.length : 0;
  return bytes(jsonText(e.payload ?? "null")) + bytes(JSON.stringify(eventMeta(e))) + mark + 2;
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
        version: -1.7976931348623157e308,
      }),
    ) -
    4 +
    STALE_MARK.length;
  return fixed + META_LIMITS.eventType + META_LIMITS.dedupId + keptHeaders * (META_LIMITS.keptHeader + 1) + 4;
}

/**
 * The canonical JSON of {"event_meta": [...], "events": [...]}, in document order. Payloads are
 * embedded as the stored text, byte for byte: they are immutable, so the form is stable, and no
 * number is ever re-encoded (a 64-bit id in a payload survives). An event's version is in its
 * meta; whether its first lease found it stale is not (that is the delivery's, decided after the
 * seal: docs/receiving.md).
 */
export function canonicalContent(events: ContentEvent[]): string {
  const ordered = documentOrder(events);
  const meta = canonicalJson(ordered.map(eventMeta));
  const payloads = ordered.map((e) => e.payload ?? "null").join(",");
  return `{"event_meta":${meta},"events":[${payloads}]}`;
}

/** sha256:<hex> of the canonical content; identical on every attempt. */
export function contentHash(events: ContentEvent[]): string {
  const h = new Bun.CryptoHasher("sha256");
  h.update(canonicalContent(events));
  return `sha256:${h.digest("hex")}`;
}
