// One delivery, from a claim to its recorded outcome: the batch's document, the destination's
// attempt under one deadline (timeout_s, or the worker deadline if sooner), the emits of a
// delivered script, the outcome through the writer shared by the attempts that end together,
// and one log line for the attempt and each breaker change.
import type { Clock, Rng } from "../clock.ts";
import type { IntakeSource } from "../config/sources.ts";
import { awaitPolicy } from "../config/destinations.ts";
import type { Config } from "../config/types.ts";
import { Deadline, type Destination, outcome, type Outcome } from "../delivery.ts";
import type { Logger } from "../log.ts";
import type { DispatchStore } from "../store/api.ts";
import type { NewEvent } from "../store/enqueue.ts";
import type { Policy } from "../store/outcome-plan.ts";
import type { Candidate, Claim } from "../store/queue.ts";
import { testHook } from "../testhook.ts";
import { rateMarginS } from "../pacing.ts";
import { countStale } from "../obs/counters.ts";
import { buildDocument } from "./document.ts";
import { type BodyContext, resolveBodies } from "./bodies.ts";
import { resolveEmit } from "./emits.ts";
import type { OutcomeWriter } from "./outcomes.ts";

/** A worker aborts this long before its lease ends, so a live owner never loses it. */
export const DEADLINE_MARGIN_S = 5;

export function policyOf(c: Config): Policy {
  const d = c.dispatch;
  return {
    maxAttempts: d.max_attempts,
    backoffBaseS: d.backoff_base_s,
    backoffCapS: d.backoff_cap_s,
    tripAfter: d.breaker.trip_after,
    cooldownInitialS: d.breaker.cooldown_initial_s,
    cooldownMaxS: d.breaker.cooldown_max_s,
  };
}

/** What a delivery needs from its dispatcher. */
export interface WorkerDeps {
  store: DispatchStore;
  clock: Clock;
  rng: Rng;
  log: Logger;
  /** The config in force and the source plugins (both follow reloads). */
  config(): Config;
  sources(): Map<string, IntakeSource> | null;
  /** Each live worker's deadline: a clock jump past it ends the attempt at once. */
  deadlines: Map<string, Deadline>;
  outcomes: OutcomeWriter;
  /** Where bodies kept in files are, and body_url's base; unset, such events go as stored. */
  bodies?: BodyContext;
}

/** How long a 429 without Retry-After first gates `dest`: its rate's window and margin; undefined without a rate. */
function throttleGate(dest: Destination | null): number | undefined {
  const pace = dest?.pace();
  return pace ? pace.rate.windowS + rateMarginS(pace.rate) : undefined;
}

