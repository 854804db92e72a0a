// The store as the long-running services see it: the intake's enqueue and quarantine, the
// dispatcher's tick (readiness, recovery, candidates, gate, claims, outcomes) and the issues
// every part raises, behind one asynchronous interface with two backends. SQLite
// (sqlite/store.ts) answers synchronously underneath, one host, one file; PostgreSQL
// (pg/store.ts) lets several intakes and dispatchers share one database. What only one backend
// has (SQLite's data_version and dispatch.lock, PostgreSQL's maintenance lock) stays behind
// the methods that use it.
import type { Rng } from "../clock.ts";
import type { Rate, WindowHit } from "../pacing.ts";
import type { Resume } from "../delivery.ts";
import type { AttemptRow, BatchRow, EventListing, EventPayload, ListFilter } from "./batches.ts";
import type { ContentEvent } from "./content.ts";
import type { DestinationRow } from "./destinations.ts";
import type { EnqueueResult, NewEvent, QuarantineInput } from "./enqueue.ts";
import type { ISSUE_VERBS, IssueRow, IssueState, RaiseIssue } from "./issues.ts";
import type { DeadFilter, Reclassify, ReplayResult, StoredRequest } from "./replay.ts";
import type { SplitOptions } from "./split.ts";
import type { FollowStep } from "./follow.ts";
import type { StoredRequestRow, StoredRequestsQuery } from "./requests.ts";
import type { PollRow } from "./stats.ts";
import type { OutcomeEnd, OutcomeInput, Recorded } from "./outcome-plan.ts";
import type { PollPlan, PollStep } from "./polls.ts";
import type { Candidate, Claim, ClaimInput } from "./queue.ts";
import type { JournalFilter } from "./journal.ts";
import type { PullConsumer, PullLeased } from "./pull.ts";
import type { ProbeRecord } from "./probes.ts";
import type { ActionRow } from "./actions.ts";
import type { Buckets, Series } from "./charts.ts";
import type { JournalRow } from "./journal.ts";
import type { StateCounts } from "./stats.ts";
import type { DeadReason } from "../delivery.ts";
import type { RetentionCounts, RetentionPolicy } from "./retention.ts";
import type { ExportFilter, ExportRecord } from "./export.ts";
import type { AwaitedDelivery, ReportInput, Reported, OverdueOutcome } from "./awaiting-plan.ts";

/**
 * Awaited outcomes: where a webhook-id points, and the outcome of the run it started (the CLI, the intake's endpoint,
 * the dispatcher's timeout).
 */
export interface OutcomeStore {
  awaitedDelivery(deliveryId: string): Promise<AwaitedDelivery | null>;
  reportOutcome(r: ReportInput): Promise<Reported>;
}

export type Backend = "sqlite" | "postgres";

/** Where issues go: every component raises them; the write is done when the promise settles (a refusal rejects it). */
export interface IssueSink {
  raiseIssue(r: RaiseIssue): Promise<void>;
  resolveIssue(fingerprint: string, now: number): Promise<void>;
}

/** What the alerts chore reads and writes: the issues due an alert and the per-kind rate limit. */
export interface AlertStore {
  issuesToAlert(): Promise<IssueRow[]>;
  alertSlotFree(kind: string, now: number, rateLimitS: number): Promise<boolean>;
  markAlerted(issueId: number, kind: string, now: number): Promise<void>;
}

/**
 * What maintenance's chores read and write on either backend: meta's liveness facts, the poll
 * schedule, an issue's row, the alerts, the spool's file for the disk limit, and the retention
 * pass with the spool's own record of the last one (a restart or a new leader keeps the hour).
 */
export interface MaintenanceStore extends IssueSink, AlertStore {
  /**
   * The file the spool lives in, whose free disk the spool-limits chore watches; null when a server keeps its own disk
   * (PostgreSQL).
   */
  readonly spoolFile: string | null;
  /** When the last retention pass ran (null: never). */
  lastRetention(): Promise<number | null>;
  noteRetention(now: number): Promise<void>;
  runRetention(policy: RetentionPolicy, now: number): Promise<RetentionCounts>;
  /** Which of these body file hashes an events row still names (the body sweep keeps those). */
  namedBodies(hashes: readonly string[]): Promise<Set<string>>;
  /** When the source's liveness expectation was first seen (recorded now when it was not). */
  expectationSince(source: string, now: number): Promise<number>;
  metaNumber(key: string): Promise<number | null>;
  pollRows(): Promise<PollRow[]>;
  issueByFingerprint(fingerprint: string): Promise<IssueRow | null>;
  /** Every instance's last health probe (its schedule too). */
  probeRecords(): Promise<ProbeRecord[]>;
  noteProbe(record: ProbeRecord): Promise<void>;
}

