// The services' store on SQLite: each method is the synchronous operation of its module, run
// through the connection's line (wait.ts): a write that meets another process's lock waits for
// it off the event loop, a read runs at once. One host: the dispatcher holds dispatch.lock, so
// it always leads, and at its start every lease is a dead process's.
import { followEvent } from "../follow.ts";
import type { AlertStore, DispatchStore, IntakeStore, MaintenanceStore, OperatorStore, PullStore } from "../api.ts";
import type { BatchRow } from "../batches.ts";
import type { ContentEvent } from "../content.ts";
import type { OutcomeEnd, Recorded } from "../outcome-plan.ts";
import {
  batchAttempts,
  batchEvents,
  batchPayloads,
  listBatches,
  deadBatchIds,
  deliveredBatchIds,
  quarantinedRequests,
  followReads,
  newestEventId,
  spooledDedupIds,
  storedRequests,
  getBatch,
} from "./reads.ts";
import {
  destinationNames,
  pauseDestination,
  resumeDestination,
  destinationState,
  halfOpenIfCooled,
} from "./destinations.ts";
import { dropBatches, replayBatch, resendDelivered, retryNow, excludeEvents, splitBatch } from "./operator.ts";
import {
  listIssues,
  setIssueState,
  alertSlotFree,
  getIssueByFingerprint,
  issuesToAlert,
  markAlerted,
  raiseIssue,
  resolveIssue,
} from "./issues.ts";
import {
  redueConfigRetries,
  anyReadyNow,
  candidates,
  headsOf,
  nextReadyAt,
  resumePoint,
  rateWindow,
  recoverLeases,
  sealReady,
} from "./queue.ts";
import { claimBatches } from "./claim.ts";
import { batchContent, quarantine } from "./enqueue.ts";
import type { SqliteSpool } from "./db.ts";
import { GroupCommit, type GroupLimits } from "../group.ts";
import { sqliteCommitStep } from "./enqueue.ts";
import { abandonAttempt } from "./marks.ts";
import { effectiveNow, expectationSince, getMetaNumber, instanceId, writeHeartbeat, dataVersion } from "./meta.ts";
import { noteConsumer, noteProbe, probeRecords, pullConsumers } from "./meta.ts";
import { pollRows } from "./stats.ts";
import { recordOutcomes } from "./outcome.ts";
import { stepPoll } from "./polls.ts";
import { awaitedDelivery, overdueOutcomes, ReportGroup } from "./awaiting.ts";
import type { ReportInput } from "../awaiting-plan.ts";
import { budgetSpends, releaseBudget } from "./budgets.ts";
import { getMeta, noteRetentionPass, probeWrite } from "./meta.ts";
import { attemptCounts, deliveredCounts } from "./stats.ts";
import type { StatusStore } from "../api.ts";
import { namedBodies, runRetention as sqliteRetention } from "./retention.ts";
import type { DashboardStore, StoredStatusFacts, TailRow } from "../api.ts";
import type { Rate } from "../../pacing.ts";
import type { JournalRow } from "../journal.ts";
import { actionOf, requireIssueChanged, requireResumed } from "../actions.ts";
import { recentActions, recordAction } from "./actions.ts";
import { attemptsByOutcome, eventsBySource, quarantineReasons, readyToOkLatency } from "./charts.ts";
import { journalAfter, journalBounds } from "./journal.ts";
import { countBatches, deadByReason, leasedByConsumer, leasedCounts, oldestPending, readyCounts } from "./stats.ts";
import { destinationRows } from "./destinations.ts";
import { openIssueCount } from "./issues.ts";
import { schemaVersion } from "./db.ts";
import { enqueue } from "./enqueue.ts";
import { runRetention, vacuum } from "./retention.ts";
import { exportBatches } from "./export.ts";
import type { LockLine } from "./wait.ts";
import { refuseWrites } from "./inspect.ts";
import { noteIntegrityCheck, quickCheck } from "./db.ts";
import { sqliteJournalWatch } from "./watch.ts";

/** A spool's line as two short verbs: `r` runs a read, `w` a write (wait.ts). */
function lineOf(spool: SqliteSpool): { r: LockLine["read"]; w: LockLine["write"] } {
  const line = spool.line;
  return { r: (fn) => line.read(fn), w: (fn, since) => line.write(fn, since) };
}

