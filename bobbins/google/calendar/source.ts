// google.calendar: a Google Calendar watch channel (events.watch) as a source. Core's Google
// channel source does all of it (src/providers/google-channel.ts): X-Goog-Channel-Token must be
// the instance's secret `channel_token`; the channel's first message (X-Goog-Resource-State:
// sync) is answered 200 ignored and never queued; one batch per channel (X-Goog-Channel-ID);
// the dedup id is the channel id and X-Goog-Message-Number, which a retry repeats; the payload
// is the X-Goog-* headers (the body is empty). What changed is asked by the processor.
import { googleChannelSource } from "../../../src/providers/google-channel.ts";

export default googleChannelSource({ span: "calendar", expectEverySec: 172800 });
