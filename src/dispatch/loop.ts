// The dispatcher: one event loop that ticks every poll_s: reload, now_eff, seal, recover expired
// leases, gate each destination, claim FIFO heads and start deliveries; workers apply outcomes
// through fenced marks. start() and stop() are both safe to call twice.
import { hostname } from "node:os";
import { dirname } from "node:path";
import type { Clock, Rng } from "../clock.ts";
import type { Env, LoadOptions } from "../config/load.ts";
import { type IntakeSource, loadEverySource } from "../config/sources.ts";
import { ConfigWatcher } from "../config/watch.ts";
import type { Config, LoadedConfig } from "../config/types.ts";
import type { Deadline, Destination } from "../delivery.ts";
import { timeOutOutcomes } from "./awaiting.ts";
import { BudgetIssues, keyBudgets } from "./budget.ts";
import { dispatchCounters } from "../obs/counters.ts";
import { Faults, faultCounts } from "../obs/faults.ts";
import type { Logger } from "../log.ts";
import type { DispatchStore } from "../store/api.ts";
import type { Candidate, Claim } from "../store/queue.ts";
import { Periodic, type Service } from "../service.ts";
import { stepPolls } from "./polls.ts";
import { OutcomeWriter } from "./outcomes.ts";
import { deliverClaim, type WorkerDeps } from "./worker.ts";
import { listenBase } from "./bodies.ts";
import { bodiesDir } from "../bodies.ts";
import { ReadyTimer } from "./wakeups.ts";
import { lanesOf } from "./lanes.ts";
import { FairShare } from "./share.ts";
import { type Claimer, claimInputOf } from "./claim-input.ts";

export type DestinationFactory = (config: Config, name: string) => Destination | null;

/**
 * Open batches a tick seals at most: a backlog of ready ones (a dispatcher starting after a
 * long stop, say) is sealed over several ticks, each of which claims what it sealed, so the
 * first deliveries start after the first share is sealed, not after the whole backlog.
 */
export const SEAL_PER_TICK = 200;

/**
 * A backlog's first share: what the free slots can take twice over (8 at least), not a whole
 * share, so its first deliveries wait for a few seals rather than two hundred (about 100 ms on
 * PostgreSQL); the tick that follows at once seals full shares.
 */
export function firstSealShare(full: number, freeSlots: number): number {
  return Math.min(full, Math.max(2 * freeSlots, 8));
}

export interface DispatcherOptions {
  /** The store it works on (openStores's dispatch role, on either backend). */
  store: DispatchStore;
  loaded: LoadedConfig;
  /** How the config was found, so a reload reads the same file. */
  loadOptions: LoadOptions;
  clock: Clock;
  rng: Rng;
  log: Logger;
  destinations: DestinationFactory;
  env?: Env;
  host?: string;
  pid?: number;
  /** SEAL_PER_TICK unless a test says otherwise. */
  sealPerTick?: number;
  /** Under `run`: the intake's bound address as http://host:port, for body_url (else intake.listen's). */
  bodyUrlBase?: () => string | null;
}

export class Dispatcher implements Service {
  readonly name = "dispatcher";
  private config: Config;
  private readonly watcher: ConfigWatcher;
  private readonly host: string;
  private readonly pid: number;
  private readonly inflight = new Map<string, number>();
  /** Who gets the free slots of a tick, with turns remembered from tick to tick. */
  private readonly shares = new FairShare();
  private readonly budgetIssues = new BudgetIssues();
  /** lease_owner values of live workers: the tick never recovers these. */
  private readonly live = new Set<string>();
  private readonly workers = new Set<Promise<void>>();
  /** Each live worker's deadline: a clock jump past it ends the attempt at once. */
  private readonly deadlines = new Map<string, Deadline>();
  private destinationCache = new Map<string, Destination | null>();
  /** The source plugins, for routing emits as the intake routes requests; loaded on the first tick. */
  private sources: Map<string, IntakeSource> | null = null;
  /** The first tick at once, then one every poll_s (a reload may change it). */
  private readonly ticker = new Periodic("dispatcher tick", {
    everyMs: () => this.config.dispatch.poll_s * 1000,
    firstMs: 0,
    run: () => this.tick(),
    onError: (e) => this.survive("tick", e),
  });
  private running = false;
  private stopping = false;
  /** A delivery ended during this tick: run it once more. */
  private again = false;
  /** The next seal is a backlog's first share: a small one (firstSealShare), so its first deliveries start soon. */
  private sealFirstShare = true;
  private readonly readyTimer = new ReadyTimer(() => this.kick());
  private unwatch: (() => Promise<void> | void) | null = null;
  private lastHeartbeat = Number.NEGATIVE_INFINITY;
  /** now_eff of the last search for expired leases. */
  private lastRecovery = Number.NEGATIVE_INFINITY;
  private readonly store: DispatchStore;
  /** now_eff as the last tick read it (a config reload's issue is timed by it). */
  private nowEff = Number.NEGATIVE_INFINITY;
  private nowEffAtMs = 0;
  /** What its loops catch: refused writes (counted, logged, one issue) and bugs (an internal issue). */
  private readonly faults: Faults;
  /** Attempts that end together share one outcome transaction. */
  readonly outcomes: OutcomeWriter;
  private readonly workerDeps: WorkerDeps;

