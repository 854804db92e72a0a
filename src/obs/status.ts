// The status document shared by `hookspool status` and GET /healthz.
import { expectEvery, type IntakeSource } from "../config/sources.ts";
import type { Config } from "../config/types.ts";
import type { DeadReason } from "../delivery.ts";
import type { StateCounts } from "../store/stats.ts";
import { configuredDestinations, destinationType } from "../config/destinations.ts";
import type { Env } from "../config/secrets.ts";
import { destinationPace } from "../destinations/registry.ts";
import type { Pace } from "../delivery.ts";
import { type WindowHit, windowState } from "../pacing.ts";
import { budgetPolicy, type BudgetPolicy } from "../config/destinations.ts";
import { budgetRoom } from "../store/budget-plan.ts";
import type { StoredStatusFacts } from "../store/api.ts";

/** A dispatcher heartbeat older than this is reported as degraded. */
export const HEARTBEAT_STALE_S = 30;

export interface DestinationStatus {
  state: string;
  inflight?: number;
  oldest_pending_age_s: number | null;
  opened_at?: number;
  cooldown_s?: number;
  last_error?: string;
  paused_by?: string;
  /** A paced destination's window now: hits used of the limit, and when the next may start (null: now). */
  rate?: {
    limit: number;
    window_s: number;
    used: number;
    next_free_at: number | null;
    next_free_in_s: number | null;
    from: string;
  };
  /**
   * A destination's run budget now: batches delivered (or in flight) in its window, of the limit; when a held one may
   * go.
   */
  budget?: { limit: number; window_s: number; used: number; next_free_at: number | null };
  /** Its key_budget, as configured (each key's spend is its own). */
  key_budget?: { limit: number; window_s: number };
  /** A Retry-After or 429 gate: no delivery starts before this (in so many seconds). */
  gated_until?: number;
  gated_for_s?: number;
  /** A 429 without Retry-After gated it: once the gate ends, one delivery goes first as a probe. */
  throttled?: boolean;
  /** A pull destination: never pushed; its consumers lease its batches through the intake's pull API. */
  type?: "pull";
  /** A pull destination's consumers, by name (none: no consumer has leased yet). */
  consumers?: PullConsumerStatus[];
}

/** One consumer of a pull destination: when it last leased, and how many batches it holds leased now. */
export interface PullConsumerStatus {
  name: string;
  /** null: it holds a lease, but no time of its last lease is recorded. */
  last_lease_at: number | null;
  last_lease_age_s: number | null;
  leased: number;
}

export interface SourceStatus {
  last_event_age_s: number | null;
  expected_every_s?: number;
  silent?: boolean;
  /** The provider's own word: the last health probe, when the instance has one. */
  probe?: ProbeStatus;
}

export interface ProbeStatus {
  /** true: the provider sends to us; false: it says it does not; null: the probe could not tell. */
  healthy: boolean | null;
  age_s: number;
  next_in_s: number;
  says?: string;
  error?: string;
  console?: string;
}

export interface PollStatus {
  every_s: number | null;
  next_at: number;
  next_in_s: number;
  last_tick_at: number | null;
  delivered_at: number | null;
  delivered_tick_at: number | null;
  delivered_age_s: number | null;
  pending: boolean;
  skipped: number;
  stale: boolean;
}

export interface StatusDoc {
  ok: boolean;
  degraded: string[];
  /** Where the spool lives: sqlite (one file) or postgres (a database several hosts share). */
  backend: "sqlite" | "postgres";
  schema: number;
  dispatcher: { alive: boolean; heartbeat_age_s: number | null; pid: number | null };
  /** PostgreSQL: each dispatcher sharing the database (host:pid), and which one holds maintenance. */
  dispatchers?: { id: string; heartbeat_age_s: number; alive: boolean }[];
  maintenance?: { holder: string; since: number } | null;
  /** integrity_checked_age_s: since quick_check last read the whole file through (SQLite; null: never recorded). */
  spool: {
    last_enqueue_age_s: number | null;
    writable_checked_age_s: number | null;
    integrity_checked_age_s?: number | null;
  };
  batches: StateCounts;
  /** Dead batches by why they died: the receiver's refusal (rejected) apart from the pipeline's faults. */
  dead_by_reason: Record<DeadReason, number>;
  oldest_pending_age_s: number | null;
  destinations: Record<string, DestinationStatus>;
  sources: Record<string, SourceStatus>;
  /** Present when there are poll sources. */
  polls?: Record<string, PollStatus>;
  issues_open: number;
  spool_bytes: number;
  disk_free_bytes: number | null;
}

