// One webhook request, in this order: body cap -> verify -> challenge -> ignore ->
// payload -> key, dedup id, event type, attrs -> route resolution -> one enqueue transaction
// -> response, sent only after COMMIT returned. A plugin error after verify quarantines.
import type { Clock } from "../clock.ts";
import type { IntakeSource } from "../config/sources.ts";
import type { Config } from "../config/types.ts";
import { errorClass, type Faults } from "../obs/faults.ts";
import type { Logger } from "../log.ts";
import type { HookRequest, HookResponse } from "../plugin/types.ts";
import type { IntakeStore } from "../store/api.ts";
import type { EnqueueResult, EventCopy, NewEvent, Placed } from "../store/enqueue.ts";
import { testHook } from "../testhook.ts";
import { type BodyFile, bodyReference } from "../bodies.ts";
import { collectGarbage, type Gate, type LargeBody, receiveToFile } from "./large.ts";
import { type Backpressure, spoolFailure } from "./backpressure.ts";
import type { IntakeMetrics, RejectReason } from "./metrics.ts";
import { hookRequest } from "../plugin/hook-request.ts";
import { storableUrl } from "./captures.ts";
import type { RotationWatch } from "./rotation.ts";
import { evaluate, quarantineReason } from "./evaluate.ts";
import { ARM_PARAM, keepLearnedSecret } from "./learn.ts";
import {
  emptyReply,
  evaluationReply,
  BAD_LENGTH,
  LENGTH_REQUIRED,
  pluginReply,
  type Reply,
  SPOOL_BUSY,
  SPOOL_FULL,
  statusReply,
  TOO_LARGE,
} from "./replies.ts";

export interface PipelineDeps {
  /** Every event's enqueue goes through it: requests that are ready together commit together. */
  store: IntakeStore;
  config(): Config;
  sources(): Map<string, IntakeSource>;
  log: Logger;
  metrics: IntakeMetrics;
  clock: Clock;
  backpressure: Backpressure;
  /** Refused writes (counted, logged without flooding, the spool issue) and bugs. */
  faults: Faults;
  /** Under `run`: the earliest instant a batch this event joined may be ready (now when sealed). */
  wake?: (at: number) => void;
  /** Counts which secret of a rotation verified each request, and opens the issue of an old one. */
  rotation?: RotationWatch;
  /** <home>/bodies/: where a body above spool.inline_max_bytes is kept; unset, every body is inline. */
  bodies?: string;
  /** How many large bodies may be in memory at once (the rest wait, on disk). */
  largeGate?: Gate;
}

export interface HookInput {
  instance: string;
  method: string;
  url: string;
  headers: Iterable<[string, string]>;
  peer: string;
  /** Read at most `cap` bytes of the body; "too_large" when there is more. */
  readBody(cap: number): Promise<Uint8Array | "too_large">;
  /** Stream at most `cap` bytes of the body into `sink`; its length, or "too_large" when there is more. */
  streamBody?(cap: number, sink: (chunk: Uint8Array) => Promise<void>): Promise<number | "too_large">;
}

/**
 * The earliest a batch this event joined can be ready: now when it sealed or has no window, else
 * when its quiet (or max) window ends. A batch opened earlier may be due sooner by its max
 * window; the dispatcher already armed that instant when the batch opened.
 */
export function earliestReady(placed: readonly Placed[], copies: readonly EventCopy[], now: number): number {
  let at = Number.POSITIVE_INFINITY;
  placed.forEach((p, i) => {
    const w = copies[i]?.window;
    const ready = p.sealed || !w ? now : now + Math.min(w.quiet_s, w.max_s);
    at = Math.min(at, ready);
  });
  return at === Number.POSITIVE_INFINITY ? now : at;
}

function lowerHeaders(headers: Iterable<[string, string]>): [string, string][] {
  return [...headers].map(([k, v]) => [k.toLowerCase(), v]);
}

