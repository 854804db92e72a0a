// zoom.meetings: the webhooks of a Zoom app's event subscription (meeting.started, meeting.ended,
// participants joining and leaving, ...). A code source, because two things are beyond the
// template: the signature covers a timestamp sent in its own header, and Zoom's
// endpoint.url_validation handshake must be answered with a token derived from the secret.
//
// - x-zm-signature is "v0=" and the hex HMAC-SHA256, under the app's Secret Token, of
//   "v0:<x-zm-request-timestamp>:<raw body>"; the timestamp must be within 300 s of now, either way.
// - endpoint.url_validation is answered only after verify (challenge runs after it): 200 with
//   {"plainToken", "encryptedToken": hex HMAC-SHA256(webhook_secret, plainToken)}, never queued.
//   A request that fails verify gets the intake's 401 with an empty body, so no token is ever
//   derived for a plainToken an unverified sender chose.
// - One batch per meeting (payload.object.id); the event type is `event`.
import { getPath, getText } from "../../../src/plugin/get-path.ts";
import { type Attrs, BadPayload, defineSource, response } from "../../../src/plugin/types.ts";
import { hmac, signedTimestampWhy } from "../../../src/plugin/verify.ts";

const SIGNATURE = "x-zm-signature";
const TIMESTAMP = "x-zm-request-timestamp";

export default defineSource({
  secrets: ["webhook_secret"],
  authHeaders: [SIGNATURE],
  // The time Zoom signed at: no credential, and it says when Zoom sent this attempt.
  keepHeaders: [TIMESTAMP],
  span: "meeting",
  // Zoom sends a delivery that got no 200/204 within 3 s again, 3 times (README.md).
  senderRetries: true,

  verify(req, secrets) {
    const ts = req.header(TIMESTAMP);
    return (
      signedTimestampWhy({
        signature: req.header(SIGNATURE),
        prefix: "v0=",
        timestamp: ts,
        secret: secrets.get("webhook_secret"),
        // The timestamp exactly as sent, then the body's bytes as received.
        message: [`v0:${ts ?? ""}:`, req.body],
        now: req.now,
      }) ?? true
    );
  },

  challenge(req, secrets) {
    // An empty or non-JSON body is not a handshake: classification quarantines it (not_json).
    if (req.body.length === 0) return null;
    const p = req.json();
    if (getText(p, "event") !== "endpoint.url_validation") return null;
    const plainToken = getPath(p, "payload.plainToken");
    if (typeof plainToken !== "string" || plainToken === "")
      throw new BadPayload("endpoint.url_validation without payload.plainToken", "bad_payload");
    const body = JSON.stringify({ plainToken, encryptedToken: hmac(secrets.get("webhook_secret"), plainToken) });
    return response(200, body, { "Content-Type": "application/json" });
  },

  key(payload) {
    const id = getText(payload, "payload.object.id");
    if (!id) throw new BadPayload("no payload.object.id (the meeting id)", "key_missing");
    return id;
  },

  // Zoom sends no delivery id. event_ts (the event's time in milliseconds) and the meeting id are
  // in the body, which a retry repeats; the event name and, for participant events, the
  // participant keep two events of one meeting in the same millisecond apart.
  dedupId(payload) {
    const ts = getText(payload, "event_ts");
    const id = getText(payload, "payload.object.id");
    if (!ts || !id) return null;
    const participant =
      getText(payload, "payload.object.participant.participant_uuid") ??
      getText(payload, "payload.object.participant.user_id") ??
      getText(payload, "payload.object.participant.id");
    return [ts, id, getText(payload, "event") ?? "", ...(participant ? [participant] : [])].join(":");
  },

  eventType: (payload) => getText(payload, "event") ?? "",

  attrs(payload): Attrs {
    const account = getText(payload, "payload.account_id");
    return account ? { account } : {};
  },
});
