// The services' store on SQLite: each method is the synchronous operation of its module, its
// value handed back as a settled promise. One host: the dispatcher holds dispatch.lock, so it
// always leads, and at its start every lease is a dead process's.
import { followEvent } from "../follow.ts";
import type { AlertStore, DispatchStore, IntakeStore, MaintenanceStore, OperatorStore } from "../api.ts";
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
  claimBatches,
  nextReadyAt,
  resumePoint,
  rateWindow,
  recoverLeases,
  sealReady,
} from "./queue.ts";
import { batchContent, quarantine } from "./enqueue.ts";
import type { SqliteSpool } from "./db.ts";
import { GroupCommit, type GroupLimits } from "../group.ts";
import { sqliteCommitStep } from "./enqueue.ts";
import { abandonAttempt } from "./marks.ts";
import { effectiveNow, expectationSince, getMetaNumber, instanceId, writeHeartbeat, dataVersion } from "./meta.ts";
import { pollRows } from "./stats.ts";
import { recordOutcomes } from "./outcome.ts";
import { stepPoll } from "./polls.ts";
import { awaitedDelivery, overdueOutcomes, ReportGroup } from "./awaiting.ts";
import type { ReportInput } from "../awaiting-plan.ts";
import { budgetSpends, releaseBudget } from "./budgets.ts";
import { getMeta, noteRetentionPass, probeWrite } from "./meta.ts";
import { attemptCounts, deliveredCounts } from "./stats.ts";
import type { StatusStore } from "../api.ts";
import { runRetention as sqliteRetention } from "./retention.ts";
import type { DashboardStore, TailRow } from "../api.ts";
import type { JournalRow } from "../journal.ts";
import { actionOf, requireIssueChanged, requireResumed } from "../actions.ts";
import { recentActions, recordAction } from "./actions.ts";
import { attemptsByOutcome, eventsBySource, quarantineReasons, readyToOkLatency } from "./charts.ts";
import { journalAfter, journalBounds } from "./journal.ts";
import { countBatches, deadByReason, leasedCounts, oldestPending, readyCounts } from "./stats.ts";
import { destinationRows } from "./destinations.ts";
import { openIssueCount } from "./issues.ts";
import { schemaVersion } from "./db.ts";
import { enqueue } from "./enqueue.ts";
import { runRetention, vacuum } from "./retention.ts";
import { exportBatches } from "./export.ts";
import { refuseWrites } from "./inspect.ts";
import { noteIntegrityCheck, quickCheck } from "./db.ts";
import { sqliteJournalWatch } from "./watch.ts";

/** Awaited outcomes; reports that arrive together share one commit (ReportGroup). */
function sqliteOutcomes(spool: SqliteSpool) {
  const group = new ReportGroup(spool);
  return {
    awaitedDelivery: async (id: string) => awaitedDelivery(spool, id),
    reportOutcome: (r: ReportInput) => group.report(r),
  };
}

/** How often data_version is read: the dispatcher's reaction time to another process's write. */
export const WATCH_MS = 25;

/** Issues written at once, in their own transaction. */
export function sqliteIssues(spool: SqliteSpool) {
  return {
    raiseIssue: async (r: Parameters<typeof raiseIssue>[1]) => void raiseIssue(spool, r),
    resolveIssue: async (fingerprint: string, now: number) => void resolveIssue(spool, fingerprint, now),
  };
}

export function sqliteAlertStore(spool: SqliteSpool): AlertStore {
  return {
    issuesToAlert: async () => issuesToAlert(spool),
    alertSlotFree: async (kind, now, rateLimitS) => alertSlotFree(spool, kind, now, rateLimitS),
    markAlerted: async (id, kind, now) => markAlerted(spool, id, kind, now),
  };
}

export function sqliteMaintenanceStore(spool: SqliteSpool): MaintenanceStore {
  return {
    ...sqliteIssues(spool),
    ...sqliteAlertStore(spool),
    spoolFile: spool.path,
    lastRetention: async () => getMetaNumber(spool, "last_retention_at"),
    noteRetention: async (now) => noteRetentionPass(spool, now),
    runRetention: (policy, now) => sqliteRetention(spool, policy, now),
    expectationSince: async (source, now) => expectationSince(spool, source, now),
    metaNumber: async (key) => getMetaNumber(spool, key),
    pollRows: async () => pollRows(spool),
    issueByFingerprint: async (fp) => getIssueByFingerprint(spool, fp),
  };
}