/**
 * An attempts row of /metrics: attempts counted by destination, outcome, class and answer, and their summed duration.
 */
export type AttemptCountRow = {
  destination: string;
  outcome: string;
  klass: string;
  answer: string;
  n: number;
  duration_ms: number;
};

/**
 * What /healthz, /metrics and `hookspool metrics` read on either backend: the status facts, attempts and deliveries,
 * dispatchers' caught failures.
 */
export interface StatusStore extends Pick<DashboardStore, "statusFacts"> {
  attemptCounts(since: number): Promise<AttemptCountRow[]>;
  deliveredCounts(since: number): Promise<{ destination: string; n: number }[]>;
  /**
   * The caught-failure counters dispatchers recorded (JSON lists): PostgreSQL's every
   * dispatcher's; SQLite's one dispatcher's, unless it is process `pid` (whose own counters the
   * caller renders itself).
   */
  dispatchersCaught(pid: number): Promise<string[]>;
}

/** What the intake writes (its /outcomes endpoint reports awaited outcomes) and what /healthz and /metrics read. */
export interface IntakeStore extends IssueSink, OutcomeStore, StatusStore {
  readonly backend: Backend;
  /**
   * The file the spool lives in, whose disk backpressure watches; null when a server keeps its own disk (PostgreSQL).
   */
  readonly spoolFile: string | null;
  /**
   * /healthz's write probe: a small write, refused where an enqueue would be. It never waits
   * for a lock another process holds: "busy" then (SQLite), which proves nothing either way.
   */
  probeWrite(now: number): Promise<"written" | "busy">;
  /**
   * When the last enqueue committed, which proves the spool writable as a probe does (SQLite:
   * this host's file); null where intakes of several hosts share the database (PostgreSQL), so
   * /healthz probes on its own schedule there.
   */
  lastEnqueueAt(): Promise<number | null>;
  /** One request's events (all or none), committed with the other requests ready in the same turn. */
  enqueueAll(evs: readonly NewEvent[], now: number): Promise<EnqueueResult[]>;
  quarantine(q: QuarantineInput, now: number): Promise<{ eventId: number; batchId: number; reason: string }>;
}

