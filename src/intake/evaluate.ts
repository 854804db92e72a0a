// What the plugin steps decide about a request, before anything is written: the
// unauthenticated handshake, verify, the challenge, ignore, classification and routing. The
// intake runs it on every request; `hookspool source test` runs it offline on a capture, and a
// replay of a quarantined request runs the steps after verify.
import { newEvent } from "../config/events.ts";
import { eventCopies, type IntakeSource, NO_SECRETS, type SecretPosition } from "../config/sources.ts";
import type { Config } from "../config/types.ts";
import { isHookspoolError } from "../errors.ts";
import { versionNumber } from "../plugin/event-version.ts";
import { bodyShape } from "../plugin/hook-request.ts";
import { BadPayload, type HookRequest, type HookResponse, type Secrets, type SourcePlugin } from "../plugin/types.ts";
import { eventMetaProblem, MAX_KEY_BYTES, type NewEvent } from "../store/enqueue.ts";

const utf8 = new TextEncoder();

/** A split request whose array is empty: nothing to queue, and nothing wrong. */
class EmptyRequest extends Error {}
const VERIFY_FAILURES: ReadonlySet<string> = new Set(["missing_signature", "malformed", "mismatch", "stale", "future"]);

/** An exception's class name: the only part of a plugin error that is logged or stored. */
export function pluginErrorClass(e: unknown): string {
  if (e instanceof Error) return e.name && e.name !== "Error" ? e.name : (e.constructor?.name ?? "Error");
  return typeof e;
}

/** Which secret of a rotation verified a request: its position (0, the newest) and the instant it stops. */
export interface VerifiedWith {
  position: number;
  until: number | null;
  /** How many positions were in force (1: no rotation under way). */
  of: number;
}

/** What the plugin steps decided, before anything is written (and, past verify, with which secret). */
export type Evaluation = Decision & { verifiedWith?: VerifiedWith };

type Decision =
  | { kind: "answered"; response: HookResponse; authenticated: boolean }
  /** A handshake that offers the secret (Asana, Notion): the intake keeps it only while armed. */
  | { kind: "learn"; secret: string; response: HookResponse }
  | { kind: "method" }
  | { kind: "verify_error"; error: string }
  | { kind: "unverified"; reason: string }
  | { kind: "ignored"; reason: string }
  | { kind: "quarantine"; error: unknown }
  | ({ kind: "classified" } & Classified);

export interface Classified {
  /** One event, or one per element when the source splits the request (all queued together). */
  events: NewEvent[];
  /** The first event's route attributes. */
  attrs: Record<string, unknown>;
}

/**
 * Steps 2-6 for a request that passed the body cap: the unauthenticated handshake, verify, the
 * challenge, ignore, classification and route resolution. Writes nothing, so `hookspool source
 * test` runs exactly this offline.
 */
export async function evaluate(config: Config, src: IntakeSource, req: HookRequest): Promise<Evaluation> {
  const { plugin } = src;
  // A constant, secret-free handshake (Trello's HEAD) may answer before verify.
  if (plugin.challengeUnauthenticated && plugin.challenge) {
    try {
      const r = await plugin.challenge(req, NO_SECRETS);
      if (r) return { kind: "answered", response: r, authenticated: false };
    } catch (e) {
      // Nothing is verified yet, so nothing can be quarantined: treat it as our failure.
      return { kind: "verify_error", error: pluginErrorClass(e) };
    }
  }
  // A handshake on another method that authenticates itself (Meta's GET and its verify token).
  if (req.method !== "POST" && plugin.handshake) {
    try {
      // During a rotation the provider may still hold either secret: the answer one accepts wins.
      let first: HookResponse | null = null;
      let accepted: HookResponse | null = null;
      for (const position of src.secretsAt(req.now)) {
        const r = await plugin.handshake(req, position.secrets);
        if (r) first ??= r;
        if (r && r.status < 300) accepted ??= r;
      }
      const r = accepted ?? first;
      if (r) return { kind: "answered", response: r, authenticated: r.status < 300 };
    } catch (e) {
      return { kind: "verify_error", error: pluginErrorClass(e) };
    }
  }
  if (req.method !== "POST") return { kind: "method" };
  // A handshake that teaches the secret: nothing to verify it with yet.
  if (plugin.learn) {
    try {
      const l = plugin.learn(req);
      if (l) return { kind: "learn", secret: l.secret, response: l.response };
    } catch (e) {
      return { kind: "verify_error", error: pluginErrorClass(e) };
    }
  }
  // Every secret of a rotation is tried, each check constant-time and all of them every time,
  // so how long verify takes does not say which one matched; the newest that verifies counts.
  const positions = src.secretsAt(req.now);
  let verified: SecretPosition | null = null;
  let reason: string | null = null;
  let error: unknown = null;
  for (const position of positions) {
    try {
      const verdict = await plugin.verify(req, position.secrets);
      // Only true verifies; a plugin that says why not names a class, one that says false does not.
      if (verdict === true) verified ??= position;
      else reason ??= typeof verdict === "string" && VERIFY_FAILURES.has(verdict) ? verdict : "rejected";
    } catch (e) {
      error ??= e;
    }
  }
  if (verified === null) {
    // A secret that cannot be read is our fault, whatever the others said.
    if (error !== null) return { kind: "verify_error", error: pluginErrorClass(error) };
    return { kind: "unverified", reason: reason ?? "rejected" };
  }
  const after = await afterVerify(config, src, req, verified.secrets);
  return { ...after, verifiedWith: { position: verified.position, until: verified.until, of: positions.length } };
}

