// Under `run`, the intake wakes the dispatcher: an event whose batch is ready at once (the
// immediate span) is delivered in milliseconds, and one in a quiet window as that window ends,
// with an hour between the dispatcher's ticks.
import { expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { earliestReady } from "../../src/intake/pipeline.ts";
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

test("a batch in a quiet window is delivered as the window ends, not at the next tick", async () => {
  const home = tempDir("hookspool-wake-quiet-");
  writeFileSync(join(home, "token"), "kit-test-wake-token", { mode: 0o600 });
  const receiver = new Receiver<{ events: { n: number }[] }>({});
  writeFileSync(
    join(home, "config.toml"),
    `[intake]\nlisten = "127.0.0.1:0"\n\n[dispatch]\npoll_s = 3600\n\n[sources.s]\ntemplate = { scheme = "static-token", header = "X-Token", key = "topic" }\nsecrets.secret = { file = "${join(home, "token")}" }\nquiet_s = 0.4\nmax_s = 30\naction = "receiver"\n\n[destinations.receiver]\ntype = "http"\nurl = "http://127.0.0.1:${receiver.port}/in"\nallow_insecure = true\nunsigned = true\n`,
  );
  const hs = await startHookspool(home, ["run"]);
  try {
    const port = await hs.port();
    const sent = Date.now();
    const res = await fetch(`http://127.0.0.1:${port}/hooks/s`, { method: "POST", body: JSON.stringify({ topic: "t", n: 7 }), headers: { "Content-Type": "application/json", "X-Token": "kit-test-wake-token" } });
    expect(res.status).toBe(202);
    await waitFor("the delivery", () => receiver.accepted().length === 1, 10_000);
    // Not before the quiet window ended (the batch was open until then).
    expect(Date.now() - sent).toBeGreaterThanOrEqual(400);
  } finally {
    hs.kill("SIGTERM");
    await hs.exited;
    receiver.stop();
  }
  expect(receiver.accepted()[0].doc.events.map((e) => e.n)).toEqual([7]);
}, 20_000);

test("earliestReady: now when sealed or windowless, else the shortest window of the copies", () => {
  const w = (quiet_s: number, max_s: number) => ({ quiet_s, max_s, max_events: 10, max_bytes: 1000 });
  const copy = (quiet_s: number, max_s: number, tee = false) => ({ route: "r", destination: "d", tee, window: w(quiet_s, max_s) });
  const placed = (sealed: boolean, tee = false) => ({ eventId: 1, batchId: 1, route: "r", destination: "d", tee, sealed });
  expect(earliestReady([placed(false)], [copy(5, 60)], 100)).toBe(105);
  expect(earliestReady([placed(false)], [copy(90, 60)], 100)).toBe(160);
  expect(earliestReady([placed(true)], [copy(5, 60)], 100)).toBe(100);
  expect(earliestReady([placed(false)], [copy(0, 60)], 100)).toBe(100);
  expect(earliestReady([placed(false), placed(false, true)], [copy(5, 60), copy(2, 60, true)], 100)).toBe(102);
});
