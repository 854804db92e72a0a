// The status document as the dashboard shows it: the store's facts on either backend, assembled
// by the rules `status` and /healthz use (obs/store-status.ts), with the facts kept beside it.
import type { Config } from "../config/types.ts";
import { assembleStatus, type StatusDoc, type StatusFacts } from "../obs/status.ts";
import { storeStatusFacts } from "../obs/store-status.ts";
import type { DashboardStore } from "../store/api.ts";

/** The document, and the facts it was made of (the overview shows each gate's row too). */
export async function dashboardStatus(
  store: DashboardStore,
  config: Config,
  dbPath: string,
  now: number,
): Promise<{ doc: StatusDoc; facts: StatusFacts }> {
  const facts = await storeStatusFacts(store, config, dbPath, { now });
  return { doc: assembleStatus(facts, config, { now, hard: [] }).doc, facts };
}