/** Handle POST /hooks/<instance> (or a route hint). */
export async function handleHook(d: PipelineDeps, input: HookInput): Promise<Reply> {
  const src = d.sources().get(input.instance);
  if (!src) return emptyReply(404);
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

  // 1. body cap, before any plugin code runs
  let body: Uint8Array = new Uint8Array();
  if (input.method === "POST") {
    if ((get("transfer-encoding") ?? "").toLowerCase().includes("chunked")) return reject("chunked", LENGTH_REQUIRED());
    const length = get("content-length");
    // Two Content-Length headers arrive joined ("5, 5"): a refusal with its reason, not a missing length.
    if (length?.includes(",")) return reject("bad_length", BAD_LENGTH());
    if (length === null || !/^\d+$/.test(length)) return reject("chunked", LENGTH_REQUIRED());
    if (Number(length) > src.maxBodyBytes) return reject("too_large", TOO_LARGE(), Number(length));
    if (d.bodies && input.streamBody && Number(length) > d.config().spool.inline_max_bytes) {
      if (d.backpressure.diskLow()) return reject("spool_full", SPOOL_FULL(), Number(length));
      const got = await receiveToFile(d.bodies, src.maxBodyBytes, input.streamBody);
      if (got === "too_large") return reject("too_large", TOO_LARGE());
      // Only a few large bodies are held in memory at once: the others wait in their files.
      const release = await (d.largeGate?.take() ?? (async () => () => {})());
      try {
        // What the uploads still streaming have left (their chunks) goes before this body comes in.
        await collectGarbage();
        return await afterRead(d, input, src, headers, EMPTY_BODY, got);
      } finally {
        // The body's text and its parsed payload are garbage now: gone before the next large
        // body comes in, not whenever the heap next grows.
        await collectGarbage();
        release();
        // Kept under its hash, or not wanted: the temporary name goes either way.
        await got.sink.discard();
      }
    }
    const read = await input.readBody(src.maxBodyBytes);
    if (read === "too_large") return reject("too_large", TOO_LARGE());
    body = read;
  }
  return afterRead(d, input, src, headers, body, null);
}

/**
 * Whether a payload's UTF-8 text is the file's bytes exactly (then the file can hold it): the
 * same length and the same SHA-256, the hash the file is named by, so no second copy of the body
 * is made to compare (hashing an ASCII string encodes nothing).
 */
function sameContent(payload: string, file: BodyFile): boolean {
  if (Buffer.byteLength(payload) !== file.bytes) return false;
  return new Bun.CryptoHasher("sha256").update(payload).digest("hex") === file.sha256;
}

const EMPTY_BODY = new Uint8Array();

/**
 * The request once its body is read: the plugin steps, the enqueue and the answer. A large body
 * comes as its file (`large`, `body` empty): the request reads it from there when a step first
 * asks and lets go of the bytes once decoded, and nothing here holds it.
 */