/** What the dispatcher reads and writes in its tick and its workers. */
export interface DispatchStore extends IssueSink, OutcomeStore {
  readonly backend: Backend;
  /** The spool's instance id (part of every outbound webhook-id). */
  readonly instanceId: string;
  /** now_eff: the clock guard (max of the clock and the latest recorded tick; the database's clock on PostgreSQL). */
  effectiveNow(): Promise<number>;
  stepPoll(plan: PollPlan, now: number, rng: Rng, tick: (at: number) => NewEvent): Promise<PollStep | null>;
  /**
   * Seal the open batches ready at `now`, the oldest first, at most `limit` of them (all when
   * absent); a key whose key_budget (destination -> budget) is spent keeps its open batch open,
   * and does not count against the limit.
   */
  sealReady(now: number, keyBudgets?: ReadonlyMap<string, Rate>, limit?: number): Promise<number[]>;
  /**
   * Leases whose owner is gone back to retry. At the start, SQLite takes every lease (the flock
   * says no other dispatcher runs); PostgreSQL only expired ones (other dispatchers may be live).
   */
  recoverLeases(o: { now: number; startup: boolean; live?: ReadonlySet<string> }): Promise<number[]>;
  /** This dispatcher's heartbeat and the spool's last tick. */
  writeHeartbeat(nowEff: number, host: string, pid: number, caughtErrors?: string): Promise<void>;
  candidates(now: number, perDestination: number): Promise<Candidate[]>;
  destinationState(name: string): Promise<DestinationRow>;
  halfOpenIfCooled(name: string, now: number): Promise<boolean>;
  /** A paced destination's window at `now`: the hits of its attempts in flight or ended within it. */
  rateWindow(name: string, now: number, rate: Rate): Promise<WindowHit[]>;
  /** A run budget's spends in its window (the destination's, or one (route, key)'s), oldest first. */
  budgetSpends(
    destination: string,
    windowS: number,
    now: number,
    group?: { route: string; key: string },
  ): Promise<number[]>;
  /** Unwrap, on a retry: where the earlier attempts of this delivery left off (null: nothing got through). */
  resumePoint(batchId: number): Promise<Resume | null>;
  /**
   * Each input names its batch's (route, key): PostgreSQL locks the group to claim its head. In
   * each input's place: its claim, null when another took the batch first, or "gated" when the
   * destination's gate refused it at claim time (PostgreSQL: another dispatcher filled its slots,
   * took the probe, or tripped the breaker since this tick read it).
   */
  claimBatches(inputs: readonly (ClaimInput & { route: string; key: string })[]): Promise<(Claim | null | "gated")[]>;
  getBatch(id: number): Promise<BatchRow | null>;
  batchContent(id: number): Promise<ContentEvent[]>;
  /** What a worker delivers: the batch's row and its content, read together (one statement on PostgreSQL). */
  deliveryOf(id: number): Promise<{ batch: BatchRow; content: ContentEvent[] } | null>;
  abandonAttempt(attemptId: number, now: number, why: string): Promise<void>;
  /**
   * Outcomes that ended together, in one transaction; each its own verdict (an Error in its place when it failed
   * alone).
   */
  recordOutcomes(inputs: readonly OutcomeInput[]): Promise<(Recorded | Error)[]>;
  /**
   * recordOutcomes at now_eff as the transaction reads it (on PostgreSQL in the statement that
   * reads its facts, not in a round trip before it): what the dispatcher's outcome writer calls.
   */
  recordEnds(ends: readonly OutcomeEnd[]): Promise<(Recorded | Error)[]>;
  /** Awaiting batches whose outcome is overdue (the tick times them out), the most overdue first. */
  overdueOutcomes(now: number, limit: number): Promise<OverdueOutcome[]>;
  nextReadyAt(now: number): Promise<number | null>;
  anyReadyNow(now: number): Promise<boolean>;
  /** After a config reload: every config-class retry due now; returns how many. */
  redueConfigRetries(now: number): Promise<number>;
  /**
   * Call onWork when another process wrote: SQLite's data_version moved (no readiness known:
   * the dispatcher asks), or a PostgreSQL notification said from when its work may be delivered.
   */
  watchWork(onWork: (readyAt?: number) => void, onError: (e: unknown) => void): Promise<() => Promise<void> | void>;
  /**
   * Whether this dispatcher runs maintenance and the poll clock now (SQLite: always, under the
   * flock). `fresh`: make sure, at a round trip's cost (maintenance's round asks so).
   */
  leads(now: number, fresh?: boolean): Promise<boolean>;
  /** A clean stop: give up what the backend holds for this dispatcher (the maintenance lock, its heartbeat row). */
  release(host: string, pid: number): Promise<void>;
}

/**
 * What a pull destination's API reads and writes (the intake serves it): one destination's
 * heads, leased through the dispatcher's own claim and ended through its outcome transaction,
 * so leases, fencing, attempts, backoff and dead letters are the same as for a pushed batch;
 * and who leased last.
 */
export interface PullStore
  extends Pick<
    DispatchStore,
    "backend" | "instanceId" | "effectiveNow" | "claimBatches" | "deliveryOf" | "recordEnds" | "getBatch"
  > {
  /** One destination's deliverable heads at `now` (heads of their keys only), oldest first, at most `limit`. */
  headsOf(destination: string, now: number, limit: number): Promise<Candidate[]>;
  /** `consumer` leased from `destination` at `now` (status shows who and when). */
  noteConsumer(destination: string, consumer: string, now: number): Promise<void>;
  pullConsumers(): Promise<PullConsumer[]>;
}

/**
 * watch: the journal from a cursor, an opaque string each backend gives and parses (SQLite: the
 * row id; PostgreSQL: "<xid>:<id>"). Delivered at least once: a consumer dedups on the cursor.
 */
