// A poll bobbin end to end through a real `hookspool run`: the dispatcher's clock ticks, the tick
// reaches the poller through the processor runtime, and its items are delivered as outputs.
import { expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { manifestText, writeBobbin } from "../helpers/bobbins.ts";
import { startHookspool, waitFor } from "../helpers/proc.ts";
import { Receiver } from "../helpers/receiver.ts";
import { tempDir } from "../helpers/tmp.ts";

const POLLER = `import { definePoller } from "hookspool/plugin";

export default definePoller({
  poll(batch, ctx) {
    const seen = ctx.loadState("ticks", 0) + 1;
    ctx.saveState("ticks", seen);
    return [{ event_type: "filing", tick: (batch.events[0] as { tick: number }).tick, seen }];
  },
});
`;

test("the clock ticks on its own, the poller's items arrive as outputs, its state carries over", async () => {
  const home = tempDir("hookspool-poll-");
  const root = join(home, "bobbins-private");
  const manifest = manifestText(
    "acme.feed",
    '\n[poll]\nevery_s = 60\njitter_s = 0\nmodule = "poller"\n\n[outputs.filing]\ndescription = "a new filing"\n',
  )
    .replace(/\[source\][\s\S]*?\n\n/, "")
    .replace(/\[secrets\.secret\]\ndescription = "the signing secret"\n\n/, "")
    .replace(/\[outputs\."\*"\]\ndescription = "every accepted event"\n/, "");
  writeBobbin(root, "acme/feed", manifest, { "poller.ts": POLLER });
  const receiver = new Receiver<{ route: string; events: { tick: number; seen: number }[] }>({});
  writeFileSync(
    join(home, "config.toml"),
    `[spool]\nbobbin_path = ["${root}"]\n\n[intake]\nlisten = "127.0.0.1:0"\n\n[dispatch]\npoll_s = ` +
      `0.05\nheartbeat_s = 1\n\n[bobbins.feed]\nbobbin = "acme.feed"\noutputs = { filing = "receiver" }\n` +
      `\n[destinations.receiver]\ntype = "http"\nurl = "http://127.0.0.1:${receiver.port}/in"\n` +
      `allow_insecure = true\nunsigned = true\ntimeout_s = 5\n`,
  );
  const hs = await startHookspool(home, ["run"]);
  try {
    const port = await hs.port();
    await waitFor("the first tick's output", () => receiver.accepted().length >= 1, 15_000);
    // A poll source takes no requests: it has no URL.
    expect((await fetch(`http://127.0.0.1:${port}/hooks/feed`, { method: "POST", body: "{}" })).status).toBe(404);
  } finally {
    hs.kill("SIGTERM");
    await hs.exited;
    receiver.stop();
  }
  const [first] = receiver.accepted();
  expect(first?.doc.route).toBe("feed-filing");
  expect(first?.doc.events.map((e) => e.seen)).toEqual([1]);
}, 30_000);
