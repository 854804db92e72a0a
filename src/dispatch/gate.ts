// The destination gate (docs/state-machines.md): paused or open claim nothing, half_open one
// rotating probe, closed up to max_inflight; a Retry-After deadline delays claiming without
// changing state.
import type { DispatchStore } from "../store/api.ts";

export interface GateDecision {
  /** How many batches may be claimed now. */
  slots: number;
  /** The one claim is a probe (half_open). */
  probe: boolean;
  /** The batch the last probe carried: the next probe rotates away from it. */
  lastProbeBatchId: number | null;
  /** This call moved the breaker from open to half_open (worth one log line). */
  halfOpened?: boolean;
}

const CLOSED_GATE: GateDecision = { slots: 0, probe: false, lastProbeBatchId: null };

export async function gate(store: DispatchStore, name: string, now: number, inflight: number, maxInflight: number): Promise<GateDecision> {
  let d = await store.destinationState(name);
  let halfOpened = false;
  if (d.state === "paused") return CLOSED_GATE;
  if (d.retry_after_until !== null && d.retry_after_until > now) return CLOSED_GATE;
  if (d.state === "open") {
    // The row already says whether the cooldown is over; a write only when it is.
    if (d.opened_at === null || d.cooldown_s === null || now < d.opened_at + d.cooldown_s) return CLOSED_GATE;
    if (!(await store.halfOpenIfCooled(name, now))) return CLOSED_GATE;
    halfOpened = true;
    d = await store.destinationState(name);
  }
  if (d.state === "half_open") {
    // Half open: exactly one probe; nothing else while probe_until > now
    if ((d.probe_until !== null && d.probe_until > now) || inflight > 0) return { ...CLOSED_GATE, halfOpened };
    return { slots: 1, probe: true, lastProbeBatchId: d.last_probe_batch_id, halfOpened };
  }
  return { slots: Math.max(0, maxInflight - inflight), probe: false, lastProbeBatchId: null };
}

/** The probe: the oldest due batch that is not the last probe's, else the only one. */
export function pickProbe<T extends { id: number }>(due: T[], lastProbeBatchId: number | null): T | undefined {
  return due.find((b) => b.id !== lastProbeBatchId) ?? due[0];
}