/** Awaited outcomes; reports that arrive together share one commit (ReportGroup). */
function sqliteOutcomes(spool: SqliteSpool) {
  const group = new ReportGroup(spool);
  const { r } = lineOf(spool);
  return {
    awaitedDelivery: (id: string) => r(() => awaitedDelivery(spool, id)),
    reportOutcome: (r: ReportInput) => group.report(r),
  };
}

/** How often data_version is read: the dispatcher's reaction time to another process's write. */
export const WATCH_MS = 25;

/** Issues written at once, in their own transaction. */
export function sqliteIssues(spool: SqliteSpool) {
  const { w } = lineOf(spool);
  return {
    raiseIssue: (r: Parameters<typeof raiseIssue>[1]) => w(() => void raiseIssue(spool, r)),
    resolveIssue: (fingerprint: string, now: number) => w(() => void resolveIssue(spool, fingerprint, now)),
  };
}

export function sqliteAlertStore(spool: SqliteSpool): AlertStore {
  const { r, w } = lineOf(spool);
  return {
    issuesToAlert: () => r(() => issuesToAlert(spool)),
    alertSlotFree: (kind, now, rateLimitS) => w(() => alertSlotFree(spool, kind, now, rateLimitS)),
    markAlerted: (id, kind, now) => w(() => markAlerted(spool, id, kind, now)),
  };
}

export function sqliteMaintenanceStore(spool: SqliteSpool): MaintenanceStore {
  const { r, w } = lineOf(spool);
  return {
    ...sqliteIssues(spool),
    ...sqliteAlertStore(spool),
    spoolFile: spool.path,
    lastRetention: () => r(() => getMetaNumber(spool, "last_retention_at")),
    noteRetention: (now) => w(() => noteRetentionPass(spool, now)),
    // Each of its transactions waits in the line on its own (retention.ts's chunks).
    runRetention: (policy, now) => sqliteRetention(spool, policy, now),
    namedBodies: (hashes) => r(() => namedBodies(spool, hashes)),
    expectationSince: (source, now) => w(() => expectationSince(spool, source, now)),
    metaNumber: (key) => r(() => getMetaNumber(spool, key)),
    pollRows: () => r(() => pollRows(spool)),
    issueByFingerprint: (fp) => r(() => getIssueByFingerprint(spool, fp)),
    probeRecords: () => r(() => probeRecords(spool)),
    noteProbe: (record) => w(() => noteProbe(spool, record)),
  };
}

/**
 * The intake's group commit on SQLite (tests and the bench build their own with other limits).
 * A group waits in the line from its oldest request's arrival: the wait a sender sees is the
 * busy timeout, however many groups were queued before it.
 */
export function sqliteGroupCommit(spool: SqliteSpool, limits?: GroupLimits): GroupCommit {
  const step = sqliteCommitStep(spool);
  return new GroupCommit((group) => spool.line.write(() => step(group), group[0].queuedAt), { limits });
}

export function sqliteIntakeStore(
  spool: SqliteSpool,
  group = sqliteGroupCommit(spool),
): IntakeStore & { group: GroupCommit } {
  const { r, w } = lineOf(spool);
  return {
    backend: "sqlite",
    group,
    ...sqliteIssues(spool),
    ...sqliteOutcomes(spool),
    enqueueAll: (evs, now) => group.enqueueAll(evs, now),
    quarantine: (q, now) => w(() => quarantine(spool, q, now)),
    spoolFile: spool.path,
    // Never waits: a lock held elsewhere (or writes queued for it) is "busy", not a refusal.
    probeWrite: async (now) => (spool.line.tryNow(() => probeWrite(spool, now)) === "busy" ? "busy" : "written"),
    lastEnqueueAt: () => r(() => getMetaNumber(spool, "last_enqueue_at")),
    ...sqliteStatusStore(spool),
  };
}

