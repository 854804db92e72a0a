// One webhook request, in the order of spec 9: body cap -> verify -> challenge -> ignore ->
// payload -> key, dedup id, event type, attrs -> route resolution -> one enqueue transaction
// -> response, sent only after COMMIT returned. A plugin error after verify quarantines.
import type { Clock } from "../clock.ts";
import { eventCopies, type IntakeSource, NO_SECRETS } from "../config/sources.ts";
import type { Config } from "../config/types.ts";
import type { WriteFailures } from "../obs/faults.ts";
import type { Logger } from "../log.ts";
import { isHookspoolError } from "../errors.ts";
import { BadPayload, type HookRequest, type HookResponse, type SourcePlugin } from "../plugin/types.ts";
import type { Spool } from "../store/db.ts";
import { type EnqueueResult, enqueue, MAX_KEY_BYTES, quarantine } from "../store/enqueue.ts";
import { testHook } from "../testhook.ts";
import { type Backpressure, spoolFailure } from "./backpressure.ts";
import type { IntakeMetrics, RejectReason } from "./metrics.ts";
import { hookRequest } from "../plugin/hook-request.ts";
import { storableUrl } from "./captures.ts";

export interface PipelineDeps {
  spool: Spool;
  config(): Config;
  sources(): Map<string, IntakeSource>;
  log: Logger;
  metrics: IntakeMetrics;
  clock: Clock;
  backpressure: Backpressure;
  /** Refused writes: counted, logged without flooding, and the spool issue. */
  writeFailures: WriteFailures;
}

export interface HookInput {
  instance: string;
  method: string;
  url: string;
  headers: Iterable<[string, string]>;
  peer: string;
  /** Read at most `cap` bytes of the body; "too_large" when there is more. */
  readBody(cap: number): Promise<Uint8Array | "too_large">;
}

export interface Reply {
  status: number;
  body: string | Uint8Array;
  headers: Record<string, string>;
}

const JSON_TYPE = { "Content-Type": "application/json" };
const utf8 = new TextEncoder();
const VERIFY_FAILURES: ReadonlySet<string> = new Set(["missing_signature", "malformed", "mismatch", "stale", "future"]);
const status = (s: string, code: number): Reply => ({ status: code, body: JSON.stringify({ status: s }), headers: JSON_TYPE });
const empty = (code: number, headers: Record<string, string> = {}): Reply => ({ status: code, body: "", headers });
const fromPlugin = (r: HookResponse): Reply => ({ status: r.status, body: r.body ?? "", headers: r.headers ?? {} });

/** An exception's class name: the only part of a plugin error that is logged or stored. */
function errorClass(e: unknown): string {
  if (e instanceof Error) return e.name && e.name !== "Error" ? e.name : (e.constructor?.name ?? "Error");
  return typeof e;
}

function lowerHeaders(headers: Iterable<[string, string]>): [string, string][] {
  return [...headers].map(([k, v]) => [k.toLowerCase(), v]);
}