async function afterRead(
  d: PipelineDeps,
  input: HookInput,
  src: IntakeSource,
  headers: [string, string][],
  body: Uint8Array,
  large: LargeBody | null,
): Promise<Reply> {
  const size = large ? large.file.bytes : body.length;
  const { name } = src;
  const reject = (reason: RejectReason, answer: Reply, bytes?: number): Reply => {
    d.metrics.rejected1(name, reason);
    d.log.limited("warn", "rejected", { source: name, reason, status: answer.status, bytes, remote: input.peer });
    return answer;
  };
  const req = hookRequest({
    method: input.method,
    url: input.url,
    headers,
    body,
    bodyFile: large ? { path: () => large.sink.path, size } : undefined,
    peer: input.peer,
    now: d.clock.now(),
  });
  if (input.method === "POST" && d.backpressure.diskLow()) return reject("spool_full", SPOOL_FULL(), size);

  const ev = await evaluate(d.config(), src, req);
  if (ev.verifiedWith) d.rotation?.verified(name, ev.verifiedWith, req.now);
  switch (ev.kind) {
    case "answered":
      // A handshake that refused (a GET with the wrong verify token) is counted and logged as
      // a failed verification is: guessing leaves a trace, and the token never does.
      if (!ev.authenticated && ev.response.status >= 400) {
        d.metrics.rejected1(name, "unverified");
        d.log.warn("unverified", {
          source: name,
          reason: "handshake refused",
          status: ev.response.status,
          remote: req.remoteAddr,
        });
      }
      return evaluationReply(ev);
    case "method":
      return evaluationReply(ev);
    case "learn":
      return learned(d, name, ev.secret, ev.response, req.now, req.remoteAddr, req.query[ARM_PARAM] ?? null);
    case "verify_error":
      d.log.error("verify failed", { source: name, reason: ev.error, remote: req.remoteAddr, bytes: size });
      d.metrics.rejected1(name, "verify_error");
      return evaluationReply(ev);
    case "unverified":
      // One line per request (the sender is told nothing; the operator gets the class of the
      // failure: missing_signature, malformed, mismatch, stale or future), never a value.
      d.metrics.rejected1(name, "unverified");
      d.log.warn("unverified", { source: name, reason: ev.reason, remote: req.remoteAddr, bytes: size });
      return evaluationReply(ev);
    case "ignored":
      d.metrics.rejected1(name, "ignored");
      d.log.info("ignored", { source: name, reason: ev.reason });
      return evaluationReply(ev);
    case "quarantine":
      return await quarantined(d, src, req, input.url, headers, ev.error);
    case "classified":
      break;
  }
  let classified = ev;

  // 7. one transaction for every copy (and every event of a split request); 8. the answer only
  // after COMMIT returned
  let results: EnqueueResult[];
  try {
    if (large) {
      const storeRaw = d.config().sources[name]?.store_raw ?? d.config().spool.store_raw;
      classified = { ...classified, events: await keepLarge(classified.events, large, storeRaw) };
    }
    results = await d.store.enqueueAll(classified.events, req.now);
    d.backpressure.writeOk();
  } catch (e) {
    const failure = spoolFailure(e);
    if (failure) return spoolRefused(d, name, failure, e, size);
    return quarantined(d, src, req, input.url, headers, e);
  }
  testHook("intake.after_commit");

  // A sender that reads the answer (Twilio's TwiML, Discord's deferred reply) gets its own.
  // The word still goes with it, in a header, for `bobbin check` and the operator's curl.
  const ack = (word: string, status: number) => {
    const a = src.plugin.ack;
    return a
      ? pluginReply({ ...a, headers: { ...(a.headers ?? {}), "X-Hookspool-Status": word } })
      : statusReply(word, status);
  };
  let queued = false;
  let requeued = false;
  results.forEach((result, i) => {
    if (result.status === "queued") {
      queued = true;
      requeued ||= result.requeued === true;
      d.metrics.received1(name);
      if (d.wake) d.wake(earliestReady(result.placed, classified.events[i].copies, req.now));
      for (const p of result.placed) {
        d.log.info("queued", {
          source: name,
          route: p.route,
          batch: p.batchId,
          event: p.eventId,
          destination: p.destination,
          bytes: size,
          tee: p.tee || undefined,
        });
      }
      return;
    }
    d.metrics.duplicate1(name);
    if (result.status === "replayed")
      d.log.info("replayed", { source: name, batch: result.batchId, event: result.eventId });
    else d.log.info("duplicate", { source: name, event: result.eventId });
  });
  // A redelivery of a dropped batch's event is queued anew, and answered as a known id is: 200.
  if (queued) return ack("queued", requeued && results.length === 1 ? 200 : 202);
  if (results.some((r) => r.status === "replayed")) return ack("replayed", 200);
  return ack("duplicate", 200);
}

/**
 * An event whose payload is the large body byte for byte is stored by reference: the body's
 * file is renamed to its hash and the directory fsync'd here, before the transaction that names
 * it, so a committed reference always has its file. An event whose plugin rewrote the payload
 * keeps that payload inline, and the first such event the request's raw body when the source
 * stores raw bodies (the plugin steps took none, so as not to hold the bytes beside the text).
 */