/** The status facts (the dashboard's read), attempts, deliveries and the dispatcher's caught failures on SQLite. */
export function sqliteStatusStore(spool: SqliteSpool): StatusStore {
  const { r } = lineOf(spool);
  return {
    statusFacts: (o) => sqliteDashboardStore(spool).statusFacts(o),
    attemptCounts: (since) => r(() => attemptCounts(spool, since)),
    deliveredCounts: (since) => r(() => deliveredCounts(spool, since)),
    // Under run the dispatcher is this process, whose counters the intake renders itself.
    dispatchersCaught: (pid) =>
      r(() =>
        getMetaNumber(spool, "dispatcher_pid") === pid ? [] : [getMeta(spool, "dispatcher_caught_errors") ?? "[]"],
      ),
  };
}

/**
 * Calls onWrite after another connection committed. SQLite's data_version moves on each of
 * their commits and is read from shared memory, so it is looked at every few milliseconds and
 * the spool is asked only when it moved.
 */
export function watchWrites(
  spool: SqliteSpool,
  onWrite: () => void,
  onError: (e: unknown) => void,
  everyMs = WATCH_MS,
): () => void {
  // Read now, before the dispatcher's first tick, so a commit after that tick is never missed.
  let last = read();
  function read(): number | null {
    try {
      return dataVersion(spool);
    } catch (e) {
      onError(e);
      return null;
    }
  }
  const timer = setInterval(() => {
    const v = read();
    if (v === null) return;
    if (last !== null && v !== last) onWrite();
    last = v;
  }, everyMs);
  timer.unref?.();
  return () => clearInterval(timer);
}

/** What a worker delivers: the batch's row and its content (two reads on SQLite). */
function deliveryOf(spool: SqliteSpool, id: number): { batch: BatchRow; content: ContentEvent[] } | null {
  const batch = getBatch(spool, id);
  return batch ? { batch, content: batchContent(spool, id) } : null;
}

/** Outcomes that ended together, stamped with now_eff as the transaction reads it. */
function recordEnds(spool: SqliteSpool, ends: readonly OutcomeEnd[]): (Recorded | Error)[] {
  const now = effectiveNow(spool);
  return recordOutcomes(
    spool,
    ends.map((e) => ({ ...e, now })),
  );
}

export function sqliteDispatchStore(spool: SqliteSpool): DispatchStore {
  const { r, w } = lineOf(spool);
  return {
    backend: "sqlite",
    instanceId: instanceId(spool),
    ...sqliteIssues(spool),
    ...sqliteOutcomes(spool),
    effectiveNow: () => r(() => effectiveNow(spool)),
    stepPoll: (plan, now, rng, tick) => w(() => stepPoll(spool, plan, now, rng, tick)),
    sealReady: (now, keyBudgets, limit) => w(() => sealReady(spool, now, keyBudgets, limit)),
    recoverLeases: (o) => w(() => recoverLeases(spool, { now: o.now, all: o.startup, live: o.live })),
    writeHeartbeat: (nowEff, _host, pid, caught) => w(() => writeHeartbeat(spool, nowEff, pid, caught)),
    candidates: (now, perDestination) => r(() => candidates(spool, now, perDestination)),
    destinationState: (name) => r(() => destinationState(spool, name)),
    halfOpenIfCooled: (name, now) => w(() => halfOpenIfCooled(spool, name, now)),
    rateWindow: (name, now, rate) => r(() => rateWindow(spool, name, now, rate)),
    resumePoint: (batchId) => r(() => resumePoint(spool, batchId)),
    budgetSpends: (name, windowS, now, group) => r(() => budgetSpends(spool, name, windowS, now, group)),
    claimBatches: (inputs) => w(() => claimBatches(spool, inputs)),
    getBatch: (id) => r(() => getBatch(spool, id)),
    batchContent: (id) => r(() => batchContent(spool, id)),
    deliveryOf: (id) => r(() => deliveryOf(spool, id)),
    abandonAttempt: (attemptId, now, why) => w(() => abandonAttempt(spool, attemptId, now, why)),
    recordOutcomes: (inputs) => w(() => recordOutcomes(spool, inputs)),
    recordEnds: (ends) => w(() => recordEnds(spool, ends)),
    overdueOutcomes: (now, limit) => r(() => overdueOutcomes(spool, now, limit)),
    nextReadyAt: (now) => r(() => nextReadyAt(spool, now)),
    anyReadyNow: (now) => r(() => anyReadyNow(spool, now)),
    redueConfigRetries: (now) => w(() => redueConfigRetries(spool, now)),
    watchWork: async (onWork, onError) => watchWrites(spool, onWork, onError),
    leads: async () => true,
    release: async () => {},
  };
}

