// defineProcessor's types: a processor that returns something other than items, or reads a
// context member that does not exist, does not compile. tsc runs before the suite, and each
// expected-error directive below fails the type check when its line stops being an error.
import { expect, test } from "bun:test";
import { defineProcessor, type Item } from "../../src/plugin/processor.ts";

const good = defineProcessor<{ owner: string }>({
  process(batch, ctx) {
    const item: Item = { event_type: "summary", owner: ctx.settings.owner, n: batch.events.length };
    return [item];
  },
});

defineProcessor({
  // @ts-expect-error: items, not strings
  process: () => ["not an item"],
});

defineProcessor({
  // @ts-expect-error: an item needs an event_type
  process: () => [{ count: 1 }],
});

defineProcessor({
  process(_batch, ctx) {
    // @ts-expect-error: the context has no fetch; HTTP is ctx.http
    ctx.fetch("https://example.com");
    return [];
  },
});

defineProcessor<{ owner: string }>({
  process(_batch, ctx) {
    // @ts-expect-error: settings are typed; there is no setting "colour"
    return [{ event_type: "x", colour: ctx.settings.colour }];
  },
});

test("defineProcessor hands back the processor it was given", () => {
  expect(typeof good.process).toBe("function");
});
