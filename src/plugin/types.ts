// The plugin API a source (and later a bobbin) is written against. Config keys and JSON
// documents stay snake_case; plugin fields are camelCase.
import type { VerifyFailure } from "./verify.ts";

export type { VerifyFailure };

// ---------------------------------------------------------------------------------------------
// Requests and responses

/** One inbound request as a source plugin sees it. */
export interface HookRequest {
  readonly method: string;
  /** The path without the query string. */
  readonly path: string;
  /** Query parameters (first value of each). Never logged: tokens live here. */
  readonly query: Readonly<Record<string, string>>;
  /**
   * The query string exactly as received, without the "?" ("" when none): a signature over the URL covers its order.
   */
  readonly rawQuery: string;
  /** A header's value, case-insensitive; null when absent. */
  header(name: string): string | null;
  /** Every header, lower-cased names (for quarantine and the template source). */
  readonly headers: Readonly<Record<string, string>>;
  /** The body as received, at most the source's max_body_bytes. */
  readonly body: Uint8Array;
  /** The body as UTF-8 text; throws BadPayload when it is not valid UTF-8. */
  text(): string;
  /** The body as JSON, parsed once and cached; throws BadPayload. */
  json(): unknown;
  /** X-Hookspool-Route, set by the reverse proxy to keep provider-side URLs stable. */
  readonly routeHint: string | null;
  /** The peer's address (X-Forwarded-For only when the peer is loopback). */
  readonly remoteAddr: string;
  /** Unix seconds when the request arrived. */
  readonly now: number;
}

/** What a challenge answers with (a handshake). */
export interface HookResponse {
  status: number;
  body?: string | Uint8Array;
  headers?: Record<string, string>;
}

export function response(
  status: number,
  body: string | Uint8Array = "",
  headers: Record<string, string> = {},
): HookResponse {
  return { status, body, headers };
}

/** Secrets by name, resolved at access time and never cached. */
export interface Secrets {
  get(name: string): string;
}

// ---------------------------------------------------------------------------------------------
// Errors a plugin raises (typed, so a caller matches them with instanceof)

/**
 * Why a verified request from the sender could not be queued: the body is not JSON or not
 * UTF-8, the coalesce key is missing or longer than 512 bytes, or the plugin found the payload
 * unreadable for a reason of its own (bad_payload). Quarantined requests with one of these are
 * filed under the source (kind "source"), not as a config problem.
 */
export type SenderFault = "not_json" | "not_utf8" | "key_missing" | "key_too_long" | "meta_too_long" | "bad_payload";

/** The request's body cannot be understood: the request is quarantined, filed under the sender. */
export class BadPayload extends Error {
  override name = "BadPayload";
  constructor(
    message: string,
    readonly fault: SenderFault = "bad_payload",
  ) {
    super(message);
  }
}

/** A processor or destination asks to be tried again later. */
export class Retryable extends Error {
  override name = "Retryable";
}

/** A processor or destination says the batch can never succeed. */
export class Permanent extends Error {
  override name = "Permanent";
}

// ---------------------------------------------------------------------------------------------
// Sources

export type Attrs = Record<string, string | number | boolean>;

/**
 * What verify() answers: true when the request is verified; otherwise false, or better the
 * class of the failure (logged on the 401 line without any value). Only `true` verifies.
 */
export type Verdict = boolean | VerifyFailure;

/**
 * A source plugin: only verify, key and authHeaders are mandatory. Everything
 * else (spooling, dedup, coalescing, retries) is shared and has no per-source variant.
 */
