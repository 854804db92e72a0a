// The services' store on PostgreSQL: the intake's group commit and quarantine, and the
// dispatcher's tick, over the operations of this folder. Several intakes and dispatchers may
// share the database: the group commit takes its locks in one sorted order, claims skip what
// another dispatcher holds, recovery takes only expired leases, and one dispatcher at a time
// (the holder of the maintenance lock) leads the poll clock and the chores.
import type { AlertStore, DispatchStore, IntakeStore, MaintenanceStore, OperatorStore, PullStore } from "../api.ts";
import {
  dropBatchesPg,
  excludeEventsPg,
  replayBatchPg,
  resendDeliveredPg,
  retryNowPg,
  splitBatchPg,
} from "./operator.ts";
import {
  pauseDestinationPg,
  resumeDestinationPg,
  destinationNamesPg,
  halfOpenIfCooledPg,
  destinationStatePg,
} from "./destinations.ts";
import {
  expectationSincePg,
  metaNumberPg,
  effectiveNowPg,
  forgetDispatcherPg,
  writeHeartbeatPg,
  instanceIdPg,
} from "./meta.ts";
import { followEvent } from "../follow.ts";
import { pollRowsPg } from "./stats.ts";
import {
  batchAttemptsPg,
  batchEventsPg,
  batchPayloadsPg,
  deadBatchIdsPg,
  deliveredBatchIdsPg,
  followReadsPg,
  listBatchesPg,
  newestEventIdPg,
  quarantinedRequestsPg,
  spooledDedupIdsPg,
  storedRequestsPg,
  deliveryOfPg,
  getBatchPg,
} from "./reads.ts";
import {
  listIssuesPg,
  setIssueStatePg,
  alertSlotFreePg,
  getIssueByFingerprintPg,
  issuesToAlertPg,
  markAlertedPg,
  raiseIssuePg,
  resolveIssuePg,
} from "./issues.ts";
import { GroupCommit } from "../group.ts";
import { claimPg, rateWindowPg } from "./claim.ts";
import {
  candidatesPg,
  resumePointPg,
  recoverExpiredPg,
  sealReadyPg,
  anyReadyNowPg,
  nextReadyAtPg,
  redueConfigRetriesPg,
} from "./queue.ts";
import type { PgSpool } from "./db.ts";
import { batchContentPg, pgCommitStep, quarantinePg } from "./enqueue.ts";
import { MaintenanceLock } from "./leader.ts";
import { recordOutcomesPg } from "./outcome.ts";
import { awaitedDeliveryPg, overdueOutcomesPg, reportOutcomePg } from "./awaiting.ts";
import { budgetSpendsPg, releaseBudgetPg } from "./budgets.ts";
import { stepPollPg } from "./polls.ts";
import { abandonAttemptPg } from "./marks.ts";
import { listenForWork } from "./wakeups.ts";
import { lastRetentionPg, noteRetentionPassPg, probeWritePg } from "./meta.ts";
import { noteConsumerPg, noteProbePg, probeRecordsPg, pullConsumersPg } from "./meta.ts";
import { headsOfPg } from "./queue.ts";
import { attemptCountsPg, deliveredCountsPg, dispatchersCaughtPg } from "./stats.ts";
import type { StatusStore } from "../api.ts";
import { namedBodiesPg, runRetentionPg as pgRetention } from "./retention.ts";
import type { DashboardStore, TailRow } from "../api.ts";
import type { JournalRow } from "../journal.ts";
import { actionOf, requireIssueChanged, requireResumed } from "../actions.ts";
import { recentActionsPg, recordActionPg } from "./actions.ts";
import { attemptsByOutcomePg, eventsBySourcePg, quarantineReasonsPg, readyToOkLatencyPg } from "./charts.ts";
import { formatPgCursor, journalAfterPg, journalLastPg, parsePgCursor, PG_CURSOR_START } from "./journal.ts";
import {
  countBatchesPg,
  databaseBytesPg,
  deadByReasonPg,
  leasedByConsumerPg,
  leasedCountsPg,
  oldestPendingPg,
  readyCountsPg,
} from "./stats.ts";
import { destinationRowsPg } from "./destinations.ts";
import { dispatchersPg, metaNumbersPg } from "./meta.ts";
import { openIssueCountPg } from "./issues.ts";
import { maintenanceHolder } from "./leader.ts";
import { pgSchemaVersion } from "./migrate.ts";
import { enqueuePg } from "./enqueue.ts";
import { runRetentionPg } from "./retention.ts";
import { exportBatchesPg } from "./export.ts";
import { pgJournalWatch } from "./watch.ts";

