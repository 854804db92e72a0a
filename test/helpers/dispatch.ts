// A dispatcher over a migrated temp spool with a fake clock, a seeded rng and fake destinations
// (plain objects with function fields, no mocking library): `rig` on SQLite only, `rigOn` over a
// world of either backend (world.ts), reading its rows through the world's backend-neutral reader.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { FakeClock, seededRng } from "../../src/clock.ts";
import { loadConfig } from "../../src/config/load.ts";
import type { Config } from "../../src/config/types.ts";
import { type DeliveryContext, type Destination, type Outcome, outcome } from "../../src/delivery.ts";
import type { Rate } from "../../src/pacing.ts";
import { Dispatcher } from "../../src/dispatch/loop.ts";
import { createLogger } from "../../src/log.ts";
import { openSpool, type SqliteSpool, waitOffLoop } from "../../src/store/sqlite/db.ts";
import { enqueue } from "../../src/store/sqlite/enqueue.ts";
import type { EnqueueResult } from "../../src/store/enqueue.ts";
import { migrate } from "../../src/store/sqlite/migrate.ts";
import { copy, ev, T0 } from "./spool.ts";
import { tempDir } from "./tmp.ts";
import "./intake.ts"; // captures log lines instead of printing them
import { sqliteDispatchStore } from "../../src/store/sqlite/store.ts";
import type { OpenWorld, World } from "./world.ts";
import type { DispatchStore } from "../../src/store/api.ts";

export interface Call {
  batchId: number;
  attempt: number;
  deliveryId: string;
  body: string;
  at: number;
}

export interface FakeDestination extends Destination {
  calls: Call[];
  /** What the next deliveries answer; the last entry repeats. */
  answer: (call: Call, ctx: DeliveryContext) => Outcome | Promise<Outcome>;
}

export const ok = (): Outcome => outcome({ kind: "ok", reason: "ok", status: 200 });
export const down = (): Outcome => outcome({ kind: "retry", klass: "transport", reason: "connection refused" });
export const http5xx = (): Outcome => outcome({ kind: "retry", klass: "transport", reason: "http 502", status: 502 });

export function fakeDestination(
  name: string,
  opts: Partial<
    Pick<Destination, "maxInflight" | "timeoutS" | "type" | "idempotency" | "unwrap" | "ignoredIssueAfter">
  > & { rate?: Rate } = {},
): FakeDestination {
  const d: FakeDestination = {
    name,
    type: opts.type ?? "http",
    timeoutS: opts.timeoutS ?? 30,
    maxBodyBytes: 1048576,
    maxInflight: opts.maxInflight ?? 4,
    idempotency: opts.idempotency ?? "per-batch",
    unwrap: opts.unwrap ?? false,
    ignoredIssueAfter: opts.ignoredIssueAfter,
    pace: () => (opts.rate ? { rate: opts.rate, from: "its rate" } : null),
    calls: [],
    answer: () => ok(),
    async deliver(body, ctx) {
      const call = {
        batchId: ctx.batchId,
        attempt: ctx.attempt,
        deliveryId: ctx.deliveryId,
        body,
        at: ctx.clock.now(),
      };
      d.calls.push(call);
      return d.answer(call, ctx);
    },
    check: () => [],
    outcomeSecrets: () => [],
  };
  return d;
}

export interface Rig {
  home: string;
  clock: FakeClock;
  spool: SqliteSpool;
  config: Config;
  d: Dispatcher;
  dests: Record<string, FakeDestination>;
  /** Enqueue one event for `key` to `destination` (route r:<destination>), immediate window by default. */
  put(
    key: string,
    destination: string,
    over?: Partial<Parameters<typeof ev>[0]> & {
      window?: Partial<{ quiet_s: number; max_s: number; max_events: number; max_bytes: number }>;
    },
  ): EnqueueResult;
  /** One tick, then wait for the deliveries it started. */
  step(): Promise<void>;
  batch(id: number): Record<string, unknown>;
  dest(name: string): Record<string, unknown>;
  attempts(batchId: number): Record<string, unknown>[];
}