  constructor(private readonly o: DispatcherOptions) {
    this.config = o.loaded.config;
    this.store = o.store;
    this.watcher = new ConfigWatcher({
      file: o.loaded.paths.config,
      mtimeMs: o.loaded.mtimeMs,
      loadOptions: o.loadOptions,
      issues: this.store,
      log: o.log,
      now: () => Math.max(o.clock.now(), this.nowEff),
      apply: (loaded) => this.apply(loaded),
      // Never started: the tick polls it, and the tick's own catch takes what it throws.
      onError: (e) => this.survive("config reload", e),
    });
    this.host = o.host ?? hostname();
    this.pid = o.pid ?? process.pid;
    this.faults = new Faults(this.store, "dispatcher", o.log, () => o.clock.now());
    this.outcomes = new OutcomeWriter(this.store);
    this.workerDeps = {
      store: this.store,
      clock: o.clock,
      rng: o.rng,
      log: o.log,
      config: () => this.config,
      sources: () => this.sources,
      deadlines: this.deadlines,
      outcomes: this.outcomes,
      bodies: {
        dir: bodiesDir(o.loaded.paths.home),
        urlBase: () => o.bodyUrlBase?.() ?? listenBase(this.config),
        nowS: () => o.clock.now(),
      },
    };
  }

  /**
   * A failure the loop catches and survives: the dispatcher keeps running, and a batch whose
   * mark failed is recovered when its lease expires and delivered again (at-least-once).
   */
  private survive(what: string, e: unknown): void {
    this.faults.caught(what, e);
  }

  /** The config in force (it follows reloads). */
  currentConfig(): Config {
    return this.config;
  }

  /** The home it works for (maintenance sweeps its bodies/ directory). */
  get home(): string {
    return this.o.loaded.paths.home;
  }

  /** The source plugins it routes emits with (maintenance reads their expectations). */
  sourcePlugins(): ReadonlyMap<string, IntakeSource> | undefined {
    return this.sources ?? undefined;
  }

  /** In-flight deliveries per destination (status, metrics). */
  inflightByDestination(): ReadonlyMap<string, number> {
    return this.inflight;
  }

  /** Whether it ticks (started and not stopped). */
  get active(): boolean {
    return this.ticker.active;
  }

  /**
   * Startup: leases of a previous run go back to retry, due now, uncounted (on SQLite every
   * lease, since this process holds the flock; on PostgreSQL the expired ones, since other
   * dispatchers may be live). Then tick every poll_s, and between ticks when another process writes.
   */
  async start(): Promise<void> {
    if (this.running) return;
    this.running = true;
    this.stopping = false;
    const recovered = await this.store.recoverLeases({ now: await this.store.effectiveNow(), startup: true });
    if (recovered.length)
      this.o.log.warn("recovered leases of a previous run", { reason: `${recovered.length} batch(es)` });
    this.unwatch = await this.store.watchWork(
      // A notification that says when its work is ready needs no query: the readiness timer takes it.
      (readyAt) =>
        readyAt === undefined
          ? void this.otherWrote().catch((e) => this.survive("write watch", e))
          : this.wakeAt(readyAt, this.nowEffEstimate()),
      (e) => this.survive("write watch", e),
    );
    await this.ticker.start();
  }

  /** Another process committed: tick if a batch is ready now, else arm the timer for the next. */
  private async otherWrote(): Promise<void> {
    if (!this.running || this.stopping) return;
    const now = await this.store.effectiveNow();
    if (await this.store.anyReadyNow(now)) this.kick();
    else await this.armReadiness(now);
  }

  /** Stop claiming; let in-flight attempts finish or hit their deadline. */
  async stop(): Promise<void> {
    this.running = false;
    this.stopping = true;
    this.readyTimer.clear();
    const unwatch = this.unwatch;
    this.unwatch = null;
    await unwatch?.();
    await this.ticker.stop();
    await this.drain();
    await this.store.release(this.host, this.pid).catch((e) => this.survive("release", e));
  }

