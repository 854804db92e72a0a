// What the tick asks the store for when it claims a candidate on a lane: the lease's end (the
// destination's timeout plus lease_grace_s), the gate's facts the store checks again under its
// lock (max_inflight, the probe, the rate's hits, the run budgets on PostgreSQL), and how the
// attempt's delivery id is made once the store has given the attempt its id.
import type { Config } from "../config/types.ts";
import { budgetPolicy, destinationSettings } from "../config/destinations.ts";
import { deliveryId } from "../delivery.ts";
import type { Candidate, ClaimInput } from "../store/queue.ts";
import type { Lane } from "./share.ts";

/** Who claims: the config, the spool's instance id (in every delivery id), this host and process. */
export interface Claimer {
  config: Config;
  instance: string;
  host: string;
  pid: number;
}

export function claimInputOf(
  who: Claimer,
  c: Candidate,
  lane: Lane,
  now: number,
  hits: number,
): ClaimInput & { route: string; key: string } {
  const dest = lane.dest;
  const timeoutS = dest?.timeoutS ?? destinationSettings(who.config, c.destination)?.timeout_s ?? 30;
  const idempotency = dest?.idempotency ?? "per-batch";
  return {
    batchId: c.id,
    route: c.route,
    key: c.key,
    destination: c.destination,
    now,
    leaseUntil: now + timeoutS + who.config.dispatch.lease_grace_s,
    host: who.host,
    pid: who.pid,
    probe: lane.probe,
    maxInflight: lane.maxInflight,
    ...(lane.pace ? { rate: lane.pace.rate, hits } : {}),
    // PostgreSQL counts the budgets' spends again under the destination's claim lock.
    ...(budgetPolicy(who.config, c.destination) ?? {}),
    deliveryId: (attemptId, _n, resend) =>
      deliveryId(
        idempotency === "per-event" ? "per-batch" : idempotency,
        who.instance,
        c.id,
        attemptId,
        undefined,
        resend,
      ),
  };
}