/** Handle POST /hooks/<instance> (or a route hint). */
export async function handleHook(d: PipelineDeps, input: HookInput): Promise<Reply> {
  const src = d.sources().get(input.instance);
  if (!src) return empty(404);
  const { name } = src;
  const headers = lowerHeaders(input.headers);
  const get = (h: string) => headers.find(([k]) => k === h)?.[1] ?? null;
  // Refusals can come by the thousand (a flood, a full disk): identical lines are rate-limited
  // with a count, and every one is counted in /metrics.
  const reject = (reason: RejectReason, answer: Reply, bytes?: number): Reply => {
    d.metrics.rejected1(name, reason);
    d.log.limited("warn", "rejected", { source: name, reason, status: answer.status, bytes, remote: input.peer });
    return answer;
  };

  // 1. body cap, before any plugin code runs (spec 9, 10)
  let body: Uint8Array = new Uint8Array();
  if (input.method === "POST") {
    if ((get("transfer-encoding") ?? "").toLowerCase().includes("chunked")) return reject("chunked", empty(411));
    const length = get("content-length");
    if (length === null || !/^\d+$/.test(length)) return reject("chunked", empty(411));
    if (Number(length) > src.maxBodyBytes) return reject("too_large", empty(413), Number(length));
    const read = await input.readBody(src.maxBodyBytes);
    if (read === "too_large") return reject("too_large", empty(413));
    body = read;
  }
  const req = hookRequest({ method: input.method, url: input.url, headers, body, peer: input.peer, now: d.clock.now() });
  if (input.method === "POST" && d.backpressure.diskLow()) return reject("spool_full", empty(503, { "Retry-After": "60" }), body.length);

  const ev = await evaluate(d.config(), src, req);
  switch (ev.kind) {
    case "answered":
      return fromPlugin(ev.response);
    case "method":
      return empty(405, { Allow: "POST" });
    case "verify_error":
      // Not verified, so it cannot be quarantined; our side failed (an unreadable secret, a key
      // server down), so the sender is asked to come back rather than told it signed wrongly.
      d.log.error("verify failed", { source: name, reason: ev.error, remote: req.remoteAddr, bytes: body.length });
      d.metrics.rejected1(name, "verify_error");
      return empty(503, { "Retry-After": "60" });
    case "unverified":
      // One line per request (the sender is told nothing; the operator gets the class of the
      // failure: missing_signature, malformed, mismatch, stale or future), never a value.
      d.metrics.rejected1(name, "unverified");
      d.log.warn("unverified", { source: name, reason: ev.reason, remote: req.remoteAddr, bytes: body.length });
      return empty(401);
    case "ignored":
      d.metrics.rejected1(name, "ignored");
      d.log.info("ignored", { source: name, reason: ev.reason });
      return status("ignored", 200);
    case "quarantine":
      return quarantined(d, src, req, input.url, headers, ev.error);
    case "classified":
      break;
  }
  const classified = ev;

  // 7. one transaction for every copy; 8. the answer only after COMMIT returned
  let result: EnqueueResult;
  try {
    result = enqueue(d.spool, classified.event, req.now);
    d.backpressure.writeOk();
  } catch (e) {
    const failure = spoolFailure(e);
    if (failure) return spoolRefused(d, name, failure, e, body.length);
    return quarantined(d, src, req, input.url, headers, e);
  }
  testHook("intake.after_commit");
  if (result.status === "queued") {
    d.metrics.received1(name);
    for (const p of result.placed) {
      d.log.info("queued", { source: name, route: p.route, batch: p.batchId, event: p.eventId, destination: p.destination, bytes: body.length, tee: p.tee || undefined });
    }
    // A redelivery of a dropped batch's event is queued anew, and answered as a known id is: 200.
    return status("queued", result.requeued ? 200 : 202);
  }
  d.metrics.duplicate1(name);
  if (result.status === "replayed") {
    d.log.info("replayed", { source: name, batch: result.batchId, event: result.eventId });
    return status("replayed", 200);
  }
  d.log.info("duplicate", { source: name, event: result.eventId });
  return status("duplicate", 200);
}

/** What the plugin steps decided, before anything is written. */
export type Evaluation =
  | { kind: "answered"; response: HookResponse; authenticated: boolean }
  | { kind: "method" }
  | { kind: "verify_error"; error: string }
  | { kind: "unverified"; reason: string }
  | { kind: "ignored"; reason: string }
  | { kind: "quarantine"; error: unknown }
  | ({ kind: "classified" } & Classified);

export interface Classified {
  event: Parameters<typeof enqueue>[1];
  attrs: Record<string, unknown>;
}

/**
 * Steps 2-6 for a request that passed the body cap: the unauthenticated handshake, verify, the
 * challenge, ignore, classification and route resolution. Writes nothing, so `hookspool source
 * test` runs exactly this offline.
 */
export async function evaluate(config: Config, src: IntakeSource, req: HookRequest): Promise<Evaluation> {
  const { plugin } = src;
  // A constant, secret-free handshake (Trello's HEAD) may answer before verify (spec 10).
  if (plugin.challengeUnauthenticated && plugin.challenge) {
    try {
      const r = await plugin.challenge(req, NO_SECRETS);
      if (r) return { kind: "answered", response: r, authenticated: false };
    } catch (e) {
      // Nothing is verified yet, so nothing can be quarantined: treat it as our failure.
      return { kind: "verify_error", error: errorClass(e) };
    }
  }
  if (req.method !== "POST") return { kind: "method" };
  try {
    const verdict = await plugin.verify(req, src.secrets);
    // Only true verifies; a plugin that says why not names a class, one that says false does not.
    if (verdict !== true) return { kind: "unverified", reason: typeof verdict === "string" && VERIFY_FAILURES.has(verdict) ? verdict : "rejected" };
  } catch (e) {
    return { kind: "verify_error", error: errorClass(e) };
  }
  return afterVerify(config, src, req);
}

/**
 * The steps after verify: the challenge, ignore, classification and route resolution. A replay
 * of a quarantined request runs exactly these (it was verified when it arrived, and its
 * timestamp may be past the tolerance now).
 */