/** The intake's group commit on SQLite (tests and the bench build their own with other limits). */
export function sqliteGroupCommit(spool: SqliteSpool, limits?: GroupLimits): GroupCommit {
  return new GroupCommit(sqliteCommitStep(spool), { limits });
}

export function sqliteIntakeStore(
  spool: SqliteSpool,
  group = sqliteGroupCommit(spool),
): IntakeStore & { group: GroupCommit } {
  return {
    backend: "sqlite",
    group,
    ...sqliteIssues(spool),
    ...sqliteOutcomes(spool),
    enqueueAll: (evs, now) => group.enqueueAll(evs, now),
    quarantine: async (q, now) => quarantine(spool, q, now),
    spoolFile: spool.path,
    probeWrite: async (now) => probeWrite(spool, now),
    lastEnqueueAt: async () => getMetaNumber(spool, "last_enqueue_at"),
    ...sqliteStatusStore(spool),
  };
}

/** The status facts (the dashboard's read), attempts, deliveries and the dispatcher's caught failures on SQLite. */
export function sqliteStatusStore(spool: SqliteSpool): StatusStore {
  return {
    statusFacts: (o) => sqliteDashboardStore(spool).statusFacts(o),
    attemptCounts: async (since) => attemptCounts(spool, since),
    deliveredCounts: async (since) => deliveredCounts(spool, since),
    // Under run the dispatcher is this process, whose counters the intake renders itself.
    dispatchersCaught: async (pid) =>
      getMetaNumber(spool, "dispatcher_pid") === pid ? [] : [getMeta(spool, "dispatcher_caught_errors") ?? "[]"],
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

export function sqliteDispatchStore(spool: SqliteSpool): DispatchStore {
  return {
    backend: "sqlite",
    instanceId: instanceId(spool),
    ...sqliteIssues(spool),
    ...sqliteOutcomes(spool),
    effectiveNow: async () => effectiveNow(spool),
    stepPoll: async (plan, now, rng, tick) => stepPoll(spool, plan, now, rng, tick),
    sealReady: async (now, keyBudgets) => sealReady(spool, now, keyBudgets),
    recoverLeases: async (o) => recoverLeases(spool, { now: o.now, all: o.startup, live: o.live }),
    writeHeartbeat: async (nowEff, _host, pid, caught) => writeHeartbeat(spool, nowEff, pid, caught),
    candidates: async (now, perDestination) => candidates(spool, now, perDestination),
    destinationState: async (name) => destinationState(spool, name),
    halfOpenIfCooled: async (name, now) => halfOpenIfCooled(spool, name, now),
    rateWindow: async (name, now, rate) => rateWindow(spool, name, now, rate),
    resumePoint: async (batchId) => resumePoint(spool, batchId),
    budgetSpends: async (name, windowS, now, group) => budgetSpends(spool, name, windowS, now, group),
    claimBatches: async (inputs) => claimBatches(spool, inputs),
    getBatch: async (id) => getBatch(spool, id),
    batchContent: async (id) => batchContent(spool, id),
    abandonAttempt: async (attemptId, now, why) => abandonAttempt(spool, attemptId, now, why),
    recordOutcomes: async (inputs) => recordOutcomes(spool, inputs),
    overdueOutcomes: async (now, limit) => overdueOutcomes(spool, now, limit),
    nextReadyAt: async (now) => nextReadyAt(spool, now),
    anyReadyNow: async (now) => anyReadyNow(spool, now),
    redueConfigRetries: async (now) => redueConfigRetries(spool, now),
    watchWork: async (onWork, onError) => watchWrites(spool, onWork, onError),
    leads: async () => true,
    release: async () => {},
  };
}

/** A synchronous generator handed out as an async iterable (each page read when asked for). */
async function* syncPages<T>(gen: () => Iterable<T>): AsyncGenerator<T> {
  yield* gen();
}

/** The operator's verbs on a SQLite spool; close() closes it. */
export function sqliteOperatorStore(spool: SqliteSpool): OperatorStore {
  return {
    backend: "sqlite",
    ...sqliteIssues(spool),
    ...sqliteOutcomes(spool),
    ...sqliteJournalWatch(spool),
    getBatch: async (id) => getBatch(spool, id),
    listBatches: async (f) => listBatches(spool, f),
    batchEvents: async (id) => batchEvents(spool, id),
    batchPayloads: async (id) => batchPayloads(spool, id),
    batchAttempts: async (id) => batchAttempts(spool, id),
    deadBatchIds: async (f) => deadBatchIds(spool, f),
    deliveredBatchIds: async (f) => deliveredBatchIds(spool, f),
    quarantinedRequests: async (id) => quarantinedRequests(spool, id),
    replayBatch: async (id, now, re) => replayBatch(spool, id, now, re),
    resendDelivered: async (id, now) => resendDelivered(spool, id, now),
    retryNow: async (id, now) => retryNow(spool, id, now),
    splitBatch: async (id, o, now) => splitBatch(spool, id, o, now),
    excludeEvents: async (id, ids, now) => excludeEvents(spool, id, ids, now),
    dropBatches: async (ids, now) => dropBatches(spool, ids, now),
    pauseDestination: async (name, by, now) => pauseDestination(spool, name, by, now),
    resumeDestination: async (name, now) => resumeDestination(spool, name, now),
    releaseBudget: async (name, now) => releaseBudget(spool, name, now),
    budgetSpends: async (name, windowS, now, group) => budgetSpends(spool, name, windowS, now, group),
    destinationNames: async () => destinationNames(spool),
    newestEventId: async () => newestEventId(spool),
    followEvent: (o) => followEvent(followReads(spool), o),
    spooledDedupIds: async (source, ids) => spooledDedupIds(spool, source, ids),
    // route test only reads: the connection refuses any write meanwhile.
    storedRequests: async (o) => {
      refuseWrites(spool, true);
      try {
        return storedRequests(spool, o);
      } finally {
        refuseWrites(spool, false);
      }
    },
    listIssues: async (f) => listIssues(spool, f),
    setIssueState: async (id, verb, now) => setIssueState(spool, id, verb, now),
    enqueue: async (ev, now) => enqueue(spool, ev, now),
    runRetention: (policy, now) => runRetention(spool, policy, now),
    spoolFile: spool.path,
    vacuum: async () => vacuum(spool),
    exportBatches: (filter) => syncPages(() => exportBatches(spool, filter)),
    // A damaged page (payloads, say) reads fine until it is read: this reads them all.
    checkIntegrity: async () => {
      const problems = quickCheck(spool);
      if (!problems.length) noteIntegrityCheck(spool);
      return problems;
    },
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
  return {
    backend: "sqlite",
    getBatch: async (id) => getBatch(spool, id),
    listBatches: async (f) => listBatches(spool, f),
    batchEvents: async (id) => batchEvents(spool, id),
    batchPayloads: async (id) => batchPayloads(spool, id),
    batchAttempts: async (id) => batchAttempts(spool, id),
    listIssues: async (f) => listIssues(spool, f),
    statusFacts: async ({ now, paces, budgets }) => ({
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
    }),
    readyCounts: async (now) => readyCounts(spool, now),
    eventsBySource: async (b) => eventsBySource(spool, b),
    attemptsByOutcome: async (b) => attemptsByOutcome(spool, b),
    readyToOkLatency: async (b) => readyToOkLatency(spool, b),
    quarantineReasons: async (since) => quarantineReasons(spool, since),
    recentActions: async (limit) => recentActions(spool, limit),
    act: async (at, c) =>
      recordAction(spool, actionOf(at, c), () => {
        if (c.verb === "replay") replayBatch(spool, c.batch, at);
        else if (c.verb === "retry") retryNow(spool, c.batch, at);
        else if (c.verb === "pause") pauseDestination(spool, c.destination, c.by, at);
        else if (c.verb === "resume") requireResumed(resumeDestination(spool, c.destination, at), c.destination);
        else if ("issue" in c) requireIssueChanged(setIssueState(spool, c.issue, c.verb, at), c.issue, c.verb);
      }),
    journalTail: async (limit) => {
      const { issued } = journalBounds(spool);
      return { rows: journalAfter(spool, Math.max(0, issued - limit), {}, limit).map(tailRow), cursor: String(issued) };
    },
    journalAfter: async (cursor, limit) =>
      journalAfter(spool, /^\d{1,15}$/.test(cursor) ? Number(cursor) : 0, {}, limit).map(tailRow),
  };
}
