// Run budgets through a real dispatcher and real HTTP over loopback, on SQLite and on a real
// PostgreSQL server (skipped, saying so, without one): a destination's budget delivers at most N
// batches in its window and holds the rest sealed, in order, with one budget:<destination>
// issue; a restarted dispatcher holds them still (the spends are in the spool); the window's
// end lets the next go; resume --budget lets them go at once; a key_budget holds one key's
// batches while other keys go on.
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { systemClock } from "../../src/clock.ts";
import type { Dispatcher } from "../../src/dispatch/loop.ts";
import { storeStatus } from "../../src/obs/store-status.ts";
import { sqliteStatusStore } from "../../src/store/sqlite/store.ts";
import { configHome, onBothBackends, type OpenBackend, openSqlite, startDispatcher } from "../helpers/backends.ts";
import { waitFor } from "../helpers/proc.ts";
import { copy, ev } from "../helpers/spool.ts";
import "../helpers/intake.ts"; // captures log lines instead of printing them

setDefaultTimeout(60_000);

type Open = OpenBackend;

async function world(open: Open, table: string) {
  const got: { key: string; batch: number }[] = [];
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    async fetch(req) {
      const doc = (await req.json()) as { batch_id: number; key: string };
      got.push({ key: doc.key, batch: doc.batch_id });
      return new Response("ok");
    },
  });
  const h = configHome(
    `[sources.s]\naction = "a"\n\n[destinations.a]\ntype = "http"\nurl = "http://127.0.0.1:${server.port}/in"\n` +
      `allow_insecure = true\nunsigned = true\n${table}\n`,
  );
  const b = await open();
  let d: Dispatcher | null = null;
  const others: Dispatcher[] = [];
  const make = async () => startDispatcher(await b.dispatch(), h);
  const start = async () => {
    d = await make();
  };
  await start();
  return {
    b,
    got,
    config: h.config,
    async put(key: string) {
      const [r] = await b.intake.enqueueAll(
        [ev({ key, copies: [copy("r:a", "a", { quiet_s: 0, max_s: 0, max_events: 1 })] })],
        systemClock.now(),
      );
      d?.wake();
      if (r.status !== "queued") throw new Error(r.status);
      return r.placed[0].batchId;
    },
    /** An event that joins its key's open batch (a 0.2 s quiet window). */
    async join(key: string) {
      const [r] = await b.intake.enqueueAll(
        [ev({ key, copies: [copy("r:a", "a", { quiet_s: 0.2, max_s: 0.5 })] })],
        systemClock.now(),
      );
      if (r.status !== "queued") throw new Error(r.status);
      return r.placed[0].batchId;
    },
    state: async (id: number) => (await b.operator.getBatch(id))?.state,
    count: async (id: number) => (await b.operator.getBatch(id))?.count,
    async restart() {
      await d?.stop();
      await start();
    },
    wake: () => d?.wake(),
    /** Another dispatcher on the same store (PostgreSQL: several share a destination). */
    async another() {
      others.push(await make());
    },
    wakeAll: () => {
      d?.wake();
      for (const o of others) o.wake();
    },
    async stop() {
      for (const o of others) await o.stop();
      await d?.stop();
      await b.close();
      server.stop(true);
    },
  };
}

/** Poll long enough that a held batch would have gone if nothing held it (a tick is at most poll_s, 1 s). */
async function stillHeld(w: Awaited<ReturnType<typeof world>>, ids: number[]): Promise<void> {
  const until = Date.now() + 1500;
  while (Date.now() < until) {
    for (const id of ids) expect(await w.state(id)).toBe("sealed");
    await Bun.sleep(100);
  }
}