/** `config` is the config.toml body; every destination it names must be given (a fake, or a real one). */
export function rig(config: string, fakes: (FakeDestination | Destination)[], opts: { seed?: number } = {}): Rig {
  const home = tempDir();
  writeFileSync(join(home, "config.toml"), config);
  const clock = new FakeClock(T0);
  const spool = openSpool(join(home, "spool.db"), { create: true, clock });
  migrate(spool);
  // As the dispatcher's connection is: a busy lock is waited for off the event loop.
  waitOffLoop(spool, 30);
  const loadOptions = { home, env: {}, cwd: home };
  const loaded = loadConfig(loadOptions);
  const dests = Object.fromEntries(fakes.map((f) => [f.name, f])) as Record<string, FakeDestination>;
  const d = new Dispatcher({
    store: sqliteDispatchStore(spool),
    loaded,
    loadOptions,
    clock,
    rng: seededRng(opts.seed ?? 7),
    log: createLogger("dispatch", { clock }),
    destinations: (_c, name) => dests[name] ?? null,
    host: "testhost",
    pid: 4242,
  });
  return {
    home,
    clock,
    spool,
    config: loaded.config,
    d,
    dests,
    put(key, destination, over = {}) {
      const { window, ...rest } = over;
      return enqueue(
        spool,
        ev({
          source: "s",
          key,
          copies: [copy(`r:${destination}`, destination, { quiet_s: 0, max_s: 0, ...(window ?? {}) })],
          ...rest,
        }),
      );
    },
    async step() {
      await d.tick();
      await d.drain();
    },
    batch: (id) => spool.db.query("SELECT * FROM batches WHERE id = ?").get(id) as Record<string, unknown>,
    dest: (name) =>
      (spool.db.query("SELECT * FROM destinations WHERE name = ?").get(name) ?? { state: "closed" }) as Record<
        string,
        unknown
      >,
    attempts: (batchId) =>
      spool.db.query("SELECT * FROM attempts WHERE batch_id = ? ORDER BY id").all(batchId) as Record<string, unknown>[],
  };
}

export function batchIdOf(r: EnqueueResult): number {
  if (r.status !== "queued") throw new Error(r.status);
  return r.placed[0].batchId;
}

/** A rig's world on either backend: what `Rig` has, its reads asynchronous and through the world's rows. */
export interface WorldRig {
  world: World;
  /** The dispatcher's own store (the world's, on PostgreSQL following the fake clock). */
  store: DispatchStore;
  home: string;
  clock: FakeClock;
  /** Where the clock started (T0 on SQLite; on PostgreSQL a day ahead of the real time). */
  t0: number;
  config: Config;
  d: Dispatcher;
  dests: Record<string, FakeDestination>;
  put(
    key: string,
    destination: string,
    over?: Partial<Parameters<typeof ev>[0]> & {
      window?: Partial<{ quiet_s: number; max_s: number; max_events: number; max_bytes: number }>;
    },
  ): Promise<EnqueueResult>;
  step(): Promise<void>;
  batch(id: number): Promise<Record<string, unknown>>;
  dest(name: string): Promise<Record<string, unknown>>;
  attempts(batchId: number): Promise<Record<string, unknown>[]>;
  close(): Promise<void>;
}

/** `rig`'s dispatcher over a fresh world of `open` (onBothWorlds's), its dispatch store the world's. */
export async function rigOn(
  open: OpenWorld,
  config: string,
  fakes: (FakeDestination | Destination)[],
  opts: { seed?: number; wrapStore?: (store: DispatchStore) => DispatchStore; sealPerTick?: number } = {},
): Promise<WorldRig> {
  const world = await open();
  const home = tempDir();
  writeFileSync(join(home, "config.toml"), config);
  const clock = world.clock;
  const loadOptions = { home, env: {}, cwd: home };
  const loaded = loadConfig(loadOptions);
  const dests = Object.fromEntries(fakes.map((f) => [f.name, f])) as Record<string, FakeDestination>;
  const store = (opts.wrapStore ?? ((s) => s))(await world.dispatch());
  const d = new Dispatcher({
    store,
    loaded,
    loadOptions,
    clock,
    rng: seededRng(opts.seed ?? 7),
    log: createLogger("dispatch", { clock }),
    destinations: (_c, name) => dests[name] ?? null,
    host: "testhost",
    pid: 4242,
    sealPerTick: opts.sealPerTick,
  });
  const rows = world.rows;
  return {
    world,
    store,
    home,
    clock,
    t0: world.t0,
    config: loaded.config,
    d,
    dests,
    put(key, destination, over = {}) {
      const { window, ...rest } = over;
      return world.enqueue(
        ev({
          source: "s",
          key,
          copies: [copy(`r:${destination}`, destination, { quiet_s: 0, max_s: 0, ...(window ?? {}) })],
          ...rest,
        }),
      );
    },
    async step() {
      await d.tick();
      await d.drain();
    },
    batch: async (id) => (await rows.get("SELECT * FROM batches WHERE id = ?", id)) as Record<string, unknown>,
    dest: async (name) => (await rows.get("SELECT * FROM destinations WHERE name = ?", name)) ?? { state: "closed" },
    attempts: (batchId) => rows.all("SELECT * FROM attempts WHERE batch_id = ? ORDER BY id", batchId),
    async close() {
      await d.stop();
      await world.close();
    },
  };
}
