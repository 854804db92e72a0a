// google.drive: the notifications of a Drive changes.watch channel. Core's Google channel source
// does all of it (src/providers/google-channel.ts): X-Goog-Channel-Token must equal the secret
// channel_token (constant time); the `sync` message that opens a channel is answered 200
// ignored and never queued; the payload is the notification's X-Goog-* headers (the changes
// notification's body is only {"kind": "drive#changes"}); one batch per channel
// (X-Goog-Channel-ID); the dedup id is the channel id and X-Goog-Message-Number; the event type
// is X-Goog-Resource-State, "change" for the changes resource.
//
// The batch only says that something changed: the processor asks changes.list what.
// Two days without a notification is what `expect = true` reports (README.md, "The sweep").
import { googleChannelSource } from "../../../src/providers/google-channel.ts";

export default googleChannelSource({ span: "sync", expectEverySec: 172800 });
