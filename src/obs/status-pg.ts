// The status document's facts on PostgreSQL: the same document as on SQLite, plus every
// dispatcher sharing the database (its heartbeat by the database's clock) and which one holds
// maintenance. The newest heartbeat stands for "the dispatcher"; the disk is the server's. And
// the same /metrics families, from the same facts.
import { destinationRowsPg } from "../store/pg/destinations.ts";
import type { PgSpool } from "../store/pg/db.ts";
import { dispatchersPg } from "../store/pg/meta.ts";
import { openIssueCountPg } from "../store/pg/issues.ts";
import { maintenanceHolder } from "../store/pg/leader.ts";
import { pgSchemaVersion } from "../store/pg/migrate.ts";
import { countBatchesPg, databaseBytesPg, deadByReasonPg, leasedCountsPg, oldestPendingPg, pollRowsPg } from "../store/pg/stats.ts";
import { destinationNamesPg } from "../store/pg/destinations.ts";
import { metaNumbersPg } from "../store/pg/meta.ts";
import { assembleStatus, budgetedDestinations, HEARTBEAT_STALE_S, pacedDestinations, type StatusFacts } from "./status.ts";
import type { BudgetPolicy } from "../config/destinations.ts";
import { budgetSpendsPg } from "../store/pg/budgets.ts";
import type { Pace } from "../delivery.ts";
import { rateWindowPg } from "../store/pg/queue.ts";
import type { Config } from "../config/types.ts";
import { caughtFamilies, renderMetrics } from "./metrics.ts";
import { attemptCountsPg, deliveredCountsPg, dispatchersCaughtPg } from "../store/pg/stats.ts";

const DAY_S = 86400;

export async function pgStatusFacts(pg: PgSpool, now: number, paces: ReadonlyMap<string, Pace>, budgeted: ReadonlyMap<string, BudgetPolicy> = new Map()): Promise<StatusFacts> {
  const windows = new Map(await Promise.all([...paces].map(async ([name, p]) => [name, await rateWindowPg(pg.sql, name, now, p.rate)] as const)));
  const budgets = new Map(
    await Promise.all([...budgeted].map(async ([name, policy]) => [name, { policy, spends: policy.budget ? await budgetSpendsPg(pg.sql, name, policy.budget.windowS, now) : [] }] as const)),
  );
  const [schema, beats, maintenance, batches, deadReasons, pending, rows, names, leased, meta, polls, issuesOpen, bytes] = await Promise.all([
    pgSchemaVersion(pg),
    dispatchersPg(pg, HEARTBEAT_STALE_S),
    maintenanceHolder(pg),
    countBatchesPg(pg),
    deadByReasonPg(pg),
    oldestPendingPg(pg),
    destinationRowsPg(pg),
    destinationNamesPg(pg),
    leasedCountsPg(pg),
    metaNumbersPg(pg),
    pollRowsPg(pg),
    openIssueCountPg(pg),
    databaseBytesPg(pg),
  ]);
  const newest = beats.reduce<(typeof beats)[number] | null>((a, b) => (a === null || b.heartbeatAgeS < a.heartbeatAgeS ? b : a), null);
  const pid = newest ? Number(newest.id.split(":").pop()) : Number.NaN;
  return {
    backend: "postgres",
    schema,
    // Ages come from the database's clock; as a time they are placed on the caller's.
    heartbeatAt: newest ? now - newest.heartbeatAgeS : null,
    dispatcherPid: Number.isSafeInteger(pid) ? pid : null,
    dispatchers: beats.map((b) => ({ id: b.id, heartbeat_age_s: Math.round(b.heartbeatAgeS * 10) / 10, alive: b.alive })),
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
    diskFree: null,
    paces,
    windows,
    budgets,
  };
}

/** The table-derived metrics on PostgreSQL: the status document's figures, attempts, deliveries, every dispatcher's caught failures. */
export async function pgMetricsText(pg: PgSpool, config: Config, now: number): Promise<string> {
  const { doc } = assembleStatus(await pgStatusFacts(pg, now, pacedDestinations(config), budgetedDestinations(config)), config, { now, hard: [] });
  const [attempts, delivered, caught] = await Promise.all([attemptCountsPg(pg, now - 30 * DAY_S), deliveredCountsPg(pg, now - 7 * DAY_S), dispatchersCaughtPg(pg)]);
  return renderMetrics({ doc, attempts, delivered, caught: caughtFamilies(caught) });
}
