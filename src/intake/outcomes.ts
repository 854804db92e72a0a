// POST /outcomes/<webhook-id>: a receiver reports the outcome of the run one of our deliveries
// started, signed as our deliveries are (Standard Webhooks headers, with that destination's
// signing secret, its webhook-id the delivery's own), so only the receiver can settle it. The
// body is {"status": "ok"|"failed", "reason": "...", "permanent": false}. An unknown id is 404,
// an unsigned or forged report 401, a delivery whose outcome is in already 409; nothing of the
// body is ever logged.
import type { Clock, Rng } from "../clock.ts";
import type { Env } from "../config/secrets.ts";
import type { Config } from "../config/types.ts";
import { makeDestination } from "../destinations/registry.ts";
import { policyOf } from "../dispatch/worker.ts";
import type { Logger } from "../log.ts";
import { standardWebhooksWhy } from "../plugin/verify.ts";
import type { OutcomeStore } from "../store/api.ts";
import { type AwaitedDelivery, REASON_MAX, type ReportInput, type Reported } from "../store/awaiting-plan.ts";
import { emptyReply, type Reply, statusReply } from "./replies.ts";

/** An outcome's body is a few words: anything longer is refused unread. */
export const OUTCOME_MAX_BYTES = 4096;

/** The path, with the id it names (a hookspool delivery id, or nothing this endpoint answers for). */
const PATH = /^\/outcomes\/(hs_[A-Za-z0-9_]{1,120})\/?$/;

export function outcomePath(path: string): string | null | "malformed" {
  if (!path.startsWith("/outcomes/")) return null;
  return PATH.exec(path)?.[1] ?? "malformed";
}

export interface OutcomeDeps {
  store: OutcomeStore;
  config(): Config;
  clock: Clock;
  rng: Rng;
  log: Logger;
  env?: Env;
}

export interface OutcomeRequest {
  deliveryId: string;
  method: string;
  headers: Headers;
  readBody(cap: number): Promise<Uint8Array | "too_large">;
}

interface Body {
  status: "ok" | "failed";
  reason: string | null;
  permanent: boolean;
}

/** The body's fields, or null when it is not the outcome's JSON object. */
function parseBody(bytes: Uint8Array): Body | null {
  let doc: unknown;
  try {
    doc = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes));
  } catch {
    return null;
  }
  if (typeof doc !== "object" || doc === null || Array.isArray(doc)) return null;
  const o = doc as Record<string, unknown>;
  if (o.status !== "ok" && o.status !== "failed") return null;
  if (o.reason !== undefined && o.reason !== null && typeof o.reason !== "string") return null;
  if (o.permanent !== undefined && typeof o.permanent !== "boolean") return null;
  if (o.permanent === true && o.status !== "failed") return null;
  return {
    status: o.status,
    reason: typeof o.reason === "string" ? o.reason.slice(0, REASON_MAX) : null,
    permanent: o.permanent === true,
  };
}

/** How long a report waits for the dispatcher to record the 2xx of a delivery still in flight. */
export const IN_FLIGHT_WAIT_MS = 10_000;

/**
 * Report an outcome; when its delivery's request is still in flight (a fast receiver reports
 * before the dispatcher has recorded the 2xx that started the run), wait for that record first,
 * up to IN_FLIGHT_WAIT_MS, so an early report is never lost as unknown.
 */
export async function reportWhenRecorded(
  store: OutcomeStore,
  r: Omit<ReportInput, "now">,
  now: () => number,
  known?: AwaitedDelivery | null,
  waitMs = IN_FLIGHT_WAIT_MS,
): Promise<Reported> {
  const until = performance.now() + waitMs;
  // Reads while the request is in flight (the caller's own read first), so the wait costs no write.
  let target = known === undefined ? await store.awaitedDelivery(r.deliveryId) : known;
  while (target?.inFlight && performance.now() < until) {
    await Bun.sleep(5);
    target = await store.awaitedDelivery(r.deliveryId);
  }
  return store.reportOutcome({ ...r, now: now() });
}

/** Verify and apply one reported outcome; a spool that cannot answer (busy, full) is 503, to be sent again. */
export async function handleOutcome(deps: OutcomeDeps, req: OutcomeRequest): Promise<Reply> {
  try {
    return await answerOutcome(deps, req);
  } catch (e) {
    deps.log.warn("outcome not recorded: the spool refused it; the receiver may send it again", {
      reason: (e as Error).name,
    });
    return emptyReply(503, { "Retry-After": "10" });
  }
}

async function answerOutcome(deps: OutcomeDeps, req: OutcomeRequest): Promise<Reply> {
  if (req.method !== "POST") return emptyReply(405, { Allow: "POST" });
  const declared = Number(req.headers.get("content-length") ?? "0");
  if (declared > OUTCOME_MAX_BYTES) return emptyReply(413);
  const bytes = await req.readBody(OUTCOME_MAX_BYTES);
  if (bytes === "too_large") return emptyReply(413);
  const target = await deps.store.awaitedDelivery(req.deliveryId);
  if (!target) return statusReply("unknown", 404);
  const config = deps.config();
  const dest = makeDestination(config, target.destination, {
    env: deps.env ?? {},
    clock: deps.clock,
    instanceId: "outcome",
  });
  const secrets = dest?.outcomeSecrets() ?? [];
  // Signed for this very delivery: a report captured for one id cannot settle another.
  const h = req.headers;
  const signed =
    secrets.length > 0 &&
    h.get("webhook-id") === req.deliveryId &&
    standardWebhooksWhy(
      { id: h.get("webhook-id"), timestamp: h.get("webhook-timestamp"), signature: h.get("webhook-signature") },
      secrets,
      bytes,
      { now: deps.clock.now() },
    ) === null;
  if (!signed) {
    deps.log.warn("outcome refused: not signed for the delivery", {
      destination: target.destination,
      batch: target.batchId,
    });
    return statusReply("unverified", 401);
  }
  const body = parseBody(bytes);
  if (!body) return statusReply("bad_outcome", 400);
  const r = await reportWhenRecorded(
    deps.store,
    { deliveryId: req.deliveryId, ...body, via: "http", jitter: deps.rng.next(), policy: policyOf(config) },
    () => deps.clock.now(),
    target,
  );
  if (r.kind === "unknown") return statusReply("unknown", 404);
  if (r.kind === "settled_already") return statusReply("settled", 409);
  deps.log.info("outcome reported", {
    destination: r.destination,
    batch: r.batchId,
    reason: r.state === "dead" ? `dead: ${r.deadReason}` : r.state,
  });
  return {
    status: 200,
    body: JSON.stringify({ status: r.state, batch_id: r.batchId }),
    headers: { "Content-Type": "application/json" },
  };
}
