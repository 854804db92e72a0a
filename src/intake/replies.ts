// What the intake answers, in one place: the intake sends these replies, and `hookspool source
// test` shows the same ones for a capture. A sender learns only the status and, for a queued or
// refused event, one word; never why a signature failed.
import type { HookResponse } from "../plugin/types.ts";
import type { Evaluation } from "./evaluate.ts";

export interface Reply {
  status: number;
  body: string | Uint8Array;
  headers: Record<string, string>;
}

const JSON_TYPE = { "Content-Type": "application/json" };

/** A JSON {"status": word} reply. */
export const statusReply = (word: string, code: number): Reply => ({
  status: code,
  body: JSON.stringify({ status: word }),
  headers: JSON_TYPE,
});
/** A reply with no body. */
export const emptyReply = (code: number, headers: Record<string, string> = {}): Reply => ({
  status: code,
  body: "",
  headers,
});

/** The body is over the source's cap (by Content-Length, or by the bytes read). */
export const TOO_LARGE = (): Reply => emptyReply(413);
/** No Content-Length, or chunked: the cap cannot be checked before reading. */
export const LENGTH_REQUIRED = (): Reply => emptyReply(411);
/**
 * Content-Length given more than once (Bun joins the copies): the framing is ambiguous. RFC 9112 6.3 allows refusing
 * it.
 */
export const BAD_LENGTH = (): Reply => statusReply("bad_content_length", 400);
/** The spool cannot take a write: the sender keeps the event and comes back. */
export const SPOOL_FULL = (): Reply => emptyReply(503, { "Retry-After": "60" });
/**
 * The spool was busy past busy_timeout_s (another process held SQLite's write lock; PostgreSQL
 * lost its connection or a deadlock): try again soon, unlike a full spool's minute.
 */
export const SPOOL_BUSY = (): Reply => emptyReply(503, { "Retry-After": "1" });

/**
 * The reply for what the plugin steps decided. A classified request is answered 202 queued
 * only once its copies are committed (a duplicate or a replay answers 200 instead), and a
 * quarantined one once its row is; the intake decides those after the write.
 */
export function evaluationReply(ev: Evaluation): Reply {
  switch (ev.kind) {
    case "answered":
      return pluginReply(ev.response);
    case "learn":
      // What the sender gets once the intake kept the secret (it decides that).
      return pluginReply(ev.response);
    case "method":
      return emptyReply(405, { Allow: "POST" });
    case "verify_error":
      // Not verified, so not quarantined: our side failed (an unreadable secret, a key server
      // down), so the sender is asked to come back rather than told it signed wrongly.
      return emptyReply(503, { "Retry-After": "60" });
    case "unverified":
      return emptyReply(401);
    case "ignored":
      return statusReply("ignored", 200);
    case "quarantine":
      return statusReply("quarantined", 202);
    case "classified":
      return statusReply("queued", 202);
  }
}

export function pluginReply(r: HookResponse): Reply {
  return { status: r.status, body: r.body ?? "", headers: r.headers ?? {} };
}