export interface StatusInputs {
  now: number;
  /** In-flight deliveries per destination, when the caller is the dispatcher (else: leased rows). */
  inflight?: ReadonlyMap<string, number>;
  /** When the spool last proved writable (the intake's write probe), if known. */
  writableCheckedAt?: number | null;
  /** Hard problems the caller knows of (spool unwritable, a backpressure limit). */
  hard?: string[];
  /** The free-space reading, when the caller has one. */
  diskFree?: number | null;
  /** The loaded source plugins, for the expectations config leaves to them. */
  plugins?: ReadonlyMap<string, IntakeSource>;
}

/** The paced destinations a config names, each with its pace (hermes: read from the gateway's file). */
export function pacedDestinations(config: Config, env: Env = process.env): Map<string, Pace> {
  const out = new Map<string, Pace>();
  for (const name of configuredDestinations(config)) {
    if (destinationType(config, name) === null) continue;
    const pace = destinationPace(config, name, env);
    if (pace) out.set(name, pace);
  }
  return out;
}

/**
 * How long a source with expectation `every` has been silent past it, or null when it is not:
 * counted from its last event, or, before its first, from when the expectation was first seen
 * (expected_since, which maintenance records). Never seen by either: not silent yet.
 */
export function silentFor(
  now: number,
  lastEventAt: number | null,
  expectedSince: number | null,
  every: number,
): number | null {
  const since = lastEventAt ?? expectedSince;
  if (!(every > 0) || since === null) return null;
  return now - since > every ? now - since : null;
}

const age = (now: number, t: number | null | undefined) =>
  t === null || t === undefined ? null : Math.max(0, round1(now - t));
const round1 = (x: number) => Math.round(x * 10) / 10;

/** What the status document is made of, read from one backend's tables. */
/**
 * The document's facts: what the store holds (StoredStatusFacts), with the config's paces and
 * budgets, and the spool's size and its disk measured.
 */
export interface StatusFacts extends Omit<StoredStatusFacts, "spoolBytes" | "windows" | "budgetSpends"> {
  spoolBytes: number;
  /** Free bytes where the spool lives; null when not this host's to measure (PostgreSQL). */
  diskFree: number | null;
  /** Each paced destination's pace and the hits in its window. */
  paces: ReadonlyMap<string, Pace>;
  windows: ReadonlyMap<string, WindowHit[]>;
  /** Each budgeted destination's budgets and the spends in its budget's window, oldest first. */
  budgets: ReadonlyMap<string, { policy: BudgetPolicy; spends: number[] }>;
}

/** The destinations with a budget or key_budget, and theirs. */
export function budgetedDestinations(config: Config): Map<string, BudgetPolicy> {
  const out = new Map<string, BudgetPolicy>();
  for (const name of Object.keys(config.destinations)) {
    const b = budgetPolicy(config, name);
    if (b) out.set(name, b);
  }
  return out;
}

