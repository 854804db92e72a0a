// google.gmail: Gmail's push notifications, as a Cloud Pub/Sub push subscription posts them. A
// code source, because the template cannot decode message.data: the notification itself is a
// base64 JSON object inside Pub/Sub's wrapped message.
//
// - A push subscription cannot sign. Its endpoint URL carries the instance's push token as the
//   query parameter `token`, compared in constant time with the secret push_token. The intake
//   never logs a query string, and a quarantined request's stored URL leaves out every
//   parameter whose name looks like a credential (`token` among them).
// - The body is {"message": {"data": <base64 of {"emailAddress", "historyId"}>, "messageId",
//   "publishTime", ...}, "subscription"}; Pub/Sub also sends message_id and publish_time.
// - The payload is the decoded notification: {emailAddress, historyId, messageId, publishTime}.
//   A body whose data does not decode to a JSON object with an emailAddress is quarantined
//   (bad_payload): it was verified, so it is kept, never refused.
// - One batch per mailbox (the address, lower-cased); the dedup id is Pub/Sub's messageId, which
//   a redelivery of the same message repeats.
import { Buffer } from "node:buffer";
import { BadPayload, defineSource } from "../../../src/plugin/types.ts";
import { staticTokenWhy } from "../../../src/plugin/verify.ts";

/** The notification as the bobbin stores it. */
export interface GmailNotification {
  emailAddress: string;
  /** The mailbox's history id when Gmail sent it (Gmail sends a number or a string); null when absent. */
  historyId: string | null;
  /** Pub/Sub's id of the message: the same on every redelivery. */
  messageId: string | null;
  publishTime: string | null;
}

export const EVENT_TYPE = "gmail.notification";
/** base64 or base64url, with or without padding. */
const BASE64 = /^[A-Za-z0-9+/_-]+={0,2}$/;
/** Enough of an address to be one: no spaces, one @ with something on both sides. */
const ADDRESS = /^[^\s@<>",;]+@[^\s@<>",;]+$/;

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);
const text = (v: unknown): string | null => (typeof v === "string" && v !== "" ? v : null);

/** Pub/Sub's wrapped push body as a notification; BadPayload (bad_payload) when it is not one. */
export function decodePush(body: unknown): GmailNotification {
  const message = isObject(body) ? body.message : undefined;
  if (!isObject(message)) throw new BadPayload("no message object: not a Pub/Sub push", "bad_payload");
  const data = message.data;
  if (typeof data !== "string" || !BASE64.test(data)) throw new BadPayload("message.data is not base64", "bad_payload");
  let decoded: unknown;
  try {
    decoded = JSON.parse(Buffer.from(data, "base64").toString("utf8"));
  } catch {
    throw new BadPayload("message.data is not base64 JSON", "bad_payload");
  }
  if (!isObject(decoded)) throw new BadPayload("message.data is not a JSON object", "bad_payload");
  const address = decoded.emailAddress;
  if (typeof address !== "string" || !ADDRESS.test(address.trim()))
    throw new BadPayload("message.data has no emailAddress", "bad_payload");
  const history = decoded.historyId;
  return {
    emailAddress: address.trim(),
    historyId: typeof history === "number" && Number.isSafeInteger(history) ? String(history) : text(history),
    messageId: text(message.messageId) ?? text(message.message_id),
    publishTime: text(message.publishTime) ?? text(message.publish_time),
  };
}

export default defineSource({
  secrets: ["push_token"],
  // The token is in the query string, not a header: never stored with a request.
  authHeaders: [],
  secretParams: ["token"],
  span: "mail",
  // Four days: the daily re-watch makes Gmail push at least once a day (README.md).
  expectEverySec: 345_600,
  // Pub/Sub pushes a message again until it gets a success answer.
  senderRetries: true,

  verify: (req, secrets) => staticTokenWhy(req.query.token ?? null, secrets.get("push_token")) ?? true,

  payload: (req) => decodePush(req.json()),

  key(payload) {
    const address = (payload as GmailNotification).emailAddress;
    if (typeof address !== "string" || address === "") throw new BadPayload("no emailAddress", "bad_payload");
    return address.toLowerCase();
  },

  dedupId: (payload) => (payload as GmailNotification).messageId,

  eventType: () => EVENT_TYPE,
});