export interface JournalWatch {
  /** Where --since goes on (undefined: from now); a cursor never given or no longer kept is a usage error. */
  journalCursor(since: string | undefined): Promise<string>;
  /**
   * Rows after `cursor` matching `filter`, oldest first, the cursor after what was read, and whether the page was full
   * (read again at once).
   */
  journalAfter(
    cursor: string,
    filter: JournalFilter,
    limit: number,
  ): Promise<{ rows: (import("./journal.ts").JournalRow & { cursor: string })[]; cursor: string; full: boolean }>;
}

/**
 * What the operator's verbs read and change (list, show, replay, retry, split, exclude, drop, pause, resume, issues,
 * watch).
 */
export interface OperatorStore extends IssueSink, OutcomeStore, JournalWatch {
  readonly backend: Backend;
  getBatch(id: number): Promise<BatchRow | null>;
  listBatches(f: ListFilter): Promise<BatchRow[]>;
  batchEvents(id: number): Promise<EventListing[]>;
  batchPayloads(id: number): Promise<EventPayload[]>;
  batchAttempts(id: number): Promise<AttemptRow[]>;
  deadBatchIds(f: DeadFilter): Promise<number[]>;
  deliveredBatchIds(f: Omit<DeadFilter, "reason">): Promise<number[]>;
  quarantinedRequests(batchId: number): Promise<StoredRequest[]>;
  replayBatch(id: number, now: number, reclassify?: Reclassify): Promise<ReplayResult>;
  resendDelivered(id: number, now: number): Promise<void>;
  retryNow(id: number, now: number): Promise<void>;
  splitBatch(id: number, o: SplitOptions, now: number): Promise<number[]>;
  excludeEvents(batchId: number, eventIds: number[], now: number): Promise<void>;
  dropBatches(ids: number[], now: number): Promise<void>;
  pauseDestination(name: string, by: string, now: number): Promise<void>;
  /** False when it was not paused; its batches waiting on a config fault are due `now`. */
  resumeDestination(name: string, now: number): Promise<boolean>;
  /** resume --budget: the destination's run budgets count only spends from `now` on. */
  releaseBudget(name: string, now: number): Promise<void>;
  /** What status shows of a budget: its spends in the window now. */
  budgetSpends(
    destination: string,
    windowS: number,
    now: number,
    group?: { route: string; key: string },
  ): Promise<number[]>;
  destinationNames(): Promise<string[]>;
  /** send --follow: the newest event id, then each state the next event's batch takes. */
  newestEventId(): Promise<number>;
  followEvent(o: { source: string; after: number; timeoutMs: number }): AsyncGenerator<FollowStep>;
  /**
   * route test: stored requests since `since` (of one source, or all, whose payloads match --where), oldest first,
   * at most `limit` event rows read.
   */
  storedRequests(o: StoredRequestsQuery): Promise<StoredRequestRow[]>;
  /** sweep: the ids among `ids` the source has spooled (within its dedup window). */
  spooledDedupIds(source: string, ids: readonly string[]): Promise<Set<string>>;
  listIssues(f: { state?: IssueState | "all" }): Promise<IssueRow[]>;
  setIssueState(id: number, verb: keyof typeof ISSUE_VERBS, now: number): Promise<IssueRow | "missing" | "nothing">;
  /** hookspool enqueue: one event, in its own transaction. */
  enqueue(ev: NewEvent, now: number): Promise<EnqueueResult>;
  /** prune: one retention pass now (PostgreSQL: in small transactions). */
  runRetention(policy: RetentionPolicy, now: number): Promise<RetentionCounts>;
  /** Which of these body file hashes an events row still names (the body sweep keeps those). */
  namedBodies(hashes: readonly string[]): Promise<Set<string>>;
  /** The one file the spool lives in (SQLite), which prune --vacuum rebuilds; null when a server holds it. */
  readonly spoolFile: string | null;
  /** prune --vacuum: rebuild the spool's file (only where spoolFile is not null). */
  vacuum(): Promise<void>;
  /** export: batches with their events and attempts, oldest first, a page at a time. */
  exportBatches(filter: ExportFilter): AsyncIterable<ExportRecord>;
  /**
   * status --deep: read the whole spool file through (SQLite's quick_check) and say what is
   * damaged (nothing: the check is recorded as done); null where the server checks its own pages.
   */
  checkIntegrity(): Promise<string[] | null>;
  close(): Promise<void>;
}

