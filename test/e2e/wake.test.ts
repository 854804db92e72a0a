// Under `run`, the intake wakes the dispatcher: an event whose batch is ready at once (the
// immediate span) is delivered in milliseconds, with an hour between the dispatcher's ticks.
import { expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { startHookspool, waitFor } from "../helpers/proc.ts";
import { Receiver } from "../helpers/receiver.ts";
import { tempDir } from "../helpers/tmp.ts";

test("a ready batch is delivered without waiting for the next tick", async () => {
  const home = tempDir("hookspool-wake-");
  writeFileSync(join(home, "token"), "kit-test-wake-token", { mode: 0o600 });
  const receiver = new Receiver<{ events: { n: number }[] }>({});
  writeFileSync(
    join(home, "config.toml"),
    `[intake]\nlisten = "127.0.0.1:0"\n\n[dispatch]\npoll_s = 3600\n\n[sources.s]\ntemplate = { scheme = "static-token", header = "X-Token", key = "topic" }\nsecrets.secret = { file = "${join(home, "token")}" }\nspan = "immediate"\naction = "receiver"\n\n[destinations.receiver]\ntype = "http"\nurl = "http://127.0.0.1:${receiver.port}/in"\nallow_insecure = true\nunsigned = true\n`,
  );
  const hs = await startHookspool(home, ["run"]);
  try {
    const port = await hs.port();
    for (const n of [1, 2, 3]) {
      const res = await fetch(`http://127.0.0.1:${port}/hooks/s`, { method: "POST", body: JSON.stringify({ topic: `t${n}`, n }), headers: { "Content-Type": "application/json", "X-Token": "kit-test-wake-token" } });
      expect(res.status).toBe(202);
    }
    await waitFor("three deliveries", () => receiver.accepted().length === 3, 5_000);
  } finally {
    hs.kill("SIGTERM");
    await hs.exited;
    receiver.stop();
  }
  expect(receiver.accepted().flatMap((d) => d.doc.events.map((e) => e.n)).sort()).toEqual([1, 2, 3]);
});
