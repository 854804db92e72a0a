// The destination gate as a rule (docs/state-machines.md): from a destination's row, what it
// has in flight and its rate window, how many deliveries may start now, whether the one that
// may is a probe, and what holds the rest back until when. Paused claims nothing; a Retry-After
// or 429 gate nothing before it ends; open nothing until its cooldown ends; half_open one
// rotating probe; after a 429 gate one delivery until it proves the receiver takes work again;
// closed up to max_inflight; and never more requests than the destination's rate leaves room
// for. The dispatcher applies it to what its tick read; PostgreSQL's claim applies it again
// under the destination's claim lock, where several dispatchers share the destination.
import { type Rate, type WindowHit, windowState } from "../pacing.ts";
import type { DestinationRow } from "./destinations.ts";

/** What holds a destination's next delivery back. */
export type GateHold = "paused" | "retry_after" | "open" | "probe" | "throttled" | "max_inflight" | "rate";

export interface GateFacts {
  row: DestinationRow;
  /** Deliveries in flight (the dispatcher's own count; on PostgreSQL every dispatcher's leases). */
  inflight: number;
  maxInflight: number;
  now: number;
  /** Its rate, with the hits that may still be in its window; null when it is not paced. */
  rate: Rate | null;
  window: readonly WindowHit[];
}

export interface GateDecision {
  /** Deliveries that may start now. */
  slots: number;
  /** The one that may start is the half-open breaker's probe. */
  probe: boolean;
  /** Requests the rate leaves room for (Infinity when not paced). */
  hits: number;
  /** The batch the last probe carried: the next probe rotates away from it. */
  lastProbeBatchId: number | null;
  /** The breaker is open and its cooldown is over: move it to half_open, then ask again. */
  cooled: boolean;
  /** What holds the rest back, and until when it may (null: until a delivery ends, or an operator acts). */
  held: { why: GateHold; until: number | null } | null;
}

const shut = (why: GateHold, until: number | null): GateDecision => ({
  slots: 0,
  probe: false,
  hits: 0,
  lastProbeBatchId: null,
  cooled: false,
  held: { why, until },
});

/** The gate's decision; `need` is the hits the next delivery would take (for when the rate frees them). */
export function decideGate(f: GateFacts, need = 1): GateDecision {
  const d = f.row;
  const now = f.now;
  if (d.state === "paused") return shut("paused", null);
  if (d.retry_after_until !== null && d.retry_after_until > now)
    return shut(d.throttled_at !== null ? "throttled" : "retry_after", d.retry_after_until);
  if (d.state === "open") {
    const until = d.opened_at !== null && d.cooldown_s !== null ? d.opened_at + d.cooldown_s : null;
    if (until === null || now < until) return shut("open", until);
    return { ...shut("open", null), cooled: true };
  }
  let slots: number;
  let probe = false;
  let held: GateDecision["held"] = null;
  if (d.state === "half_open") {
    // Exactly one probe; nothing else while probe_until > now.
    if (d.probe_until !== null && d.probe_until > now) return shut("probe", d.probe_until);
    if (f.inflight > 0) return shut("probe", null);
    slots = 1;
    probe = true;
    held = { why: "probe", until: null };
  } else if (d.throttled_at !== null) {
    // After a 429 gate one delivery goes first, and the rest wait for what it is answered.
    if (f.inflight > 0) return shut("throttled", null);
    slots = 1;
    held = { why: "throttled", until: null };
  } else {
    slots = Math.max(0, f.maxInflight - f.inflight);
    if (slots === 0) return shut("max_inflight", null);
  }
  let hits = Number.POSITIVE_INFINITY;
  if (f.rate) {
    const w = windowState(f.rate, f.window, now, need);
    hits = w.room;
    if (w.room < need) return shut("rate", w.nextFreeAt === Number.POSITIVE_INFINITY ? null : w.nextFreeAt);
  }
  return { slots, probe, hits, lastProbeBatchId: probe ? d.last_probe_batch_id : null, cooled: false, held };
}

/**
 * Whether one claim is still admitted, as PostgreSQL's claim checks it under the destination's
 * claim lock with every dispatcher's leases counted: a probe only as the half-open breaker's
 * one probe, any other only when the gate has a slot, and only when the rate has room for its hits.
 */
export function admits(f: GateFacts, claim: { probe: boolean; hits: number }): boolean {
  const g = decideGate(f, claim.hits);
  if (g.slots < 1 || g.probe !== claim.probe) return false;
  return claim.hits <= g.hits;
}