/**
 * The steps after verify: the challenge, ignore, classification and route resolution. A replay
 * of a quarantined request runs exactly these (it was verified when it arrived, and its
 * timestamp may be past the tolerance now).
 */
export async function afterVerify(
  config: Config,
  src: IntakeSource,
  req: HookRequest,
  secrets: Secrets = src.secrets,
): Promise<Exclude<Decision, { kind: "method" | "verify_error" | "unverified" }>> {
  const { plugin } = src;
  try {
    // After verify: a handshake answer derived from the secret is no signing oracle now; it is
    // made with the secret that verified the request.
    if (plugin.challenge && !plugin.challengeUnauthenticated) {
      const r = await plugin.challenge(req, secrets);
      if (r) return { kind: "answered", response: r, authenticated: true };
    }
    const ignored = plugin.ignore?.(req);
    if (ignored) return { kind: "ignored", reason: String(ignored) };
    return { kind: "classified", ...classify(config, src, req) };
  } catch (e) {
    if (e instanceof EmptyRequest) return { kind: "ignored", reason: "empty" };
    return { kind: "quarantine", error: e };
  }
}

/** Steps 4-6 for a verified request: what the plugin says, then where config sends it. */
export function classify(config: Config, src: IntakeSource, req: HookRequest): Classified {
  const plugin: SourcePlugin = src.plugin;
  let payload: unknown;
  let payloadText: string;
  const shape = bodyShape(req);
  // A body kept in a file is not held here as bytes too: the intake takes its raw copy from the
  // file, when the stored payload is not the body itself.
  const raw = shape.inFile ? null : req.body;
  if (plugin.payload) {
    payload = plugin.payload(req);
    const text = JSON.stringify(payload);
    if (text === undefined) throw new BadPayload("payload() returned nothing");
    payloadText = text;
  } else if (shape.size === 0) {
    payload = {};
    payloadText = "{}";
  } else {
    payload = req.json();
    // The body itself, byte for byte: an unwrap delivery sends it on as the sender wrote it, a
    // byte-order mark included (req.text() reads past one; a batch document leaves it out).
    payloadText = shape.bom() ? `\uFEFF${req.text()}` : req.text();
  }
  if (!plugin.split) {
    const one = classifyOne(config, src, req, payload, payloadText, raw);
    return { events: [one.event], attrs: one.attrs };
  }
  const elements = plugin.split(payload, req);
  if (!Array.isArray(elements)) throw new BadPayload("the request holds no array of events");
  // A request with no event at all (Asana's heartbeat, {"events": []}) is acked and not queued.
  if (elements.length === 0) throw new EmptyRequest();
  // Each element is an event of its own; the request's raw body is kept once, with the first.
  const built = elements.map((element, i) => {
    const text = JSON.stringify(element);
    if (text === undefined) throw new BadPayload(`element ${i} is not JSON`);
    return classifyOne(config, src, req, element, text, i === 0 ? raw : NO_BODY);
  });
  return { events: built.map((b) => b.event), attrs: built[0].attrs };
}

const NO_BODY = new Uint8Array();

/** One event: its key, dedup id and type from the plugin, its copies from config's routes. */
function classifyOne(
  config: Config,
  src: IntakeSource,
  req: HookRequest,
  payload: unknown,
  payloadText: string,
  body: Uint8Array | null,
): { event: NewEvent; attrs: Record<string, unknown> } {
  const plugin: SourcePlugin = src.plugin;
  const key = plugin.key(payload, req);
  // A key() that returns no string is the plugin's bug; an empty or oversized one is the payload's.
  if (typeof key !== "string") throw new TypeError("key() did not return a string");
  if (key === "") throw new BadPayload("the coalesce key is empty", "key_missing");
  if (utf8.encode(key).length > MAX_KEY_BYTES)
    throw new BadPayload(`the coalesce key is over ${MAX_KEY_BYTES} bytes`, "key_too_long");
  const dedupId = plugin.dedupId?.(payload, req) ?? null;
  const eventType = plugin.eventType?.(payload, req) ?? "";
  // The provider's clock for it: a number, or null when the plugin reads none (or nothing usable).
  const version = versionNumber(plugin.version?.(payload, req) ?? null);
  const { copies, attrs } = eventCopies(config, src.name, src, { payload, req, eventType: String(eventType) });
  const kept: Record<string, string> = {};
  for (const h of src.keepHeaders) {
    const v = req.header(h);
    if (v !== null) kept[h] = v;
  }
  const facts = {
    source: src.name,
    key,
    eventType: String(eventType),
    dedupId: dedupId === null ? null : String(dedupId),
    payload: payloadText,
    body,
    headers: kept,
    payloadParsed: true as const,
    version,
  };
  // What event_meta carries is bounded, so a batch document's size is too (check counts on it).
  const tooLong = eventMetaProblem(facts);
  if (tooLong) throw new BadPayload(tooLong, "meta_too_long");
  return { attrs, event: newEvent(config, facts, copies) };
}

/**
 * Why a verified request could not be queued, as a short fixed phrase: the sender's fault
 * (BadPayload says which), a route without a destination, or the plugin's own error (only its
 * class name, never its message, is kept).
 */
export function quarantineReason(e: unknown): string {
  if (e instanceof BadPayload) return e.fault;
  if (isHookspoolError(e, "E_CONFIG")) return "no_destination";
  return `plugin_error:${pluginErrorClass(e)}`;
}
