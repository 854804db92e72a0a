// The destination gate in a tick: the rule of store/gate-plan.ts (paused, Retry-After and 429
// gates, the breaker and its probe, max_inflight, the rate) over what the store holds for one
// destination. An open breaker whose cooldown is over moves to half_open here (one write); the
// rate window is read only when nothing else holds the destination.
import type { Pace } from "../delivery.ts";
import type { DispatchStore } from "../store/api.ts";
import { decideGate, type GateDecision, type GateFacts } from "../store/gate-plan.ts";

export type { GateDecision } from "../store/gate-plan.ts";

export interface Gate extends GateDecision {
  /** This call moved the breaker from open to half_open (worth one log line). */
  halfOpened: boolean;
}

/**
 * The gate of `name` now, with `inflight` of its deliveries running here: how many may start,
 * whether as a probe, how many requests its rate has room for, and what holds the rest.
 * `need` is the hits its next delivery takes.
 */
export async function gate(
  store: DispatchStore,
  name: string,
  now: number,
  inflight: number,
  maxInflight: number,
  pace: Pace | null,
  need = 1,
): Promise<Gate> {
  let row = await store.destinationState(name);
  const facts = (): GateFacts => ({ row, inflight, maxInflight, now, rate: null, window: [] });
  let d = decideGate(facts());
  let halfOpened = false;
  if (d.cooled) {
    if (!(await store.halfOpenIfCooled(name, now))) return { ...d, cooled: false, halfOpened };
    halfOpened = true;
    row = await store.destinationState(name);
    d = decideGate(facts());
  }
  if (d.slots > 0 && pace)
    d = decideGate({ ...facts(), rate: pace.rate, window: await store.rateWindow(name, now, pace.rate) }, need);
  return { ...d, halfOpened };
}

/** The probe: the oldest due batch that is not the last probe's, else the only one. */
export function pickProbe<T extends { id: number }>(due: T[], lastProbeBatchId: number | null): T | undefined {
  return due.find((b) => b.id !== lastProbeBatchId) ?? due[0];
}