/** A pull destination's API on a SQLite spool. */
export function sqlitePullStore(spool: SqliteSpool): PullStore {
  const { r, w } = lineOf(spool);
  return {
    backend: "sqlite",
    instanceId: instanceId(spool),
    effectiveNow: () => r(() => effectiveNow(spool)),
    headsOf: (destination, now, limit) => r(() => headsOf(spool, destination, now, limit)),
    claimBatches: (inputs) => w(() => claimBatches(spool, inputs)),
    getBatch: (id) => r(() => getBatch(spool, id)),
    deliveryOf: (id) => r(() => deliveryOf(spool, id)),
    recordEnds: (ends) => w(() => recordEnds(spool, ends)),
    noteConsumer: (destination, consumer, now) => w(() => noteConsumer(spool, destination, consumer, now)),
    pullConsumers: () => r(() => pullConsumers(spool)),
  };
}

/** A synchronous generator handed out as an async iterable (each page read when asked for). */
async function* syncPages<T>(gen: () => Iterable<T>): AsyncGenerator<T> {
  yield* gen();
}

/** The operator's verbs on a SQLite spool; close() closes it. */
export function sqliteOperatorStore(spool: SqliteSpool): OperatorStore {
  const { r, w } = lineOf(spool);
  return {
    backend: "sqlite",
    ...sqliteIssues(spool),
    ...sqliteOutcomes(spool),
    ...sqliteJournalWatch(spool),
    getBatch: (id) => r(() => getBatch(spool, id)),
    listBatches: (f) => r(() => listBatches(spool, f)),
    batchEvents: (id) => r(() => batchEvents(spool, id)),
    batchPayloads: (id) => r(() => batchPayloads(spool, id)),
    batchAttempts: (id) => r(() => batchAttempts(spool, id)),
    deadBatchIds: (f) => r(() => deadBatchIds(spool, f)),
    deliveredBatchIds: (f) => r(() => deliveredBatchIds(spool, f)),
    quarantinedRequests: (id) => r(() => quarantinedRequests(spool, id)),
    replayBatch: (id, now, re) => w(() => replayBatch(spool, id, now, re)),
    resendDelivered: (id, now) => w(() => resendDelivered(spool, id, now)),
    retryNow: (id, now) => w(() => retryNow(spool, id, now)),
    splitBatch: (id, o, now) => w(() => splitBatch(spool, id, o, now)),
    excludeEvents: (id, ids, now) => w(() => excludeEvents(spool, id, ids, now)),
    dropBatches: (ids, now) => w(() => dropBatches(spool, ids, now)),
    pauseDestination: (name, by, now) => w(() => pauseDestination(spool, name, by, now)),
    resumeDestination: (name, now) => w(() => resumeDestination(spool, name, now)),
    releaseBudget: (name, now) => w(() => releaseBudget(spool, name, now)),
    budgetSpends: (name, windowS, now, group) => r(() => budgetSpends(spool, name, windowS, now, group)),
    destinationNames: () => r(() => destinationNames(spool)),
    newestEventId: () => r(() => newestEventId(spool)),
    followEvent: (o) => followEvent(followReads(spool), o),
    spooledDedupIds: (source, ids) => r(() => spooledDedupIds(spool, source, ids)),
    // route test only reads: the connection refuses any write meanwhile.
    storedRequests: (o) =>
      r(() => {
        refuseWrites(spool, true);
        try {
          return storedRequests(spool, o);
        } finally {
          refuseWrites(spool, false);
        }
      }),
    listIssues: (f) => r(() => listIssues(spool, f)),
    setIssueState: (id, verb, now) => w(() => setIssueState(spool, id, verb, now)),
    enqueue: (ev, now) => w(() => enqueue(spool, ev, now)),
    runRetention: (policy, now) => runRetention(spool, policy, now),
    namedBodies: (hashes) => r(() => namedBodies(spool, hashes)),
    spoolFile: spool.path,
    vacuum: () => w(() => vacuum(spool)),
    exportBatches: (filter) => syncPages(() => exportBatches(spool, filter)),
    // A damaged page (payloads, say) reads fine until it is read: this reads them all.
    checkIntegrity: () =>
      w(() => {
        const problems = quickCheck(spool);
        if (!problems.length) noteIntegrityCheck(spool);
        return problems;
      }),
    close: async () => spool.close(),
  };
}