function pgIssues(spool: PgSpool) {
  return {
    raiseIssue: async (r: Parameters<typeof raiseIssuePg>[1]) => void (await raiseIssuePg(spool.sql, r)),
    resolveIssue: async (fingerprint: string, now: number) => void (await resolveIssuePg(spool.sql, fingerprint, now)),
  };
}

export function pgAlertStore(spool: PgSpool): AlertStore {
  return {
    issuesToAlert: () => issuesToAlertPg(spool),
    alertSlotFree: (kind, now, rateLimitS) => alertSlotFreePg(spool, kind, now, rateLimitS),
    markAlerted: (id, kind, now) => markAlertedPg(spool, id, kind, now),
  };
}

export function pgMaintenanceStore(spool: PgSpool): MaintenanceStore {
  return {
    ...pgIssues(spool),
    ...pgAlertStore(spool),
    // The server keeps its own disk: a write it cannot keep is refused (spool:write_failed).
    spoolFile: null,
    lastRetention: () => lastRetentionPg(spool),
    noteRetention: (now) => noteRetentionPassPg(spool, now),
    runRetention: (policy, now) => pgRetention(spool, policy, now),
    namedBodies: (hashes) => namedBodiesPg(spool, hashes),
    expectationSince: (source, now) => expectationSincePg(spool, source, now),
    metaNumber: (key) => metaNumberPg(spool, key),
    pollRows: () => pollRowsPg(spool),
    issueByFingerprint: (fp) => getIssueByFingerprintPg(spool, fp),
    probeRecords: () => probeRecordsPg(spool),
    noteProbe: (record) => noteProbePg(spool, record),
  };
}

export function pgIntakeStore(spool: PgSpool): IntakeStore & { group: GroupCommit } {
  // One transaction in flight at a time: the requests that arrive meanwhile make the next group,
  // which is then larger. A group's statements cost the same whatever its size (enqueue-set.ts),
  // so fewer, larger groups cost the server less per event; a second transaction in flight bought
  // no throughput (measured at 16 and 64 senders, one and two intakes: 0.15 against 0.18 ms of
  // server CPU an event, and more requests a second).
  const group = new GroupCommit(pgCommitStep(spool), { parallel: 1 });
  return {
    backend: "postgres",
    group,
    ...pgIssues(spool),
    ...pgOutcomes(spool),
    enqueueAll: (evs, now) => group.enqueueAll(evs, now),
    quarantine: (q, now) => quarantinePg(spool, q, now),
    spoolFile: null,
    probeWrite: async (now) => {
      await probeWritePg(spool, now);
      return "written";
    },
    // Several hosts' intakes share the database: another host's enqueue and clock prove nothing here.
    lastEnqueueAt: async () => null,
    ...pgStatusStore(spool),
  };
}

/**
 * The status facts (the dashboard's read), attempts, deliveries and every dispatcher's caught failures on PostgreSQL.
 */
export function pgStatusStore(spool: PgSpool): StatusStore {
  return {
    statusFacts: (o) => pgDashboardStore(spool).statusFacts(o),
    attemptCounts: (since) => attemptCountsPg(spool, since),
    deliveredCounts: (since) => deliveredCountsPg(spool, since),
    dispatchersCaught: () => dispatchersCaughtPg(spool),
  };
}

