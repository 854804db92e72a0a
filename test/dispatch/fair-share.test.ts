// One slow destination must not starve the others: 4,000 ready batches to a receiver that takes
// 50 ms each, every dispatcher slot busy with them, then one event to a second, idle
// destination, which is delivered within a second of becoming ready (the backlog alone would
// hold it for about fifty). Real HTTP over loopback, a real dispatcher, on SQLite and on a real
// PostgreSQL server (skipped, saying so, without one), each backend's roles from the factory.
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { seededRng, systemClock } from "../../src/clock.ts";
import { loadConfig } from "../../src/config/load.ts";
import { makeDestination } from "../../src/destinations/registry.ts";
import { Dispatcher } from "../../src/dispatch/loop.ts";
import { createLogger } from "../../src/log.ts";
import type { DispatchStore, IntakeStore } from "../../src/store/api.ts";
import { onBothBackends } from "../helpers/backends.ts";
import { waitFor } from "../helpers/proc.ts";
import { copy, ev } from "../helpers/spool.ts";
import { tempDir } from "../helpers/tmp.ts";
import "../helpers/intake.ts"; // captures log lines instead of printing them

setDefaultTimeout(60_000);

const BACKLOG = 4000;

interface Backend {
  intake: IntakeStore;
  dispatch: DispatchStore;
  close(): Promise<void>;
}

/** Two receivers on loopback: /slow answers after 50 ms, /quick at once; each remembers when. */
function receivers() {
  const got = { slow: 0, quick: [] as number[] };
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    async fetch(req) {
      const path = new URL(req.url).pathname;
      await req.arrayBuffer();
      if (path === "/slow") {
        await Bun.sleep(50);
        got.slow++;
      } else got.quick.push(performance.now());
      return new Response("ok");
    },
  });
  return { got, url: `http://127.0.0.1:${server.port}`, stop: () => server.stop(true) };
}

async function starvation(open: (home: string) => Promise<Backend>): Promise<void> {
  const rx = receivers();
  const home = tempDir();
  writeFileSync(
    join(home, "config.toml"),
    `[dispatch]\nparallel = 4\n\n[sources.s]\naction = "a"\n\n` +
      `[destinations.a]\ntype = "http"\nurl = "${rx.url}/slow"\nallow_insecure = true\nunsigned = true\n` +
      "max_inflight = 4\n\n" +
      `[destinations.b]\ntype = "http"\nurl = "${rx.url}/quick"\nallow_insecure = true\nunsigned = true\n`,
  );
  const b = await open(home);
  const loadOptions = { home, env: {}, cwd: home };
  const loaded = loadConfig(loadOptions);
  const d = new Dispatcher({
    store: b.dispatch,
    loaded,
    loadOptions,
    clock: systemClock,
    rng: seededRng(1),
    log: createLogger("dispatch"),
    destinations: (config, name) =>
      makeDestination(config, name, { env: {}, clock: systemClock, instanceId: b.dispatch.instanceId }),
  });
  try {
    const one = { quiet_s: 0, max_s: 0, max_events: 1 };
    for (let i = 0; i < BACKLOG; i += 500) {
      await b.intake.enqueueAll(
        Array.from({ length: 500 }, (_, j) => ev({ key: `a${i + j}`, copies: [copy("r:a", "a", one)] })),
        systemClock.now(),
      );
    }
    await d.start();
    await waitFor("the slow destination busy with its backlog", () => rx.got.slow >= 8, 20_000);
    await b.intake.enqueueAll([ev({ key: "b", copies: [copy("r:b", "b", one)] })], systemClock.now());
    const readyAt = performance.now();
    d.wake();
    await waitFor("the idle destination's one batch delivered", () => rx.got.quick.length === 1, 20_000);
    const waitedMs = rx.got.quick[0] - readyAt;
    expect(waitedMs).toBeLessThan(1000);
    // It went while the backlog was still there, not after it.
    expect(rx.got.slow).toBeLessThan(BACKLOG / 4);
  } finally {
    await d.stop();
    await b.close();
    rx.stop();
  }
}

onBothBackends((open) => {
  describe("fair shares: one slow destination's backlog does not hold another back", () => {
    // On PostgreSQL each claim is checked again under the destination's lock.
    test("the idle destination's one batch goes within a second of becoming ready", async () => {
      await starvation(async (home) => {
        const b = await open({ dir: home });
        return { intake: b.intake, dispatch: await b.dispatch(), close: () => b.close() };
      });
    });
  });
});
