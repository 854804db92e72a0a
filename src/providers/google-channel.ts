// A Google push notification channel (the Calendar and Drive `watch` methods) as a source. A
// notification is an empty POST whose headers say everything: the channel id and the token set
// when the channel was made (compared with the instance's secret), the watched resource, its
// state, and a message number that grows per channel. The first message of a channel is a
// `sync` that only says the channel works: acknowledged, never queued.
//
// Headers: https://developers.google.com/workspace/calendar/api/guides/push (Receiving
// notifications: X-Goog-Channel-ID, X-Goog-Channel-Token, X-Goog-Channel-Expiration,
// X-Goog-Resource-ID, X-Goog-Resource-URI, X-Goog-Resource-State, X-Goog-Message-Number) and
// https://developers.google.com/workspace/drive/api/guides/push (the same, with X-Goog-Changed).
import { getText } from "../plugin/get-path.ts";
import { BadPayload, type HookRequest, type SourcePlugin } from "../plugin/types.ts";
import { staticTokenWhy } from "../plugin/verify.ts";

const H = {
  id: "X-Goog-Channel-ID",
  token: "X-Goog-Channel-Token",
  expiration: "X-Goog-Channel-Expiration",
  resourceId: "X-Goog-Resource-ID",
  resourceUri: "X-Goog-Resource-URI",
  state: "X-Goog-Resource-State",
  number: "X-Goog-Message-Number",
  changed: "X-Goog-Changed",
} as const;

export interface ChannelOptions {
  span: string;
  /** How often a watched resource is expected to change at least (seconds); the instance opts in. */
  expectEverySec?: number;
}

/** The notification as a payload: its headers, by name. */
function channelPayload(req: HookRequest): Record<string, string> {
  const out: Record<string, string> = {};
  const put = (k: string, h: string) => {
    const v = req.header(h);
    if (v !== null && v !== "") out[k] = v;
  };
  put("channel_id", H.id);
  put("channel_expiration", H.expiration);
  put("resource_id", H.resourceId);
  put("resource_uri", H.resourceUri);
  put("resource_state", H.state);
  put("message_number", H.number);
  put("changed", H.changed);
  return out;
}

export function googleChannelSource(o: ChannelOptions): SourcePlugin {
  return {
    secrets: ["channel_token"],
    authHeaders: [H.token],
    // What a replay of a quarantined notification needs to classify it again.
    classifyHeaders: [H.id, H.expiration, H.resourceId, H.resourceUri, H.state, H.number, H.changed],
    span: o.span,
    expectEverySec: o.expectEverySec ?? null,
    // Google retries a notification that got an error, with exponential backoff.
    senderRetries: true,
    verify: (req, secrets) => staticTokenWhy(req.header(H.token), secrets.get("channel_token")) ?? true,
    ignore: (req) => (req.header(H.state) === "sync" ? "sync" : null),
    payload: channelPayload,
    key(payload) {
      const id = getText(payload, "channel_id");
      if (!id) throw new BadPayload(`no ${H.id}`, "key_missing");
      return id;
    },
    // The message number grows per channel; a retry of one notification repeats it.
    dedupId: (payload) => {
      const id = getText(payload, "channel_id");
      const n = getText(payload, "message_number");
      return id && n ? `${id}:${n}` : null;
    },
    eventType: (payload) => getText(payload, "resource_state") ?? "",
  };
}