const beatId = (host: string, pid: number) => `${host}:${pid}`;

/** Awaited outcomes, each in its own transaction. */
function pgOutcomes(spool: PgSpool) {
  return {
    awaitedDelivery: (id: string) => awaitedDeliveryPg(spool, id),
    reportOutcome: (r: Parameters<typeof reportOutcomePg>[1]) => reportOutcomePg(spool, r),
  };
}

/** The dispatcher's store on PostgreSQL; `holder` names this dispatcher in status (host:pid). */
export async function pgDispatchStore(spool: PgSpool, holder: string): Promise<DispatchStore> {
  const instanceId = await instanceIdPg(spool);
  const lock = new MaintenanceLock(spool, holder);
  return {
    backend: "postgres",
    instanceId,
    ...pgIssues(spool),
    ...pgOutcomes(spool),
    effectiveNow: () => effectiveNowPg(spool),
    stepPoll: (plan, now, rng, tick) => stepPollPg(spool, plan, now, rng, tick),
    sealReady: (now, keyBudgets, limit) => sealReadyPg(spool, now, keyBudgets, limit),
    // Other dispatchers may be live: only a lease past its lease_until is a dead owner's.
    recoverLeases: (o) => recoverExpiredPg(spool, o.now, o.live),
    writeHeartbeat: (nowEff, host, pid, caught) => writeHeartbeatPg(spool, beatId(host, pid), nowEff, caught),
    candidates: (now, perDestination) => candidatesPg(spool, now, perDestination),
    destinationState: (name) => destinationStatePg(spool, name),
    halfOpenIfCooled: (name, now) => halfOpenIfCooledPg(spool, name, now),
    rateWindow: (name, now, rate) => rateWindowPg(spool.sql, name, now, rate),
    resumePoint: (batchId) => resumePointPg(spool, batchId),
    budgetSpends: (name, windowS, now, group) => budgetSpendsPg(spool.sql, name, windowS, now, group),
    claimBatches: (inputs) => claimPg(spool, inputs),
    getBatch: (id) => getBatchPg(spool, id),
    batchContent: (id) => batchContentPg(spool.sql, id),
    deliveryOf: (id) => deliveryOfPg(spool, id),
    abandonAttempt: (attemptId, now, why) => abandonAttemptPg(spool, attemptId, now, why),
    recordOutcomes: (inputs) => recordOutcomesPg(spool, inputs),
    recordEnds: (ends) => recordOutcomesPg(spool, ends),
    overdueOutcomes: (now, limit) => overdueOutcomesPg(spool, now, limit),
    nextReadyAt: (now) => nextReadyAtPg(spool, now),
    anyReadyNow: (now) => anyReadyNowPg(spool, now),
    redueConfigRetries: (now) => redueConfigRetriesPg(spool, now),
    watchWork: async (onWork) => {
      const sub = await listenForWork(spool, (readyAt) => onWork(readyAt));
      return () => sub.stop();
    },
    leads: (now, fresh) => lock.tryTake(now, fresh),
    release: async (host, pid) => {
      await lock.release();
      await forgetDispatcherPg(spool, beatId(host, pid));
    },
  };
}

/** A pull destination's API on PostgreSQL. */
export async function pgPullStore(spool: PgSpool): Promise<PullStore> {
  return {
    backend: "postgres",
    instanceId: await instanceIdPg(spool),
    effectiveNow: () => effectiveNowPg(spool),
    headsOf: (destination, now, limit) => headsOfPg(spool, destination, now, limit),
    claimBatches: (inputs) => claimPg(spool, inputs),
    getBatch: (id) => getBatchPg(spool, id),
    deliveryOf: (id) => deliveryOfPg(spool, id),
    recordEnds: (ends) => recordOutcomesPg(spool, ends),
    noteConsumer: (destination, consumer, now) => noteConsumerPg(spool, destination, consumer, now),
    pullConsumers: () => pullConsumersPg(spool),
  };
}