/** A pull destination's consumers: those that leased (meta's times) and those holding a lease now. */
function pullConsumersOf(f: StatusFacts, destination: string, now: number): PullConsumerStatus[] {
  const out = new Map<string, PullConsumerStatus>();
  for (const c of f.pullConsumers)
    if (c.destination === destination)
      out.set(c.consumer, {
        name: c.consumer,
        last_lease_at: c.lastLeaseAt,
        last_lease_age_s: age(now, c.lastLeaseAt),
        leased: 0,
      });
  for (const l of f.pullLeased) {
    if (l.destination !== destination) continue;
    const c = out.get(l.consumer) ?? { name: l.consumer, last_lease_at: null, last_lease_age_s: null, leased: 0 };
    c.leased += l.n;
    out.set(l.consumer, c);
  }
  return [...out.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

/** The store's destinations, then the configured pull destinations it has no row of yet (none has leased). */
function destinationNamesOf(f: StatusFacts, config: Config): string[] {
  const known = new Set(f.destinationNames);
  const pulls = [...configuredDestinations(config)].filter(
    (n) => !known.has(n) && destinationType(config, n) === "pull",
  );
  return [...f.destinationNames, ...pulls.sort()];
}

/** The document from its facts: the same rules on either backend. */
export function assembleStatus(f: StatusFacts, config: Config, inp: StatusInputs): { doc: StatusDoc; hard: boolean } {
  const { now } = inp;
  const degraded: string[] = [];
  const heartbeat = f.heartbeatAt;
  const heartbeatAge = age(now, heartbeat);
  const alive = heartbeatAge !== null && heartbeatAge <= HEARTBEAT_STALE_S;
  if (heartbeat === null) degraded.push("dispatcher: no heartbeat yet");
  else if (!alive) degraded.push(`dispatcher: heartbeat ${Math.round(heartbeatAge ?? 0)}s old`);

  const batches = f.batches;
  const deadReasons = f.deadReasons;
  const why = Object.entries(deadReasons)
    .filter(([r, n]) => n > 0 && r !== "quarantined")
    .map(([r, n]) => `${n} ${r}`)
    .join(", ");
  if (batches.dead > 0) degraded.push(`batches: ${batches.dead} dead${why ? ` (${why})` : ""}`);
  if (batches.quarantined > 0) degraded.push(`batches: ${batches.quarantined} quarantined`);

  const pending = f.pending;
  const rows = new Map(f.destinationRows.map((r) => [r.name, r]));
  const leased = f.leased;
  const destinations: Record<string, DestinationStatus> = {};
  for (const name of destinationNamesOf(f, config)) {
    const row = rows.get(name);
    const d: DestinationStatus = {
      state: row?.state ?? "closed",
      oldest_pending_age_s: age(now, pending.byDestination.get(name)),
    };
    d.inflight = inp.inflight?.get(name) ?? leased.get(name) ?? 0;
    if (row?.state === "open" || row?.state === "half_open") {
      if (row.opened_at !== null) d.opened_at = row.opened_at;
      if (row.cooldown_s !== null) d.cooldown_s = row.cooldown_s;
      degraded.push(`destination ${name}: breaker ${row.state}`);
    }
    if (row?.state === "paused") {
      if (row.paused_by) d.paused_by = row.paused_by;
      degraded.push(`destination ${name}: paused`);
    }
    if (row?.last_error) d.last_error = row.last_error;
    if (row?.retry_after_until != null && row.retry_after_until > now) {
      d.gated_until = row.retry_after_until;
      d.gated_for_s = round1(row.retry_after_until - now);
    }
    if (row?.throttled_at != null) d.throttled = true;
    const pace = f.paces.get(name);
    if (pace) {
      const w = windowState(pace.rate, f.windows.get(name) ?? [], now);
      const next = w.nextFreeAt === Number.POSITIVE_INFINITY ? null : w.nextFreeAt;
      d.rate = {
        limit: pace.rate.limit,
        window_s: pace.rate.windowS,
        used: w.used,
        next_free_at: next,
        next_free_in_s: next === null ? null : round1(Math.max(0, next - now)),
        from: pace.from,
      };
    }
    const spend = f.budgets.get(name);
    if (spend?.policy.budget) {
      const r = budgetRoom(spend.spends, spend.policy.budget);
      d.budget = {
        limit: spend.policy.budget.limit,
        window_s: spend.policy.budget.windowS,
        used: spend.spends.length,
        next_free_at: r.freesAt,
      };
    }
    if (spend?.policy.keyBudget)
      d.key_budget = { limit: spend.policy.keyBudget.limit, window_s: spend.policy.keyBudget.windowS };
    // A name under pull: is a pull destination's, whatever the config says of it now.
    if (name.startsWith("pull:")) {
      d.type = "pull";
      d.consumers = pullConsumersOf(f, name, now);
    }
    destinations[name] = d;
  }

  const sources: Record<string, SourceStatus> = {};
  const probes = new Map(f.probes.map((p) => [p.instance, p]));
  for (const name of Object.keys(config.sources)) {
    const last = f.meta(`source:${name}:last_event_at`);
    const s: SourceStatus = { last_event_age_s: age(now, last) };
    const every = expectEvery(config, name, inp.plugins);
    if (every > 0) {
      s.expected_every_s = every;
      // The same rule as the source_silent issue, so status and the issue always agree.
      s.silent = silentFor(now, last, f.meta(`source:${name}:expected_since`), every) !== null;
      if (s.silent) degraded.push(`source ${name}: silent`);
    }
    const probe = probes.get(name);
    if (probe && config.probes?.[name]) {
      s.probe = {
        healthy: probe.healthy,
        age_s: round1(Math.max(0, now - probe.at)),
        next_in_s: round1(probe.next_at - now),
        ...(probe.says ? { says: probe.says } : {}),
        ...(probe.error ? { error: probe.error } : {}),
        ...(probe.console ? { console: probe.console } : {}),
      };
      if (probe.healthy === false) degraded.push(`source ${name}: disabled at the provider (${probe.says})`);
    }
    sources[name] = s;
  }

  const polls: Record<string, PollStatus> = {};
  for (const p of f.polls) {
    const every = config.sources[p.instance]?.every_s ?? null;
    const ref = p.delivered_at ?? p.created_at;
    const stale = every !== null && now - ref > 3 * every;
    if (stale) degraded.push(`poll ${p.instance}: stale`);
    polls[p.instance] = {
      every_s: every,
      next_at: p.next_at,
      next_in_s: round1(p.next_at - now),
      last_tick_at: p.last_tick_at,
      delivered_at: p.delivered_at,
      delivered_tick_at: p.delivered_tick_at,
      delivered_age_s: age(now, p.delivered_at),
      pending: p.last_batch_state !== null && p.last_batch_state !== "delivered" && p.last_batch_state !== "dropped",
      skipped: p.skipped,
      stale,
    };
  }

  const diskFree = f.diskFree;
  const hard = [...(inp.hard ?? [])];
  // The intake passes its own backpressure reading in `hard`; the CLI checks the disk here.
  if (inp.hard === undefined && diskFree !== null && diskFree < config.limits.min_free_bytes)
    hard.push(`spool: disk free ${diskFree} below limits.min_free_bytes`);
  const lastEnqueue = f.meta("last_enqueue_at");
  // Writability is proven by the last enqueue or the intake's last probe write.
  const proven =
    inp.writableCheckedAt !== undefined
      ? inp.writableCheckedAt
      : Math.max(lastEnqueue ?? Number.NEGATIVE_INFINITY, f.meta("write_probe_at") ?? Number.NEGATIVE_INFINITY);
  const writableAt = proven === null || proven === Number.NEGATIVE_INFINITY ? null : proven;
  const doc: StatusDoc = {
    ok: hard.length === 0 && degraded.length === 0,
    degraded: [...hard, ...degraded],
    backend: f.backend,
    schema: f.schema,
    dispatcher: { alive, heartbeat_age_s: heartbeatAge, pid: f.dispatcherPid },
    ...(f.dispatchers ? { dispatchers: f.dispatchers } : {}),
    ...(f.maintenance !== undefined ? { maintenance: f.maintenance } : {}),
    spool: {
      last_enqueue_age_s: age(now, lastEnqueue),
      writable_checked_age_s: age(now, writableAt),
      ...(f.backend === "sqlite" ? { integrity_checked_age_s: age(now, f.meta("integrity_checked_at")) } : {}),
    },
    batches,
    dead_by_reason: deadReasons,
    oldest_pending_age_s: age(now, pending.overall),
    destinations,
    sources,
    ...(Object.keys(polls).length ? { polls } : {}),
    issues_open: f.issuesOpen,
    spool_bytes: f.spoolBytes,
    disk_free_bytes: diskFree,
  };
  return { doc, hard: hard.length > 0 };
}
