// The dispatcher's side of awaited outcomes: each tick, an awaiting batch whose outcome is
// overdue is settled as its destination's on_timeout says (retry: delivered again, a counted
// attempt; delivered: the 2xx taken as done), through the same store call as a reported outcome.
import type { Rng } from "../clock.ts";
import { awaitPolicy } from "../config/destinations.ts";
import type { Config } from "../config/types.ts";
import type { Logger } from "../log.ts";
import type { DispatchStore } from "../store/api.ts";
import { policyOf } from "./worker.ts";

/** Overdue outcomes settled per tick at most (the rest the next tick takes, at once). */
export const OVERDUE_PER_TICK = 200;

/** Settle the outcomes overdue at `now`; returns how many it settled. */
export async function timeOutOutcomes(
  store: DispatchStore,
  config: Config,
  now: number,
  rng: Rng,
  log: Logger,
): Promise<number> {
  let settled = 0;
  for (const o of await store.overdueOutcomes(now, OVERDUE_PER_TICK)) {
    if (o.deliveryId === null) continue;
    const onTimeout = awaitPolicy(config, o.destination)?.onTimeout ?? "retry";
    const r = await store.reportOutcome({
      deliveryId: o.deliveryId,
      status: "timeout",
      reason: null,
      permanent: false,
      via: "timeout",
      now,
      jitter: rng.next(),
      policy: policyOf(config),
      onTimeout,
    });
    if (r.kind !== "settled") continue;
    settled++;
    log.warn(
      r.state === "delivered"
        ? "outcome overdue: taken as delivered"
        : r.state === "retry"
          ? "outcome overdue: delivering again"
          : "outcome overdue: dead",
      {
        destination: o.destination,
        batch: o.batchId,
        reason: r.deadReason,
      },
    );
  }
  return settled;
}