async function keepLarge(events: NewEvent[], large: LargeBody, storeRaw: boolean): Promise<NewEvent[]> {
  const out: NewEvent[] = [];
  for (const [i, ev] of events.entries()) {
    if (sameContent(ev.payload, large.file))
      out.push({ ...ev, payload: bodyReference(large.file), raw: null, body: large.file, payloadParsed: true });
    else out.push(i === 0 && storeRaw ? { ...ev, raw: await large.sink.read() } : ev);
  }
  if (out.some((ev) => ev.body)) {
    await large.sink.keep(large.file);
    // Crash point: the file is kept and no row names it yet (the body sweep removes it).
    testHook("intake.after_body_file");
  }
  return out;
}

/** Keep a verified request our code could not classify: 202 quarantined, never a 5xx. */
async function quarantined(
  d: PipelineDeps,
  src: IntakeSource,
  req: HookRequest,
  url: string,
  headers: [string, string][],
  e: unknown,
): Promise<Reply> {
  const reason = quarantineReason(e);
  const allowed = new Set(src.quarantineHeaders);
  try {
    const q = await d.store.quarantine(
      {
        source: src.name,
        raw: req.body,
        headers: Object.fromEntries(headers.filter(([k]) => allowed.has(k))),
        authHeaders: src.authHeaders,
        url: storableUrl(url, src.secretParams),
        reason,
      },
      req.now,
    );
    d.backpressure.writeOk();
    testHook("intake.after_commit");

    d.metrics.quarantined1(src.name);
    d.log.warn("quarantined", {
      source: src.name,
      batch: q.batchId,
      event: q.eventId,
      reason: q.reason,
      bytes: req.body.length,
    });
    return evaluationReply({ kind: "quarantine", error: e });
  } catch (qe) {
    const failure = spoolFailure(qe) ?? "spool_full";
    return spoolRefused(d, src.name, failure, qe, req.body.length);
  }
}

/**
 * The spool could not take the write: 503, and the sender holds the event. Whatever
 * the free space says (a quota, inode exhaustion), the spool issue opens and alerts once.
 */
function spoolRefused(
  d: PipelineDeps,
  source: string,
  reason: "busy" | "spool_full",
  e: unknown,
  bytes: number,
): Reply {
  if (reason === "spool_full") d.backpressure.writeFailed(`the last write was refused (${errorClass(e)})`);
  d.metrics.rejected1(source, reason);
  d.faults.writes.record("enqueue", e, { source, bytes });
  return reason === "spool_full" ? SPOOL_FULL() : SPOOL_BUSY();
}

/** A handshake that offered the source's secret: kept (and answered) only while armed and unset. */
function learned(
  d: PipelineDeps,
  name: string,
  secret: string,
  answer: HookResponse,
  now: number,
  remote: string,
  armToken: string | null,
): Reply {
  // A learned secret is one file (a rotation's list is refused for it at load).
  const ref = d.config().sources[name]?.secrets?.secret;
  const outcome = keepLearnedSecret(Array.isArray(ref) ? undefined : ref, secret, now, armToken);
  switch (outcome) {
    case "learned":
      d.log.info("secret learned from the handshake; kept in the file secrets.secret names", { source: name, remote });
      return pluginReply(answer);
    case "same":
      d.log.info("handshake repeated with the secret already kept", { source: name, remote });
      return pluginReply(answer);
    case "not_armed":
      d.metrics.rejected1(name, "unverified");
      d.log.warn("unverified", { source: name, reason: "handshake refused: not armed (hookspool source arm)", remote });
      return emptyReply(403);
    case "wrong_arm":
      d.metrics.rejected1(name, "unverified");
      d.log.warn("unverified", {
        source: name,
        reason: "handshake refused: its URL does not carry the arm token (hookspool source arm prints the URL)",
        remote,
      });
      return emptyReply(403);
    case "taken":
      d.metrics.rejected1(name, "unverified");
      d.log.warn("unverified", {
        source: name,
        reason: "handshake refused: another secret is kept (remove the file and arm again to replace it)",
        remote,
      });
      return emptyReply(409);
    case "no_file":
      d.log.error("verify failed", {
        source: name,
        reason: "a learning source needs secrets.secret = { file = ... }",
        remote,
      });
      return emptyReply(503, { "Retry-After": "60" });
  }
}