export async function afterVerify(config: Config, src: IntakeSource, req: HookRequest): Promise<Exclude<Evaluation, { kind: "method" | "verify_error" | "unverified" }>> {
  const { plugin } = src;
  try {
    // After verify: a handshake answer derived from the secret is no signing oracle now.
    if (plugin.challenge && !plugin.challengeUnauthenticated) {
      const r = await plugin.challenge(req, src.secrets);
      if (r) return { kind: "answered", response: r, authenticated: true };
    }
    const ignored = plugin.ignore?.(req);
    if (ignored) return { kind: "ignored", reason: String(ignored) };
    return { kind: "classified", ...classify(config, src, req) };
  } catch (e) {
    return { kind: "quarantine", error: e };
  }
}

/** Steps 4-6 for a verified request: what the plugin says, then where config sends it. */
export function classify(config: Config, src: IntakeSource, req: HookRequest): Classified {
  const plugin: SourcePlugin = src.plugin;
  let payload: unknown;
  let payloadText: string;
  if (plugin.payload) {
    payload = plugin.payload(req);
    const text = JSON.stringify(payload);
    if (text === undefined) throw new BadPayload("payload() returned nothing");
    payloadText = text;
  } else if (req.body.length === 0) {
    payload = {};
    payloadText = "{}";
  } else {
    payload = req.json();
    // The body itself, byte for byte: an unwrap delivery sends it on as the sender wrote it.
    payloadText = req.text();
  }
  const key = plugin.key(payload, req);
  // A key() that returns no string is the plugin's bug; an empty or oversized one is the payload's.
  if (typeof key !== "string") throw new TypeError("key() did not return a string");
  if (key === "") throw new BadPayload("the coalesce key is empty", "key_missing");
  if (utf8.encode(key).length > MAX_KEY_BYTES) throw new BadPayload(`the coalesce key is over ${MAX_KEY_BYTES} bytes`, "key_too_long");
  const dedupId = plugin.dedupId?.(payload, req) ?? null;
  const eventType = plugin.eventType?.(payload, req) ?? "";
  const { copies, attrs } = eventCopies(config, src.name, src, { payload, req, eventType: String(eventType) });
  const kept: Record<string, string> = {};
  for (const h of src.keepHeaders) {
    const v = req.header(h);
    if (v !== null) kept[h] = v;
  }
  return {
    attrs,
    event: {
      source: src.name,
      key,
      eventType: String(eventType),
      dedupId: dedupId === null ? null : String(dedupId),
      payload: payloadText,
      raw: src.storeRaw ? req.body : null,
      headers: kept,
      copies,
      dedupWindowS: src.dedupWindowS,
    },
  };
}

/**
 * Why a verified request could not be queued, as a short fixed phrase: the sender's fault
 * (BadPayload says which), a route without a destination, or the plugin's own error (only its
 * class name, never its message, is kept).
 */
export function quarantineReason(e: unknown): string {
  if (e instanceof BadPayload) return e.fault;
  if (isHookspoolError(e, "E_CONFIG")) return "no_destination";
  return `plugin_error:${errorClass(e)}`;
}

/** Keep a verified request our code could not classify: 202 quarantined, never a 5xx (spec 9). */
function quarantined(d: PipelineDeps, src: IntakeSource, req: HookRequest, url: string, headers: [string, string][], e: unknown): Reply {
  const reason = quarantineReason(e);
  const allowed = new Set(src.quarantineHeaders);
  try {
    const q = quarantine(
      d.spool,
      { source: src.name, raw: req.body, headers: Object.fromEntries(headers.filter(([k]) => allowed.has(k))), authHeaders: src.authHeaders, url: storableUrl(url, src.secretParams), reason },
      req.now,
    );
    d.backpressure.writeOk();
    testHook("intake.after_commit");
    d.metrics.quarantined1(src.name);
    d.log.warn("quarantined", { source: src.name, batch: q.batchId, event: q.eventId, reason: q.reason, bytes: req.body.length });
    return status("quarantined", 202);
  } catch (qe) {
    const failure = spoolFailure(qe) ?? "spool_full";
    return spoolRefused(d, src.name, failure, qe, req.body.length);
  }
}

/**
 * The spool could not take the write: 503, and the sender holds the event. Whatever
 * the free space says (a quota, inode exhaustion), the spool issue opens and alerts once.
 */
function spoolRefused(d: PipelineDeps, source: string, reason: "busy" | "spool_full", e: unknown, bytes: number): Reply {
  if (reason === "spool_full") d.backpressure.writeFailed(`the last write was refused (${(e as { code?: string } | null)?.code ?? errorClass(e)})`);
  d.metrics.rejected1(source, reason);
  d.writeFailures.record("enqueue", e, { source, bytes });
  return empty(503, reason === "spool_full" ? { "Retry-After": "60" } : {});
}
