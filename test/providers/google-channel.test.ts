// A Google push channel as a source, through the source kit's matrix: the token header is the
// secret, a `sync` is acknowledged and never queued, the message number dedups per channel, a
// notification without a channel id is quarantined.
import { expect, test } from "bun:test";
import { join } from "node:path";
import { runSourceKit } from "../../src/check/kit/source-kit.ts";
import { T0 } from "../helpers/spool.ts";
import { tempDir } from "../helpers/tmp.ts";
import { writeFileSync } from "node:fs";

const TOKEN = "kit-test-channel-token";
const headers = (over: Record<string, string> = {}): [string, string][] =>
  Object.entries({
    "X-Goog-Channel-ID": "chan-1",
    "X-Goog-Channel-Token": TOKEN,
    "X-Goog-Channel-Expiration": "Tue, 08 Dec 2026 12:00:00 GMT",
    "X-Goog-Resource-ID": "res-1",
    "X-Goog-Resource-URI": "https://www.googleapis.com/calendar/v3/calendars/primary/events",
    "X-Goog-Resource-State": "exists",
    "X-Goog-Message-Number": "7",
    ...over,
  });
const empty = new Uint8Array();

test("the source kit's matrix passes on a Google channel source", async () => {
  const dir = tempDir("hookspool-channel-");
  const module = join(dir, "channel.ts");
  writeFileSync(
    module,
    `import { googleChannelSource } from ` +
      `${JSON.stringify(join(import.meta.dir, "..", "..", "src", "providers", "google-channel.ts"))};\n` +
      `export default googleChannelSource({ span: "calendar" });\n`,
  );
  const run = await runSourceKit({
    source: "cal",
    config:
      `[sources.cal]\nmodule = "${module}"\nsecrets.channel_token = { file = "{{secret:tok}}" ` +
      `}\naction = "hermes:cal"\n`,
    secrets: { tok: TOKEN },
    now: T0,
    accepted: { method: "POST", url: "/hooks/cal", headers: headers(), body: empty },
    sign: (_body, _now, id) => ({
      headers: [
        ["X-Goog-Channel-Token", TOKEN],
        ["X-Goog-Message-Number", String(1000 + id.length)],
      ],
    }),
    authHeaders: ["X-Goog-Channel-Token"],
    bodySigned: false,
    timestamped: false,
    dedup: true,
    answered: [
      {
        request: {
          method: "POST",
          url: "/hooks/cal",
          headers: headers({ "X-Goog-Resource-State": "sync", "X-Goog-Message-Number": "1" }),
          body: empty,
        },
        check: (r) => (r.text === '{"status":"ignored"}' ? null : `answered ${r.status} ${r.text}`),
      },
    ],
    broken: {
      method: "POST",
      url: "/hooks/cal",
      headers: headers().filter(([k]) => k !== "X-Goog-Channel-ID"),
      body: empty,
    },
    secretSentinels: [TOKEN],
  });
  expect(run.cases.filter((c) => c.outcome === "fail")).toEqual([]);
  expect(run.stored).toMatchObject({ key: "chan-1", event_type: "exists", dedup_id: "chan-1:7" });
  expect(JSON.parse(run.stored?.payload ?? "{}")).toEqual({
    channel_id: "chan-1",
    channel_expiration: "Tue, 08 Dec 2026 12:00:00 GMT",
    resource_id: "res-1",
    resource_uri: "https://www.googleapis.com/calendar/v3/calendars/primary/events",
    resource_state: "exists",
    message_number: "7",
  });
});
