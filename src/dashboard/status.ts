// The status document as the dashboard shows it: the store's facts on either backend, with the
// config's paces and budgets and, on SQLite, the spool file's size and its disk, assembled by
// the rules `status` and /healthz use.
import type { Config } from "../config/types.ts";
import { diskFreeBytes, spoolBytes } from "../obs/disk.ts";
import {
  assembleStatus,
  budgetedDestinations,
  HEARTBEAT_STALE_S,
  pacedDestinations,
  type StatusDoc,
  type StatusFacts,
} from "../obs/status.ts";
import type { DashboardStore } from "../store/api.ts";

/** The document, and the facts it was made of (the overview shows each gate's row too). */
export async function dashboardStatus(
  store: DashboardStore,
  config: Config,
  dbPath: string,
  now: number,
): Promise<{ doc: StatusDoc; facts: StatusFacts }> {
  const paces = pacedDestinations(config);
  const policies = budgetedDestinations(config);
  const windows = new Map([...policies].map(([name, p]) => [name, p.budget ? p.budget.windowS : null]));
  const f = await store.statusFacts({ now, paces, budgets: windows, staleS: HEARTBEAT_STALE_S });
  const { budgetSpends, ...stored } = f;
  const facts: StatusFacts = {
    ...stored,
    paces,
    budgets: new Map([...policies].map(([name, policy]) => [name, { policy, spends: budgetSpends.get(name) ?? [] }])),
    spoolBytes: f.spoolBytes ?? spoolBytes(dbPath),
    diskFree: f.backend === "sqlite" ? diskFreeBytes(dbPath) : null,
  };
  return { doc: assembleStatus(facts, config, { now, hard: [] }).doc, facts };
}
