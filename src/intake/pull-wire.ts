// The pull API's words on the wire, shared by the server (pull.ts) and the consumer
// (pull-source.ts): the paths, the lease id, the bounds of a request, an ack's results.
import { constantTimeEqual, sha256Hex } from "../plugin/verify.ts";
import { CONSUMER_NAME, PULL_MAX_LEASE, PULL_MAX_WAIT_S } from "../store/pull.ts";

export { PULL_MAX_LEASE, PULL_MAX_WAIT_S };
/** Acks one request may carry at most. */
export const PULL_MAX_ACKS = 100;
/** An ack request's body is small: lease ids and short reasons. */
export const PULL_ACK_MAX_BYTES = 64 * 1024;
/** A consumer's reason is kept this long (it is stored as the batch's last error, never logged). */
export const PULL_REASON_MAX = 300;
/** The header a consumer names itself with (status shows it); absent: "consumer". */
export const CONSUMER_HEADER = "x-hookspool-consumer";

export type PullVerb = "lease" | "ack";

/** /pull/<name>/lease or /pull/<name>/ack; "malformed" for anything else under /pull/. */
export function pullPath(path: string): { name: string; verb: PullVerb } | null | "malformed" {
  if (!path.startsWith("/pull/")) return null;
  const m = /^\/pull\/([A-Za-z0-9_][A-Za-z0-9_.-]{0,63})\/(lease|ack)\/?$/.exec(path);
  return m ? { name: m[1], verb: m[2] as PullVerb } : "malformed";
}

/** A lease as its id says it: the batch, the attempt that leased it, and the nonce only its holder knows. */
export interface LeaseId {
  batchId: number;
  attemptId: number;
  nonce: string;
}

const LEASE_ID = /^([1-9][0-9]{0,15})\.([1-9][0-9]{0,15})\.([0-9a-f]{32})$/;

export const formatLeaseId = (l: LeaseId): string => `${l.batchId}.${l.attemptId}.${l.nonce}`;

export function parseLeaseId(text: unknown): LeaseId | null {
  if (typeof text !== "string") return null;
  const m = LEASE_ID.exec(text);
  if (!m) return null;
  return { batchId: Number(m[1]), attemptId: Number(m[2]), nonce: m[3] };
}

/**
 * The lease's nonce as the spool keeps it: a digest, so a reader of the database, of status
 * or of a log cannot ack a lease it does not hold; only the lease id carries the nonce itself.
 */
const nonceDigest = (nonce: string): string => sha256Hex(`hookspool pull lease\n${nonce}`).slice(0, 32);

/**
 * The claim's host for a lease: the lease owner is "<host>:0:<attempt id>", so it holds the
 * consumer's name (status shows who holds a batch) and the digest of the lease id's nonce.
 */
export const leaseHost = (consumer: string, nonce: string): string => `pull:${consumer}/${nonceDigest(nonce)}`;

/** Whether a batch's lease owner is the lease this id names (its nonce's digest and its attempt). */
export function ownsLease(owner: string | null, l: LeaseId): boolean {
  if (owner === null || !owner.startsWith("pull:")) return false;
  const tail = `/${nonceDigest(l.nonce)}:0:${l.attemptId}`;
  return owner.length > tail.length && constantTimeEqual(owner.slice(-tail.length), tail);
}

/** A consumer's name from its header; null when it is given and not a name. */
export function consumerName(given: string | null): string | null {
  if (given === null || given === "") return "consumer";
  return CONSUMER_NAME.test(given) ? given : null;
}

/** What a consumer says of one leased batch. */
export type AckResult = "ok" | "retry" | "dead";

export interface Ack {
  lease: string;
  result: AckResult;
  reason?: string;
}

/** What the server says of one ack: recorded, or the lease was no longer this consumer's (or never was). */
export type AckVerdict = "recorded" | "stale" | "unknown";

/** One leased batch as the lease answer carries it; `document` is what a push would have delivered. */
export interface LeasedBatch {
  lease: string;
  /** When the lease ends (epoch seconds on the spool's clock): ack before it. */
  deadline: number;
  batch_id: number;
  webhook_id: string;
  attempt: number;
  document: PulledDocument;
}

