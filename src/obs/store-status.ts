// The status document from the store's facts on either backend (/healthz and /metrics read it
// so): the config's paces and budgets added, and, where the store leaves the file to the caller
// (SQLite), the spool file's size and the free space of its disk.
import type { Config } from "../config/types.ts";
import type { Env } from "../config/secrets.ts";
import type { StatusStore } from "../store/api.ts";
import { diskFreeBytes, spoolBytes } from "./disk.ts";
import {
  assembleStatus,
  budgetedDestinations,
  HEARTBEAT_STALE_S,
  pacedDestinations,
  type StatusDoc,
  type StatusFacts,
  type StatusInputs,
} from "./status.ts";

/** The facts of the store's spool; `dbPath` is SQLite's file (unused where the database measures itself). */
export async function storeStatusFacts(
  store: Pick<StatusStore, "statusFacts">,
  config: Config,
  dbPath: string,
  o: { now: number; diskFree?: number | null; env?: Env },
): Promise<StatusFacts> {
  const paces = pacedDestinations(config, o.env);
  const policies = budgetedDestinations(config);
  const windows = new Map([...policies].map(([name, p]) => [name, p.budget ? p.budget.windowS : null]));
  const { budgetSpends, ...stored } = await store.statusFacts({
    now: o.now,
    paces,
    budgets: windows,
    staleS: HEARTBEAT_STALE_S,
  });
  // spoolBytes null: the store leaves its file to the caller, which measures it and its disk here.
  const onFile = stored.spoolBytes === null;
  return {
    ...stored,
    paces,
    budgets: new Map([...policies].map(([name, policy]) => [name, { policy, spends: budgetSpends.get(name) ?? [] }])),
    spoolBytes: stored.spoolBytes ?? spoolBytes(dbPath),
    diskFree: !onFile ? null : o.diskFree !== undefined ? o.diskFree : diskFreeBytes(dbPath),
  };
}

/** The status document and whether /healthz answers 503, from the store's facts. */
export async function storeStatus(
  store: StatusStore,
  config: Config,
  dbPath: string,
  inp: StatusInputs & { env?: Env },
): Promise<{ doc: StatusDoc; hard: boolean }> {
  return assembleStatus(
    await storeStatusFacts(store, config, dbPath, { now: inp.now, diskFree: inp.diskFree, env: inp.env }),
    config,
    inp,
  );
}