/** The operator's verbs on PostgreSQL; close() ends this process's pool. */
export function pgOperatorStore(spool: PgSpool): OperatorStore {
  return {
    backend: "postgres",
    ...pgIssues(spool),
    ...pgOutcomes(spool),
    ...pgJournalWatch(spool),
    getBatch: (id) => getBatchPg(spool, id),
    listBatches: (f) => listBatchesPg(spool, f),
    batchEvents: (id) => batchEventsPg(spool, id),
    batchPayloads: (id) => batchPayloadsPg(spool, id),
    batchAttempts: (id) => batchAttemptsPg(spool, id),
    deadBatchIds: (f) => deadBatchIdsPg(spool, f),
    deliveredBatchIds: (f) => deliveredBatchIdsPg(spool, f),
    quarantinedRequests: (id) => quarantinedRequestsPg(spool, id),
    replayBatch: (id, now, re) => replayBatchPg(spool, id, now, re),
    resendDelivered: (id, now) => resendDeliveredPg(spool, id, now),
    retryNow: (id, now) => retryNowPg(spool, id, now),
    splitBatch: (id, o, now) => splitBatchPg(spool, id, o, now),
    excludeEvents: (id, ids, now) => excludeEventsPg(spool, id, ids, now),
    dropBatches: (ids, now) => dropBatchesPg(spool, ids, now),
    pauseDestination: (name, by, now) => pauseDestinationPg(spool, name, by, now),
    resumeDestination: (name, now) => resumeDestinationPg(spool, name, now),
    releaseBudget: (name, now) => releaseBudgetPg(spool, name, now),
    budgetSpends: (name, windowS, now, group) => budgetSpendsPg(spool.sql, name, windowS, now, group),
    destinationNames: () => destinationNamesPg(spool),
    newestEventId: () => newestEventIdPg(spool),
    followEvent: (o) => followEvent(followReadsPg(spool), o),
    spooledDedupIds: (source, ids) => spooledDedupIdsPg(spool, source, ids),
    storedRequests: (o) => storedRequestsPg(spool, o),
    listIssues: (f) => listIssuesPg(spool, f),
    setIssueState: (id, verb, now) => setIssueStatePg(spool, id, verb, now),
    enqueue: (ev, now) => enqueuePg(spool, ev, now),
    runRetention: (policy, now) => runRetentionPg(spool, policy, now),
    namedBodies: (hashes) => namedBodiesPg(spool, hashes),
    // The server keeps the space: its autovacuum gives it back.
    spoolFile: null,
    vacuum: async () => {
      throw new Error("VACUUM of a PostgreSQL spool is the server's to run");
    },
    exportBatches: (filter) => exportBatchesPg(spool, filter),
    checkIntegrity: async () => null,
    close: () => spool.close(),
  };
}

const tailRowPg = (r: JournalRow & { xid: string }): TailRow => {
  const { xid, ...row } = r;
  return { ...row, cursor: formatPgCursor({ xid, id: r.id }) };
};

/**
 * The dashboard's reads and actions on PostgreSQL, the same answers as on SQLite. The tail's
 * cursor is the journal's (xid, id): a row of a transaction still running is never passed over.
 * The newest heartbeat stands for "the dispatcher"; ages come from the database's clock.
 */