export async function deliverClaim(
  w: WorkerDeps,
  c: Candidate,
  dest: Destination | null,
  claim: Claim,
  startedAt: number,
  probe: boolean,
): Promise<void> {
  const { store, clock, log } = w;
  const t0 = performance.now();
  let o: Outcome;
  let emits: NewEvent[] = [];
  const delivery = await store.deliveryOf(c.id);
  if (!delivery) {
    // Claimed and gone (nothing deletes a leased batch, but never leave the attempt to its lease).
    await store.abandonAttempt(claim.attemptId, await store.effectiveNow(), "batch missing after claim");
    log.warn("batch missing after claim; attempt closed", { destination: c.destination, batch: c.id });
    return;
  }
  let content = delivery.content;
  let refusal: Outcome | null = null;
  if (dest && w.bodies && content.some((e) => e.body_file)) {
    const withRefs = buildDocument({ batch: delivery.batch, content, deliveryId: claim.deliveryId ?? "", attempt: 0 });
    const large = w.config().destinations[c.destination]?.large;
    const r = await resolveBodies(content, Buffer.byteLength(withRefs.body), dest, large, w.bodies);
    if (Array.isArray(r)) content = r;
    else refusal = r;
  }
  const doc = buildDocument({
    batch: delivery.batch,
    content,
    deliveryId: claim.deliveryId ?? "",
    attempt: claim.n,
  });
  // This lease judged the batch (its first: it fixed the floor): what the stale rules made of it counts once.
  if (delivery.batch.floor_at === startedAt) countStale(doc);
  if (!dest) {
    o = outcome({
      kind: "retry",
      klass: "config",
      reason: "unknown destination",
      detail: `no destination named ${c.destination} in the config`,
    });
  } else if (refusal) {
    o = refusal;
  } else if (doc.allSkipped) {
    // Every event is older than its key's last delivered version and its route skips them:
    // nothing is sent, and the batch is delivered as such (result "stale", nothing said of the
    // destination).
    o = outcome({ kind: "ok", reason: "stale", sent: 0 });
  } else {
    // The attempt's one deadline: timeout_s, or the worker deadline if sooner.
    // The lease ends at lease_until in now_eff terms (the database's clock on PostgreSQL; one
    // standing still after a backwards step on SQLite): the worker deadline is the lease's length
    // from its start, on this host's clock.
    const workerAt = clock.now() + (claim.leaseUntil - startedAt) - DEADLINE_MARGIN_S;
    const deadline = new Deadline({ timeoutS: dest.timeoutS, workerAt, clock });
    w.deadlines.set(claim.owner, deadline);
    // A retry of an unwrap delivery: where its earlier attempts left off.
    const resume = dest.unwrap && claim.n > 1 ? ((await store.resumePoint(c.id)) ?? undefined) : undefined;
    testHook("deliver.before_request");
    try {
      o = await dest.deliver(doc.body, {
        batchId: c.id,
        attempt: claim.n,
        deliveryId: claim.deliveryId ?? "",
        resend: claim.resend,
        resume,
        deadline,
        events: doc.events,
        // Config's event_header, else the source plugin's (GitHub's X-GitHub-Event).
        eventHeader:
          w.config().sources[c.source]?.event_header ?? w.sources()?.get(c.source)?.plugin.eventHeader ?? null,
        clock,
        log,
      });
    } catch (e) {
      // A destination must not throw; if one does, retrying is the safe reading.
      o = outcome({ kind: "retry", klass: "transport", reason: "destination error", detail: (e as Error).name });
    } finally {
      deadline.dispose();
      w.deadlines.delete(claim.owner);
    }
    // Crash point: the receiver accepted it and the mark has not been written yet.
    if (o.kind === "ok") testHook("deliver.after_response");
    if (o.kind === "ok" && o.emits.length) {
      try {
        const processorOf = w.config().destinations[c.destination]?.processor;
        emits = o.emits.map((e) => resolveEmit(w.config(), w.sources() ?? new Map(), e, clock.now(), processorOf));
      } catch (e) {
        o = outcome({
          kind: "retry",
          klass: "batch",
          reason: "bad emit",
          detail: (e as Error).message,
          badEmit: true,
          status: o.status,
        });
        emits = [];
      }
    }
  }
  const durationMs = performance.now() - t0;
  const r = await w.outcomes.record({
    batchId: c.id,
    destination: c.destination,
    attemptId: claim.attemptId,
    owner: claim.owner,
    startedAt,
    probe,
    script: dest?.type === "script",
    outcome: o,
    emits,
    durationMs,
    jitter: w.rng.next(),
    policy: policyOf(w.config()),
    // A 429 without Retry-After gates a paced destination for its window (and its margin).
    throttleGateS: throttleGate(dest),
    ignoredIssueAfter: dest?.ignoredIssueAfter,
    // outcome = "await": a 2xx that starts a run leaves the batch awaiting its outcome.
    awaitOutcomeS: awaitPolicy(w.config(), c.destination)?.timeoutS,
    ...(dest && doc.allSkipped ? { unsent: "stale" as const } : {}),
  });
  const fields = {
    destination: c.destination,
    batch: c.id,
    attempt: claim.n,
    status: o.status ?? undefined,
    duration_ms: Math.round(durationMs),
  };
  if (!r.applied) log.warn("lease lost; result discarded", fields);
  else if (r.state === "delivered")
    log.info("delivered", {
      ...fields,
      reason: o.answer ? `${o.answer}${o.unconfirmed ? ", unconfirmed" : ""}` : undefined,
    });
  else if (r.state === "awaiting")
    log.info("accepted; awaiting the outcome", { ...fields, reason: o.answer ?? undefined });
  else log.warn(r.state === "dead" ? "dead" : "retry", { ...fields, reason: `${r.klass}: ${o.reason}` });
  // One line per breaker state change (the per-attempt lines say the rest).
  if (r.applied && r.breaker === "opened")
    log.warn("breaker open: deliveries held, one probe after the cooldown", {
      destination: c.destination,
      batch: c.id,
      reason: o.reason,
    });
  if (r.applied && r.breaker === "reopened")
    log.warn("breaker open again: the probe failed, cooldown doubled", {
      destination: c.destination,
      batch: c.id,
      reason: o.reason,
    });
  if (r.applied && r.breaker === "closed")
    log.info("breaker closed: the destination answered", { destination: c.destination, batch: c.id });
}