function cases(open: () => Open): void {
  test(
    "budget: N delivered in the window, the rest held sealed with one issue; a restart holds them; resume " +
      "--budget lets them go",
    async () => {
      const w = await world(open(), 'budget = "2/h"\n');
      try {
        const ids = [];
        for (const k of ["k1", "k2", "k3", "k4"]) ids.push(await w.put(k));
        await waitFor("two delivered", () => w.got.length === 2);
        await stillHeld(w, ids.slice(2));
        // Oldest first: the held ones are the later two.
        expect(w.got.map((g) => g.key).sort()).toEqual(["k1", "k2"]);
        const open1 = (await w.b.operator.listIssues({})).filter((i) => i.fingerprint === "budget:a");
        expect(open1).toHaveLength(1);
        expect(open1[0]).toMatchObject({ state: "open", count: 1 });
        await w.restart();
        await stillHeld(w, ids.slice(2));
        await w.b.operator.releaseBudget("a", systemClock.now());
        w.wake();
        await waitFor("the held two delivered", () => w.got.length === 4, 10_000);
        expect(
          w.got
            .slice(2)
            .map((g) => g.key)
            .sort(),
        ).toEqual(["k3", "k4"]);
        await waitFor(
          "the budget issue resolved",
          async () =>
            (await w.b.operator.listIssues({ state: "all" })).find((i) => i.fingerprint === "budget:a")?.state ===
            "resolved",
        );
      } finally {
        await w.stop();
      }
    },
  );

  test("budget: when the window frees a slot the next held batch goes by itself", async () => {
    const w = await world(open(), 'budget = "1/2s"\n');
    try {
      const a = await w.put("k1");
      const b = await w.put("k2");
      await waitFor("the first delivered", () => w.got.length === 1);
      expect(await w.state(b)).toBe("sealed");
      await waitFor("the second, once the window moved on", () => w.got.length === 2, 10_000);
      expect(w.got.map((g) => g.batch)).toEqual([a, b]);
    } finally {
      await w.stop();
    }
  });

  test("key_budget: a spent key's events keep coalescing into one open batch; the next run sees them all", async () => {
    const w = await world(open(), 'key_budget = "1/h"\n');
    try {
      const first = await w.put("A");
      await waitFor("A's first delivered", () => w.got.length === 1);
      const ids = new Set([await w.join("A"), await w.join("A"), await w.join("A")]);
      expect(ids.size).toBe(1);
      const [held] = [...ids];
      // Past its window, and open still: the key has spent its budget.
      const until = Date.now() + 1500;
      while (Date.now() < until) {
        w.wake();
        expect(await w.state(held)).toBe("open");
        await Bun.sleep(100);
      }
      await w.b.operator.releaseBudget("a", systemClock.now());
      w.wake();
      await waitFor("one run with all three events", () => w.got.length === 2, 10_000);
      expect(w.got.map((g) => g.batch)).toEqual([first, held]);
      expect(await w.count(held)).toBe(3);
    } finally {
      await w.stop();
    }
  });

  test("key_budget: one key's batches are held while the other keys go on", async () => {
    const w = await world(open(), 'key_budget = "1/h"\n');
    try {
      const a1 = await w.put("A");
      const a2 = await w.put("A");
      const b1 = await w.put("B");
      await waitFor("A's first and B's first delivered", () => w.got.length === 2);
      expect(w.got.map((g) => g.batch).sort()).toEqual([a1, b1].sort());
      await stillHeld(w, [a2]);
      const c1 = await w.put("C");
      await waitFor("a new key goes", () => w.got.some((g) => g.batch === c1));
      expect(await w.state(a2)).toBe("sealed");
    } finally {
      await w.stop();
    }
  });
}

describe("run budgets", () => {
  onBothBackends((open, backend) => {
    cases(() => open);
    if (backend === "sqlite") {
      test("status says what the budget has spent, and that it holds batches", async () => {
        const w = await world(openSqlite, 'budget = "1/h"\nkey_budget = "1/h"\n');
        try {
          await w.put("k1");
          await w.put("k2");
          await waitFor("one delivered", () => w.got.length === 1);
          const s = w.b.spool;
          if (!s) throw new Error("no SQLite spool");
          const { doc } = await storeStatus(sqliteStatusStore(s), w.config, s.path, {
            now: systemClock.now(),
            hard: [],
            diskFree: 0,
          });
          expect(doc.destinations.a.budget).toMatchObject({ limit: 1, window_s: 3600, used: 1 });
          expect(doc.destinations.a.budget?.next_free_at).toBeGreaterThan(systemClock.now() + 3500);
          expect(doc.destinations.a.key_budget).toEqual({ limit: 1, window_s: 3600 });
        } finally {
          await w.stop();
        }
      });
    } else {
      test(
        "two dispatchers sharing the destination spend its budget once: each claim counts again under its " + "lock",
        async () => {
          const w = await world(open, 'budget = "3/h"\n');
          try {
            await w.another();
            for (let i = 0; i < 12; i++) await w.put(`k${i}`);
            w.wakeAll();
            await waitFor("three delivered", () => w.got.length === 3);
            const until = Date.now() + 2000;
            while (Date.now() < until) {
              w.wakeAll();
              expect(w.got.length).toBe(3);
              await Bun.sleep(100);
            }
          } finally {
            await w.stop();
          }
        },
      );
    }
  });
});