/** The batch document's fields a consumer reads (docs/receiving.md has the whole document). */
export interface PulledDocument {
  source: string;
  route: string;
  key: string;
  batch_id: number;
  delivery_id: string;
  events: unknown[];
  event_meta: {
    id: number;
    event_type: string;
    received_at: number;
    dedup_id: string | null;
    headers?: Record<string, string>;
    /** The event's version by its provider's clock, when it has one. */
    version?: number;
    /** Delivered although older than its key's last delivered version (a route's stale = "mark"). */
    stale?: true;
  }[];
}

// ---------------------------------------------------------------------------------------------
// The lease answer read back as its bytes: a consumer stores each payload exactly as the
// spool upstream stored it, so a large number or an escape is never re-encoded by JSON.parse.

const WS = new Set([" ", "\t", "\n", "\r"]);

function skipSpace(s: string, i: number): number {
  while (i < s.length && WS.has(s[i])) i++;
  return i;
}

/** The index just past the JSON value that starts at `i` (the text is JSON.parse'd already). */
function skipValue(s: string, i: number): number {
  const c = s[i];
  if (c === '"') {
    for (let j = i + 1; j < s.length; j++) {
      if (s[j] === "\\") j++;
      else if (s[j] === '"') return j + 1;
    }
    throw new SyntaxError("unterminated string");
  }
  if (c === "{" || c === "[") {
    let depth = 0;
    for (let j = i; j < s.length; j++) {
      const d = s[j];
      if (d === '"') j = skipValue(s, j) - 1;
      else if (d === "{" || d === "[") depth++;
      else if (d === "}" || d === "]") {
        depth--;
        if (depth === 0) return j + 1;
      }
    }
    throw new SyntaxError("unterminated container");
  }
  let j = i;
  while (j < s.length && !WS.has(s[j]) && s[j] !== "," && s[j] !== "]" && s[j] !== "}") j++;
  return j;
}

/** The raw text of each element of the JSON array `text`. */
export function rawElements(text: string): string[] {
  let i = skipSpace(text, 0);
  if (text[i] !== "[") throw new SyntaxError("not an array");
  const out: string[] = [];
  i = skipSpace(text, i + 1);
  if (text[i] === "]") return out;
  for (;;) {
    const end = skipValue(text, i);
    out.push(text.slice(i, end));
    i = skipSpace(text, end);
    if (text[i] === "]") return out;
    if (text[i] !== ",") throw new SyntaxError("expected , in an array");
    i = skipSpace(text, i + 1);
  }
}

/** The raw text of member `key` of the JSON object `text`, or null when it has none. */
export function rawMember(text: string, key: string): string | null {
  let i = skipSpace(text, 0);
  if (text[i] !== "{") throw new SyntaxError("not an object");
  i = skipSpace(text, i + 1);
  while (text[i] !== "}") {
    const keyEnd = skipValue(text, i);
    const name = JSON.parse(text.slice(i, keyEnd)) as string;
    i = skipSpace(text, keyEnd);
    if (text[i] !== ":") throw new SyntaxError("expected : in an object");
    i = skipSpace(text, i + 1);
    const end = skipValue(text, i);
    if (name === key) return text.slice(i, end);
    i = skipSpace(text, end);
    if (text[i] === ",") i = skipSpace(text, i + 1);
  }
  return null;
}

/** Each leased batch of a lease answer, with its events' payloads as their raw JSON texts. */
export function readLeaseAnswer(text: string): { leased: LeasedBatch; payloads: string[] }[] {
  const doc = JSON.parse(text) as { leases?: LeasedBatch[] };
  if (!Array.isArray(doc.leases)) throw new SyntaxError('a lease answer is {"leases": [...]}');
  const raw = rawElements(rawMember(text, "leases") ?? "[]");
  return doc.leases.map((leased, i) => {
    const events = rawMember(rawMember(raw[i], "document") ?? "{}", "events") ?? "[]";
    return { leased, payloads: rawElements(events) };
  });
}