  /** Wait for every delivery in flight. */
  async drain(): Promise<void> {
    while (this.workers.size > 0) await Promise.allSettled([...this.workers]);
  }

  private destination(name: string): Destination | null {
    if (!this.destinationCache.has(name)) this.destinationCache.set(name, this.o.destinations(this.config, name));
    return this.destinationCache.get(name) ?? null;
  }

  /**
   * The source plugins of `config`: every one that loads (a broken module is logged and its
   * emits route without it; `hookspool check` refuses such a config before the start).
   */
  private async loadSources(config: Config): Promise<Map<string, IntakeSource>> {
    const file = this.o.loaded.paths.config;
    const { sources, problems } = await loadEverySource(config, {
      configDir: dirname(file ?? this.o.loaded.paths.home),
      env: this.o.env,
      file: file ?? "config.toml",
    });
    for (const p of problems)
      this.o.log.limited("warn", "source plugin problem (hookspool check says more)", {
        reason: `${p.key}: ${p.message}`.slice(0, 160),
      });
    return sources;
  }

  /** Reload config.toml when its mtime moved (checked at the top of every tick). */
  reloadIfChanged(): Promise<boolean> {
    return this.watcher.poll();
  }

  private async apply(loaded: LoadedConfig): Promise<void> {
    const sources = await this.loadSources(loaded.config);
    this.config = loaded.config;
    this.sources = sources;
    this.destinationCache = new Map();
    // A fix (or a reload race between the two processes) costs seconds, not the backoff cap.
    const due = await this.store.redueConfigRetries(await this.store.effectiveNow());
    this.o.log.info("config reloaded", { reason: due ? `${due} config retries due now` : undefined });
  }

  /**
   * One tick. Deliveries it starts run on after it returns (see drain()). It never throws:
   * SQLITE_BUSY, a full disk and the like are counted and logged, and the next tick tries again.
   */
  async tick(): Promise<void> {
    do {
      this.again = false;
      try {
        await this.tickOnce();
        // The tick's own now_eff, not a second read of the clock: instants since then that
        // nextReadyAt returns arm the timer at once, so none is missed.
        await this.armReadiness(this.nowEff);
      } catch (e) {
        this.survive("tick", e);
      }
    } while (this.again && !this.stopping);
  }

  /**
   * Claim at the instant a batch becomes ready rather than at the next tick: one timer on the
   * earliest such instant before the tick's own, moved only when an earlier one appears.
   */
  private async armReadiness(now: number): Promise<void> {
    if (!this.running || this.stopping) return;
    const at = await this.store.nextReadyAt(now);
    if (at !== null) this.readyTimer.arm(at, now, this.config.dispatch.poll_s);
  }

  /**
   * The intake in this process (under `run`) queued an event whose batch may be ready at `at`
   * (now when it was sealed or has no window): tick then, with no query. Early costs one tick;
   * the tick's own readiness query then finds the batch's true instant.
   */
  wake(at?: number): void {
    this.wakeAt(at, this.o.clock.now());
  }

  private wakeAt(at: number | undefined, now: number): void {
    if (!this.running || this.stopping) return;
    if (at === undefined || at <= now) this.kick();
    else this.readyTimer.arm(at, now, this.config.dispatch.poll_s);
  }

  /** now_eff without a query: the last tick's, moved on by the time this host has measured since. */
  private nowEffEstimate(): number {
    return this.nowEff + (performance.now() - this.nowEffAtMs) / 1000;
  }

  /**
   * A slot freed (a delivery ended): claim the next head now rather than at the next tick. A
   * kick during a tick makes that tick run once more; kicks that come together make one tick.
   */
  private kick(): void {
    if (!this.running || this.stopping) return;
    this.again = true;
    // A tick ending as the kick comes has already looked at `again`: run one after it then.
    void this.ticker.runNow().then(() => {
      if (this.again && this.running && !this.stopping) void this.ticker.runNow();
    });
  }