const tailRow = (r: JournalRow): TailRow => ({ ...r, cursor: String(r.id) });

/**
 * The dashboard's reads and actions on a SQLite spool. Each action and its record are one
 * transaction (the change's own nests as a savepoint). The tail reads a primary-key range each
 * time: under run the dashboard shares the writers' connection, whose own commits never move
 * data_version.
 */
export function sqliteDashboardStore(spool: SqliteSpool): DashboardStore {
  const { r, w } = lineOf(spool);
  return {
    backend: "sqlite",
    getBatch: (id) => r(() => getBatch(spool, id)),
    listBatches: (f) => r(() => listBatches(spool, f)),
    batchEvents: (id) => r(() => batchEvents(spool, id)),
    batchPayloads: (id) => r(() => batchPayloads(spool, id)),
    batchAttempts: (id) => r(() => batchAttempts(spool, id)),
    listIssues: (f) => r(() => listIssues(spool, f)),
    statusFacts: ({ now, paces, budgets }) => r(() => statusFacts(spool, now, paces, budgets)),
    readyCounts: (now) => r(() => readyCounts(spool, now)),
    eventsBySource: (b) => r(() => eventsBySource(spool, b)),
    attemptsByOutcome: (b) => r(() => attemptsByOutcome(spool, b)),
    readyToOkLatency: (b) => r(() => readyToOkLatency(spool, b)),
    quarantineReasons: (since) => r(() => quarantineReasons(spool, since)),
    recentActions: (limit) => r(() => recentActions(spool, limit)),
    act: (at, c) =>
      w(() =>
        recordAction(spool, actionOf(at, c), () => {
          if (c.verb === "replay") replayBatch(spool, c.batch, at);
          else if (c.verb === "retry") retryNow(spool, c.batch, at);
          else if (c.verb === "pause") pauseDestination(spool, c.destination, c.by, at);
          else if (c.verb === "resume") requireResumed(resumeDestination(spool, c.destination, at), c.destination);
          else if ("issue" in c) requireIssueChanged(setIssueState(spool, c.issue, c.verb, at), c.issue, c.verb);
        }),
      ),
    journalTail: (limit) =>
      r(() => {
        const { issued } = journalBounds(spool);
        const rows = journalAfter(spool, Math.max(0, issued - limit), {}, limit).map(tailRow);
        return { rows, cursor: String(issued) };
      }),
    journalAfter: (cursor, limit) =>
      r(() => journalAfter(spool, /^\d{1,15}$/.test(cursor) ? Number(cursor) : 0, {}, limit).map(tailRow)),
  };
}

/** The status document's facts on SQLite: each a read of its own (WAL: none waits for a writer). */
function statusFacts(
  spool: SqliteSpool,
  now: number,
  paces: ReadonlyMap<string, { rate: Rate }>,
  budgets: ReadonlyMap<string, number | null>,
): StoredStatusFacts {
  return {
    backend: "sqlite",
    schema: schemaVersion(spool),
    heartbeatAt: getMetaNumber(spool, "dispatcher_heartbeat_at"),
    dispatcherPid: getMetaNumber(spool, "dispatcher_pid"),
    batches: countBatches(spool),
    deadReasons: deadByReason(spool),
    pending: oldestPending(spool),
    destinationRows: destinationRows(spool),
    destinationNames: destinationNames(spool),
    leased: leasedCounts(spool),
    meta: (key) => getMetaNumber(spool, key),
    polls: pollRows(spool),
    issuesOpen: openIssueCount(spool),
    spoolBytes: null,
    windows: new Map([...paces].map(([name, p]) => [name, rateWindow(spool, name, now, p.rate)])),
    budgetSpends: new Map(
      [...budgets].map(([name, windowS]) => [name, windowS === null ? [] : budgetSpends(spool, name, windowS, now)]),
    ),
    pullConsumers: pullConsumers(spool),
    pullLeased: leasedByConsumer(spool),
    probes: probeRecords(spool),
  };
}
