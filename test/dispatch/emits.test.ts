// A script's emits are routed exactly as the intake routes a request of the same source: the
// plugin's attrs, action and span count, and an emit's destination is a group of its own. The
// plugin's event header reaches the destination too. The dispatcher's cases run on both backends.
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { join } from "node:path";
import { parseConfig } from "../../src/config/load.ts";
import { outcome } from "../../src/delivery.ts";
import { resolveEmit } from "../../src/dispatch/emits.ts";
import { batchIdOf, fakeDestination, ok, rigOn } from "../helpers/dispatch.ts";
import { copy, ev } from "../helpers/spool.ts";
import { onBothWorlds } from "../helpers/world.ts";

setDefaultTimeout(30_000);

const MODULE = join(import.meta.dir, "..", "fixtures", "routed.ts");
const CONFIG = `[sources.s]
action = "hermes:emitter"

[sources.plug]
module = "${MODULE}"

[[routes]]
name = "reds"
source = "plug"
match = { color = "red" }
destination = "hermes:red"
`;

function emitting(emits: object[]) {
  const d = fakeDestination("hermes:emitter", { type: "script" });
  d.answer = () => outcome({ kind: "ok", reason: "exit 0", status: 0, emits: emits as never });
  return d;
}

onBothWorlds((open) => {
  describe("emits route like requests", () => {
    test("the plugin's action and span for the implicit route; its attrs for a config route", async () => {
      const e = emitting([
        { source: "plug", key: "a", event_type: "note", payload: { k: "a", color: "blue" } },
        { source: "plug", key: "b", event_type: "note", payload: { k: "b", color: "red" } },
      ]);
      const r = await rigOn(open, CONFIG, [e, fakeDestination("hermes:plugin-default"), fakeDestination("hermes:red")]);
      const id = batchIdOf(await r.put("k", "hermes:emitter"));
      await r.step();
      expect((await r.batch(id)).state).toBe("delivered");
      const made = await r.world.rows.all(
        "SELECT route, destination, key, quiet_s, max_s FROM batches WHERE source = 'plug' ORDER BY id",
      );
      // span "mail" (30 s quiet, 120 s at most) comes from the plugin, as it would for a request.
      expect(made).toEqual([
        { route: "plug", destination: "hermes:plugin-default", key: "a", quiet_s: 30, max_s: 120 },
        { route: "reds", destination: "hermes:red", key: "b", quiet_s: 30, max_s: 120 },
      ]);
    });

    test("an emit's destination is a group of its own; it never joins the route's open batch", async () => {
      const e = emitting([
        { source: "plug", key: "a", event_type: "note", destination: "hermes:red", payload: { k: "a", color: "blue" } },
      ]);
      const r = await rigOn(open, CONFIG, [e, fakeDestination("hermes:plugin-default"), fakeDestination("hermes:red")]);
      // An event of the same key already waits in the implicit route's open batch.
      const waiting = batchIdOf(
        await r.world.enqueue(
          ev({
            source: "plug",
            key: "a",
            copies: [copy("plug", "hermes:plugin-default", { quiet_s: 30, max_s: 120 })],
          }),
        ),
      );
      await r.put("k", "hermes:emitter");
      await r.step();
      const rows = (await r.world.rows.all(
        "SELECT id, route, destination, count FROM batches WHERE source = 'plug' ORDER BY id",
      )) as { id: number; route: string; destination: string; count: number }[];
      expect(rows.find((b) => b.id === waiting)).toMatchObject({ count: 1 });
      expect(rows.filter((b) => b.destination === "hermes:red")).toEqual([
        expect.objectContaining({ route: "plug->hermes:red", count: 1 }),
      ]);
    });

    test("the plugin's event header reaches the destination when config sets none", async () => {
      const d = fakeDestination("hermes:plugin-default");
      let header: string | null | undefined;
      d.answer = (_call, ctx) => {
        header = ctx.eventHeader;
        return ok();
      };
      const r = await rigOn(open, CONFIG, [d]);
      await r.put("a", "hermes:plugin-default", { source: "plug" });
      await r.step();
      expect(header).toBe("X-Routed-Event");
    });
  });
});

describe("a bobbin processor's emits", () => {
  const PROCESSOR = `[sources.tally]
action = "script:tally"
span = "burst"

[destinations."script:tally"]
processor = "tally"

[[routes]]
name = "tally-mirror"
source = "tally"
destination = "hermes:mirror"
tee = true
`;
  const config = parseConfig(PROCESSOR, "/etc/hookspool/config.toml").config;

  test("go to their output's destination in a group <instance>-<event type>, at once, with no tee", () => {
    const made = resolveEmit(
      config,
      new Map(),
      { source: "tally", key: "k", event_type: "digest", destination: "hermes:out", payload: {} },
      1_700_000_000,
      "tally",
    );
    expect(made.copies).toEqual([
      {
        route: "tally-digest",
        destination: "hermes:out",
        tee: false,
        window: expect.objectContaining({ quiet_s: 0, max_s: 0 }),
        // Its trace: an emit, to its output's destination, its type the only thing matched.
        trace: {
          stage: "emit",
          route: "tally-digest",
          rule_index: null,
          matched: { event_type: "digest" },
          destination: "hermes:out",
          window: { quiet_s: 0, max_s: 0, from: "span" },
        },
      },
    ]);
  });

  test("never go back to their own processor", () => {
    expect(() =>
      resolveEmit(
        config,
        new Map(),
        { source: "tally", key: "k", event_type: "digest", destination: "script:tally", payload: {} },
        1_700_000_000,
        "tally",
      ),
    ).toThrow("a processor's output may not go back to its own processor");
  });

  test("a plain script's emit of the same source is routed as a request, tees included", () => {
    const made = resolveEmit(
      config,
      new Map(),
      { source: "tally", key: "k", event_type: "digest", payload: {} },
      1_700_000_000,
    );
    expect(made.copies.map((c) => [c.route, c.destination, c.tee])).toEqual([
      ["tally", "script:tally", false],
      ["tally-mirror", "hermes:mirror", true],
    ]);
  });
});