export interface SourcePlugin {
  /** The default source name. */
  name?: string;
  /** Secret names the source needs (config supplies the references). */
  secrets?: readonly string[];
  /** Signature, token and authorization headers: never stored, refused from keepHeaders. */
  authHeaders: readonly string[];
  /** Query parameters that carry a secret (a push URL's ?token=): never stored with a request. */
  secretParams?: readonly string[];
  /** Headers stored with each event (and delivered in the document's event_meta). */
  keepHeaders?: readonly string[];
  /**
   * Headers ignore/payload/key/dedupId/eventType/version/attrs read besides keepHeaders: kept with a
   * quarantined request so a replay can classify it again. Never a credential.
   */
  classifyHeaders?: readonly string[];
  /** Default coalesce preset (config overrides). */
  span?: string;
  /** Optional liveness expectation. */
  expectEverySec?: number | null;
  /** Documented honesty: whether the sender retries a failed delivery. */
  senderRetries?: boolean;
  /** True only for a constant, secret-free handshake (Trello HEAD): challenge runs before verify. */
  challengeUnauthenticated?: boolean;
  /** Header that carries the event type on delivery (e.g. X-GitHub-Event). */
  eventHeader?: string;
  /** The settings a source table's `config` may give it (Plaid's env), handed to withConfig. */
  configKeys?: readonly string[];
  /** The plugin for these settings (called once per config load with the source's `config`). */
  withConfig?(config: Readonly<Record<string, unknown>>): SourcePlugin;

  verify(req: HookRequest, secrets: Secrets): Verdict | Promise<Verdict>;
  /** A response answers and stops (nothing is enqueued); null continues. Runs after verify. */
  challenge?(
    req: HookRequest,
    secrets: Secrets,
  ): HookResponse | null | undefined | Promise<HookResponse | null | undefined>;
  /**
   * A handshake on a request other than POST that authenticates itself (Meta's GET carries a
   * verify token, compared in constant time with a secret): runs before verify, with the
   * secrets. A response answers; null goes on, and a request other than POST then gets 405.
   */
  handshake?(
    req: HookRequest,
    secrets: Secrets,
  ): HookResponse | null | undefined | Promise<HookResponse | null | undefined>;
  /**
   * A handshake that teaches the secret on the wire (Asana's X-Hook-Secret, Notion's
   * verification_token): runs before verify, on a POST, with no secrets. When it recognizes the
   * handshake it returns the offered secret and the answer the sender needs; the intake keeps the
   * secret only while the operator has armed the source (`hookspool source arm`) and no other
   * secret is kept yet, and answers 403 or 409 otherwise.
   */
  learn?(req: HookRequest): { secret: string; response: HookResponse } | null;
  /**
   * The answer to a request that was queued (or was a duplicate), instead of hookspool's JSON
   * status: a sender that reads the body (Twilio's empty TwiML, Discord's deferred reply).
   */
  ack?: HookResponse;
  /**
   * Several events in one request (SendGrid's array, HubSpot's, Meta's entries): each element
   * is classified as an event of its own (key, dedup id, type), all queued in one transaction.
   */
  split?(payload: unknown, req: HookRequest): unknown[];
  /** A reason string means "ack with ignored, do not enqueue". */
  ignore?(req: HookRequest): string | null | undefined;
  /** The payload the destination receives; default: req.json() ({} for an empty body). */
  payload?(req: HookRequest): unknown;
  key(payload: unknown, req: HookRequest): string;
  dedupId?(payload: unknown, req: HookRequest): string | null | undefined;
  eventType?(payload: unknown, req: HookRequest): string;
  /**
   * The event's version by the provider's own clock (a number, numeric text or an RFC 3339
   * time; null: none): a batch orders its events by it, and a route's `stale` compares it with
   * the last version its key delivered (docs/receiving.md).
   */
  version?(payload: unknown, req: HookRequest): string | number | null | undefined;
  attrs?(payload: unknown, req: HookRequest): Attrs;
  /** Default destination; config's action overrides it. */
  action?: string | ((payload: unknown, req: HookRequest) => string);
}

/** Identity helper for type inference: `export default defineSource({...})`. */
export function defineSource<T extends SourcePlugin>(plugin: T): T {
  return plugin;
}
