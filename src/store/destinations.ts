// A destination's row as both backends keep it (its breaker and pause state, the Retry-After
// and 429 gates, the probe) and the breaker's verdict on a transport failure, decided once.
/** The breaker and pause states of a destination, as the schema's CHECK lists them. */
export const DESTINATION_STATES = ["closed", "open", "half_open", "paused"] as const;

export type DestinationState = (typeof DESTINATION_STATES)[number];

export interface DestinationRow {
  name: string;
  state: DestinationState;
  consecutive_failures: number;
  opened_at: number | null;
  cooldown_s: number | null;
  probe_until: number | null;
  last_probe_batch_id: number | null;
  paused_at: number | null;
  paused_by: string | null;
  last_ok_at: number | null;
  last_error: string | null;
  retry_after_until: number | null;
  /** A 429 without Retry-After gated it at this time: after the gate, one delivery goes as a probe. */
  throttled_at: number | null;
  /** How long that gate lasts (doubling while probes are throttled again). */
  throttle_s: number | null;
}

/** The row of a destination never seen: closed, nothing held. */
export function closedRow(name: string): DestinationRow {
  return {
    name,
    state: "closed",
    consecutive_failures: 0,
    opened_at: null,
    cooldown_s: null,
    probe_until: null,
    last_probe_batch_id: null,
    paused_at: null,
    paused_by: null,
    last_ok_at: null,
    last_error: null,
    retry_after_until: null,
    throttled_at: null,
    throttle_s: null,
  };
}

export interface FailureInput {
  now: number;
  /** When the failed attempt started: only an attempt started after opened_at is a probe. */
  startedAt: number;
  tripAfter: number;
  cooldownInitialS: number;
  cooldownMaxS: number;
  error: string;
}

export type FailureEffect = "counted" | "tripped" | "retripped" | "ignored";

/** What a transport failure changes in the destination's row. */
export type BreakerChange =
  | { effect: "tripped" | "retripped"; consecutive_failures: number; opened_at: number; cooldown_s: number }
  | { effect: "counted"; consecutive_failures: number }
  | { effect: "ignored" };

/**
 * The breaker's verdict on a transport failure: closed counts it and trips open at trip_after
 * (the initial cooldown); open or half_open re-trips only on a probe's failure (an attempt that
 * started after opened_at), doubling the cooldown up to its maximum; any other failure (one that
 * was in flight when the breaker opened) is ignored. Both backends apply it to the row they hold.
 */
export function breakerOnFailure(d: DestinationRow, f: FailureInput): BreakerChange {
  const n = d.consecutive_failures + 1;
  if (d.state === "closed") {
    if (n >= f.tripAfter)
      return { effect: "tripped", consecutive_failures: n, opened_at: f.now, cooldown_s: f.cooldownInitialS };
    return { effect: "counted", consecutive_failures: n };
  }
  if ((d.state === "open" || d.state === "half_open") && d.opened_at !== null && f.startedAt > d.opened_at) {
    return {
      effect: "retripped",
      consecutive_failures: n,
      opened_at: f.now,
      cooldown_s: Math.min(f.cooldownMaxS, (d.cooldown_s ?? f.cooldownInitialS) * 2),
    };
  }
  return { effect: "ignored" };
}