/**
 * A journal row as the live tail hands it on, with the cursor to resume after it (SQLite: its id; PostgreSQL:
 * "<xid>:<id>").
 */
export type TailRow = JournalRow & { cursor: string };

/** A change the dashboard makes: the operator's verb, its record written with it. */
export type DashboardChange =
  | { verb: "replay" | "retry"; batch: number }
  | { verb: "pause"; destination: string; by: string }
  | { verb: "resume"; destination: string }
  | { verb: "ack" | "resolve" | "ignore"; issue: number };

/**
 * The status document's facts as the store holds them; the caller adds the config's policies and, on SQLite, the file
 * and its disk.
 */
export interface StoredStatusFacts {
  backend: Backend;
  schema: number;
  /** The newest dispatcher heartbeat (the database's or this host's clock), and that dispatcher's pid. */
  heartbeatAt: number | null;
  dispatcherPid: number | null;
  /** PostgreSQL: every dispatcher that beat, and who holds maintenance. */
  dispatchers?: { id: string; heartbeat_age_s: number; alive: boolean }[];
  maintenance?: { holder: string; since: number } | null;
  batches: StateCounts;
  deadReasons: Record<DeadReason, number>;
  pending: { overall: number | null; byDestination: Map<string, number> };
  destinationRows: DestinationRow[];
  destinationNames: string[];
  leased: Map<string, number>;
  /** Meta's numbers by key (last_enqueue_at, write_probe_at, source:<name>:last_event_at, ...:expected_since). */
  meta: (key: string) => number | null;
  polls: PollRow[];
  issuesOpen: number;
  /** The database's size when the store measures it (PostgreSQL); null: the caller measures the file. */
  spoolBytes: number | null;
  windows: Map<string, WindowHit[]>;
  /** Per budgeted destination, the spends in its budget's window, oldest first. */
  budgetSpends: Map<string, number[]>;
  /** Pull destinations' consumers, each with its last lease, by destination then name. */
  pullConsumers: PullConsumer[];
  /** The batches each consumer holds leased now (read from the lease's owner, never its nonce). */
  pullLeased: PullLeased[];
  /** Each probed instance's last health probe. */
  probes: ProbeRecord[];
}

/**
 * What the dashboard reads and changes, on either backend: the operator's reads, its charts, its record of actions, the
 * live tail.
 */
export interface DashboardStore
  extends Pick<
    OperatorStore,
    "backend" | "getBatch" | "listBatches" | "batchEvents" | "batchPayloads" | "batchAttempts" | "listIssues"
  > {
  /**
   * `paces`: each paced destination's rate; `budgets`: each budgeted destination's window (null: a key budget only);
   * `staleS`: a heartbeat older is not alive.
   */
  statusFacts(o: {
    now: number;
    paces: ReadonlyMap<string, { rate: Rate }>;
    budgets: ReadonlyMap<string, number | null>;
    staleS: number;
  }): Promise<StoredStatusFacts>;
  /** Batches ready to deliver now, per destination. */
  readyCounts(now: number): Promise<Map<string, number>>;
  eventsBySource(b: Buckets): Promise<Series>;
  attemptsByOutcome(b: Buckets): Promise<Series>;
  readyToOkLatency(b: Buckets): Promise<{ p50: (number | null)[]; p99: (number | null)[] }>;
  quarantineReasons(since: number): Promise<{ source: string; reason: string; n: number }[]>;
  recentActions(limit: number): Promise<ActionRow[]>;
  /**
   * Make the change and record it (via "dashboard"); a change that fails (HookspoolError E_NOTHING, E_NOT_FOUND)
   * records nothing.
   */
  act(at: number, change: DashboardChange): Promise<void>;
  /** The last `limit` journal rows, oldest first, and the cursor the tail follows from. */
  journalTail(limit: number): Promise<{ rows: TailRow[]; cursor: string }>;
  /** Rows after `cursor` (as journalTail or a TailRow gave it; anything else: from the start), oldest first. */
  journalAfter(cursor: string, limit: number): Promise<TailRow[]>;
}
