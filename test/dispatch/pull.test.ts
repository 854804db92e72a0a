// A pull destination's batches on the dispatcher, on both backends: sealed by its tick as any
// batch is, never pushed (no attempt, no "unknown destination" retry), never taking a slot
// another destination's heads need. (Leases, acks and their expiry: test/intake/pull.test.ts.)
import { expect, setDefaultTimeout, test } from "bun:test";
import { batchIdOf, fakeDestination, rigOn } from "../helpers/dispatch.ts";
import { onBothWorlds } from "../helpers/world.ts";

setDefaultTimeout(30_000);

const CONFIG = `[sources.s]
action = "hermes:a"

[dispatch]
parallel = 1

[destinations."pull:laptop"]
token = { env = "PULL_TOKEN" }
`;

onBothWorlds((open) => {
  test("sealed, left for its consumers, and no slot of the tick spent on it", async () => {
    const a = fakeDestination("hermes:a", { maxInflight: 1 });
    const r = await rigOn(open, CONFIG, [a]);
    try {
      const pulled = [];
      // Older than the pushed batch, so a tick that pushed them would take them first.
      for (let i = 0; i < 3; i++) pulled.push(batchIdOf(await r.put(`p${i}`, "pull:laptop")));
      const pushed = batchIdOf(await r.put("k", "hermes:a"));
      await r.step();
      await r.step();
      for (const id of pulled) expect((await r.batch(id)).state).toBe("sealed");
      expect(await r.attempts(pulled[0])).toEqual([]);
      expect(a.calls.map((c) => c.batchId)).toEqual([pushed]);
      expect((await r.batch(pushed)).state).toBe("delivered");
    } finally {
      await r.close();
    }
  });
});