  private async tickOnce(): Promise<void> {
    const store = this.store;
    dispatchCounters.wakeups++;
    this.faults.flush();
    await this.reloadIfChanged();
    if (this.sources === null) this.sources = await this.loadSources(this.config);
    const now = await store.effectiveNow();
    this.nowEff = now;
    this.nowEffAtMs = performance.now();
    // The poll clock first, so a tick enqueued now seals and is claimed in this same tick; only
    // the dispatcher that leads runs it (on PostgreSQL, the holder of the maintenance lock).
    if (await store.leads(now)) {
      for (const [instance, step] of await stepPolls(store, this.config, now, this.o.rng, (_i, e) =>
        this.survive("poll clock", e),
      )) {
        if (step === "ticked" || step === "skipped")
          this.o.log.info(step === "ticked" ? "poll tick" : "poll skipped: the last tick is not done", {
            source: instance,
          });
      }
    }
    // Sealing is a property of the batch, not of the destination: before any gate. A share at
    // a time; when the share was full, the tick runs once more for the rest.
    const fullShare = this.o.sealPerTick ?? SEAL_PER_TICK;
    const sealShare = this.sealFirstShare
      ? firstSealShare(fullShare, this.config.dispatch.parallel - this.workers.size)
      : fullShare;
    const sealed = (await store.sealReady(now, keyBudgets(this.config), sealShare)).length;
    // A full share: more may be ready, so the tick runs again, with a full share from then on
    // until one comes back short (the backlog is sealed; the next one starts small again).
    this.sealFirstShare = sealed < sealShare;
    if (sealed >= sealShare) this.again = true;
    // Expired leases (a dead dispatcher's, on PostgreSQL) once per poll_s at most: under load a
    // tick runs per claim, and the search is most of an idle tick's cost, for leases that wait
    // lease_grace_s past their deadline anyway.
    if (now - this.lastRecovery >= this.config.dispatch.poll_s || now < this.lastRecovery) {
      await store.recoverLeases({ now, startup: false, live: this.live });
      this.lastRecovery = now;
    }
    // An awaited outcome that never came: retried (its key's head again) or taken as delivered.
    await timeOutOutcomes(store, this.config, now, this.o.rng, this.o.log);
    // A worker's timer runs in real time; when this host's clock jumps forward its deadline may
    // already have passed, so it ends now as a transport failure. Deadlines are on this host's
    // clock (now_eff may be the database's, or stand still after a backwards step), compared so.
    for (const d of this.deadlines.values()) d.endIfPast(this.o.clock.now());
    if (
      this.o.clock.now() - this.lastHeartbeat >= this.config.dispatch.heartbeat_s ||
      this.o.clock.now() < this.lastHeartbeat
    ) {
      // The dispatcher's own caught failures (under run the intake counts its own in memory).
      await store.writeHeartbeat(
        now,
        this.host,
        this.pid,
        JSON.stringify(faultCounts().filter((f) => f.component !== "intake")),
      );
      this.lastHeartbeat = this.o.clock.now();
    }
    if (this.stopping) return;
    const free = this.config.dispatch.parallel - this.workers.size;
    if (free <= 0) return;
    // No destination takes more than `free` of them: asking for more would read rows never claimed.
    // Two at least: a half-open breaker's probe rotates away from the batch it probed last.
    const lanes = await lanesOf(
      {
        store,
        config: this.config,
        destination: (name) => this.destination(name),
        inflight: this.inflight,
        budgetIssues: this.budgetIssues,
        log: this.o.log,
        wakeAt: (at) => this.readyTimer.arm(at, now, this.config.dispatch.poll_s),
      },
      await store.candidates(now, Math.max(free, 2)),
      now,
    );
    const picks = this.shares.share(lanes, free);
    // Every slot this tick fills, leased in one transaction.
    const claims = await store.claimBatches(picks.map((p) => claimInputOf(this.claimer(), p.c, p.lane, now, p.hits)));
    if (picks.length > 0) {
      dispatchCounters.claimCommits++;
      dispatchCounters.claims += claims.filter((c) => c !== null && c !== "gated").length;
    }
    picks.forEach((p, i) => {
      const claim = claims[i];
      // The gate refused it at claim time (another dispatcher has the slots): the next tick, or
      // a wake-up, tries again; ticking at once would only spin.
      if (claim === "gated") return;
      if (claim) this.startWorker(p.c, p.lane.dest, claim, now, p.lane.probe);
      // An operator verb or another dispatcher took it first: the slot is free for the next head.
      else this.again = true;
    });
  }

  private claimer(): Claimer {
    return { config: this.config, instance: this.store.instanceId, host: this.host, pid: this.pid };
  }

  private startWorker(c: Candidate, dest: Destination | null, claim: Claim, now: number, probe: boolean): void {
    this.live.add(claim.owner);
    this.inflight.set(c.destination, (this.inflight.get(c.destination) ?? 0) + 1);
    // Whatever the worker throws (a mark the spool refused, a bug) is caught here: an unhandled
    // rejection would end the process, and the intake with it under `run`.
    const worker = deliverClaim(this.workerDeps, c, dest, claim, now, probe)
      .catch((e) => this.survive("delivery", e))
      .finally(() => {
        this.live.delete(claim.owner);
        this.inflight.set(c.destination, Math.max(0, (this.inflight.get(c.destination) ?? 1) - 1));
        this.workers.delete(worker);
        this.kick();
      });
    this.workers.add(worker);
  }
}
