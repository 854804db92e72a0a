// Enqueue: dedup, the join rule for every copy, and quarantine, each in one BEGIN IMMEDIATE
// transaction so a 2xx always follows the COMMIT that holds the event.
import type { BodyFile } from "../bodies.ts";
import { HookspoolError } from "../errors.ts";
import { documentShare, jsonText, META_LIMITS, WIDEST_ID } from "./content.ts";

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
  /** The original body, or null when the source does not store raw bodies (or it is in `body`). */
  raw: Uint8Array | null;
  /**
   * A body kept in a file (bodies.ts): `payload` is then its reference (bodyReference), the file
   * holds the payload byte for byte, and the event's size counts the body's real length.
   */
  body?: BodyFile;
  /** The keep_headers of the source only. */
  headers: Record<string, string>;
  copies: EventCopy[];
  dedupWindowS: number;
  /**
   * Its version by the provider's own clock (plugin/event-version.ts): a finite number, stored
   * in events.version; absent or null: none (never stale, ordered by arrival).
   */
  version?: number | null;
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
  if (ev.dedupId !== null && json(ev.dedupId) > META_LIMITS.dedupId)
    return `the dedup id is over ${META_LIMITS.dedupId} bytes`;
  for (const [name, value] of Object.entries(ev.headers)) {
    if (json(name) + 1 + json(value) > META_LIMITS.keptHeader)
      return `the kept header ${name.slice(0, 64)} is over ${META_LIMITS.keptHeader} bytes`;
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
  if (ev.copies.length > MAX_COPIES)
    throw bad(`the event has ${ev.copies.length - 1} tee copies; at most ${MAX_COPIES - 1}`);
  if (ev.copies[0].tee || ev.copies.slice(1).some((c) => !c.tee))
    throw bad("the primary copy must come first, then tees");
  const seen = new Set<string>();
  for (const c of ev.copies) {
    if (c.destination === "quarantine") throw bad("quarantine is reserved and never delivers");
    if (seen.has(c.destination)) throw bad(`two copies of one event to ${c.destination}`);
    seen.add(c.destination);
    if (!(c.window.max_events >= 1 && c.window.max_bytes >= 1))
      throw bad("a window needs max_events and max_bytes >= 1");
  }
  const metaProblem = eventMetaProblem(ev);
  if (metaProblem) throw bad(metaProblem);
  if (ev.version !== undefined && ev.version !== null && !Number.isFinite(ev.version))
    throw bad("the version is not a finite number");
  if (ev.payloadParsed) return;
  try {
    JSON.parse(jsonText(ev.payload));
  } catch {
    throw bad("the payload is not valid JSON");
  }
}

/**
 * An event's size: its exact share of a batch document (content.ts), its id counted at its
 * widest. `headers`: the event's headers as JSON, when the caller has made it already.
 */
export function eventSize(ev: NewEvent, now: number, headers: string = JSON.stringify(ev.headers)): number {
  // A body in a file counts at its real length, in place of its reference's.
  const file = ev.body ? ev.body.bytes - Buffer.byteLength(ev.payload) : 0;
  return (
    file +
    documentShare({
      id: WIDEST_ID,
      event_type: ev.eventType,
      received_at: now,
      dedup_id: ev.dedupId,
      headers,
      payload: ev.payload,
      version: ev.version ?? null,
    })
  );
}

/**
 * Whether an event's raw body is its payload byte for byte (a JSON body kept as it came): then
 * it is stored once, the events row's raw NULL and raw_is_payload 1.
 */
export function rawIsPayload(ev: Pick<NewEvent, "payload" | "raw" | "body">): boolean {
  const raw = ev.raw;
  if (raw === null || ev.body || raw.length !== Buffer.byteLength(ev.payload)) return false;
  return Buffer.from(ev.payload).equals(raw);
}

/** A stored events row's raw body: its raw column, or its payload's bytes when the two were stored once. */
export function storedRaw(r: {
  payload?: string | null;
  raw: Uint8Array | null;
  raw_is_payload?: number | null;
}): Uint8Array | null {
  if (Number(r.raw_is_payload ?? 0) !== 1) return r.raw ?? null;
  return new Uint8Array(Buffer.from(r.payload ?? ""));
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
export const SENDER_FAULTS: ReadonlySet<string> = new Set([
  "not_json",
  "not_utf8",
  "key_missing",
  "key_too_long",
  "meta_too_long",
  "bad_payload",
]);

/** The issue a quarantine with this reason opens (and which its replay or drop resolves). */
export function quarantineIssue(source: string, reason: string): { fingerprint: string; kind: "source" | "config" } {
  return SENDER_FAULTS.has(reason)
    ? { fingerprint: `source:quarantine:${source}`, kind: "source" }
    : { fingerprint: `config:plugin:${source}`, kind: "config" };
}

/** Credentials no plugin needs to classify a request again; never stored whatever the source says. */
const ALWAYS_SECRET_HEADERS = ["authorization", "proxy-authorization", "cookie"];

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
  return {
    reason: storedReason(q.reason),
    headers: Object.fromEntries(Object.entries(q.headers).filter(([name]) => !auth.has(name.toLowerCase()))),
  };
}