export function pgDashboardStore(spool: PgSpool): DashboardStore {
  return {
    backend: "postgres",
    getBatch: (id) => getBatchPg(spool, id),
    listBatches: (f) => listBatchesPg(spool, f),
    batchEvents: (id) => batchEventsPg(spool, id),
    batchPayloads: (id) => batchPayloadsPg(spool, id),
    batchAttempts: (id) => batchAttemptsPg(spool, id),
    listIssues: (f) => listIssuesPg(spool, f),
    statusFacts: async ({ now, paces, budgets, staleS }) => {
      const windows = new Map(
        await Promise.all(
          [...paces].map(async ([name, p]) => [name, await rateWindowPg(spool.sql, name, now, p.rate)] as const),
        ),
      );
      const spends = new Map(
        await Promise.all(
          [...budgets].map(
            async ([name, windowS]) =>
              [name, windowS === null ? [] : await budgetSpendsPg(spool.sql, name, windowS, now)] as const,
          ),
        ),
      );
      const [
        schema,
        beats,
        maintenance,
        batches,
        deadReasons,
        pending,
        rows,
        names,
        leased,
        meta,
        polls,
        issuesOpen,
        bytes,
        consumers,
        pullLeased,
        probes,
      ] = await Promise.all([
        pgSchemaVersion(spool),
        dispatchersPg(spool, staleS),
        maintenanceHolder(spool),
        countBatchesPg(spool),
        deadByReasonPg(spool),
        oldestPendingPg(spool),
        destinationRowsPg(spool),
        destinationNamesPg(spool),
        leasedCountsPg(spool),
        metaNumbersPg(spool),
        pollRowsPg(spool),
        openIssueCountPg(spool),
        databaseBytesPg(spool),
        pullConsumersPg(spool),
        leasedByConsumerPg(spool),
        probeRecordsPg(spool),
      ]);
      const newest = beats.reduce<(typeof beats)[number] | null>(
        (a, b) => (a === null || b.heartbeatAgeS < a.heartbeatAgeS ? b : a),
        null,
      );
      const pid = newest ? Number(newest.id.split(":").pop()) : Number.NaN;
      return {
        backend: "postgres",
        schema,
        heartbeatAt: newest ? now - newest.heartbeatAgeS : null,
        dispatcherPid: Number.isSafeInteger(pid) ? pid : null,
        dispatchers: beats.map((b) => ({
          id: b.id,
          heartbeat_age_s: Math.round(b.heartbeatAgeS * 10) / 10,
          alive: b.alive,
        })),
        maintenance,
        batches,
        deadReasons,
        pending,
        destinationRows: rows,
        destinationNames: names,
        leased,
        meta: (key) => meta.get(key) ?? null,
        polls,
        issuesOpen,
        spoolBytes: bytes,
        windows,
        budgetSpends: spends,
        pullConsumers: consumers,
        pullLeased,
        probes,
      };
    },
    readyCounts: (now) => readyCountsPg(spool, now),
    eventsBySource: (b) => eventsBySourcePg(spool, b),
    attemptsByOutcome: (b) => attemptsByOutcomePg(spool, b),
    readyToOkLatency: (b) => readyToOkLatencyPg(spool, b),
    quarantineReasons: (since) => quarantineReasonsPg(spool, since),
    recentActions: (limit) => recentActionsPg(spool, limit),
    act: (at, c) =>
      recordActionPg(spool, actionOf(at, c), async (tx) => {
        if (c.verb === "replay") await replayBatchPg(tx, c.batch, at);
        else if (c.verb === "retry") await retryNowPg(tx, c.batch, at);
        else if (c.verb === "pause") await pauseDestinationPg(tx, c.destination, c.by, at);
        else if (c.verb === "resume") requireResumed(await resumeDestinationPg(tx, c.destination, at), c.destination);
        else if ("issue" in c) requireIssueChanged(await setIssueStatePg(tx, c.issue, c.verb, at), c.issue, c.verb);
      }),
    journalTail: async (limit) => {
      const { rows, cursor } = await journalLastPg(spool, limit);
      return { rows: rows.map(tailRowPg), cursor: formatPgCursor(cursor) };
    },
    journalAfter: async (cursor, limit) =>
      (await journalAfterPg(spool, parsePgCursor(cursor) ?? PG_CURSOR_START, limit)).rows.map(tailRowPg),
  };
}
