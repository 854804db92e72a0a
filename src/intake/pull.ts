// The pull API: a pull:<name> destination's batches wait, sealed, until a consumer leases them.
// POST /pull/<name>/lease?wait=S&max=N long-polls for the destination's ready heads and leases
// them through the dispatcher's own claim (the lease lasts the destination's timeout_s plus
// lease_grace_s; one that expires makes the batch ready again); POST /pull/<name>/ack ends each
// lease as ok, retry or dead through the dispatcher's outcome transaction, fenced by the lease's
// owner, so an expired and re-leased batch refuses the slow consumer's ack. Every request needs
// the destination's bearer token (compared in constant time; anything else, an unknown name
// included, is 401 without a body) and counts against its api_rate. No token, body or reason
// is ever logged.
import { randomBytes } from "node:crypto";
import type { Clock, Rng } from "../clock.ts";
import { destinationSettings, pullDestination } from "../config/destinations.ts";
import { resolveSecret, type Env } from "../config/secrets.ts";
import type { Config, SecretRef } from "../config/types.ts";
import { deliveryId, outcome, type Outcome } from "../delivery.ts";
import { buildDocument } from "../dispatch/document.ts";
import { countStale } from "../obs/counters.ts";
import { policyOf } from "../dispatch/worker.ts";
import type { Logger } from "../log.ts";
import { parseRate, type Rate } from "../pacing.ts";
import { constantTimeEqual } from "../plugin/verify.ts";
import type { PullStore } from "../store/api.ts";
import type { OutcomeEnd } from "../store/outcome-plan.ts";
import type { Claim } from "../store/queue.ts";
import { emptyReply, type Reply } from "./replies.ts";
import {
  type Ack,
  type AckVerdict,
  CONSUMER_HEADER,
  consumerName,
  formatLeaseId,
  leaseHost,
  ownsLease,
  parseLeaseId,
  PULL_ACK_MAX_BYTES,
  PULL_MAX_ACKS,
  PULL_MAX_LEASE,
  PULL_MAX_WAIT_S,
  PULL_REASON_MAX,
  type PullVerb,
} from "./pull-wire.ts";

/** A pull destination's API takes this many requests per rolling window unless api_rate says otherwise. */
export const DEFAULT_API_RATE: Rate = { limit: 600, windowS: 60 };
/** A waiting lease request looks for ready batches this often (and at once when woken). */
const LOOK_EVERY_MS = 250;

export interface PullDeps {
  store: () => Promise<PullStore>;
  config(): Config;
  clock: Clock;
  rng: Rng;
  log: Logger;
  env?: Env;
  /** A failure the API survives (a spool that refused a write, a bug): counted and logged where the intake's are. */
  caught(what: string, e: unknown): void;
}

export interface PullRequest {
  name: string;
  verb: PullVerb;
  method: string;
  headers: Headers;
  search: URLSearchParams;
  /** Aborted when the client goes away: a waiting lease stops looking. */
  signal: AbortSignal;
  /** Who asked (the peer, or the proxy's X-Forwarded-For from loopback), for the log line. */
  remote: string;
  readBody(cap: number): Promise<Uint8Array | "too_large">;
}

const json = (status: number, doc: unknown): Reply => ({
  status,
  body: JSON.stringify(doc),
  headers: { "Content-Type": "application/json" },
});
const problem = (status: number, error: string): Reply => json(status, { error });

/** A destination's API rate: its api_rate, else DEFAULT_API_RATE (a load refuses a malformed one). */
function apiRate(config: Config, destination: string): Rate {
  const text = config.destinations[destination]?.api_rate;
  if (text === undefined) return DEFAULT_API_RATE;
  try {
    return parseRate(text) ?? { limit: Number.MAX_SAFE_INTEGER, windowS: 1 };
  } catch {
    return DEFAULT_API_RATE;
  }
}

/** The bearer token given, or null. */
function bearer(headers: Headers): string | null {
  const m = /^Bearer ([\x21-\x7e]{1,512})$/.exec(headers.get("authorization") ?? "");
  return m ? m[1] : null;
}

export class PullApi {
  /** Each destination's requests in its api_rate window (their times). */
  private readonly windows = new Map<string, number[]>();
  /** Waiting lease requests, woken when this process may have made a batch ready. */
  private readonly waiters = new Set<() => void>();

  constructor(private readonly d: PullDeps) {}

  private closing = false;

  /** The intake stops: waiting leases answer now with what they have (nothing), so the stop does not wait on them. */
  close(): void {
    this.closing = true;
    this.wake();
  }

  /** Something in this process committed (an enqueue, a seal, an ack): waiting leases look again. */
  wake(): void {
    for (const w of [...this.waiters]) w();
  }

  async handle(req: PullRequest): Promise<Reply> {
    const config = this.d.config();
    const destination = pullDestination(config, req.name);
    // Every refusal is logged (the token never is), repeats counted rather than printed.
    const refuse = (reply: Reply, why: string): Reply => {
      this.d.log.limited("warn", "pull refused", {
        destination: destination ?? undefined,
        reason: why,
        remote: req.remote,
      });
      return reply;
    };
    // An unknown name answers as a wrong token does: the API says nothing of what exists.
    if (destination === null) return refuse(emptyReply(401), "no such pull destination");
    if (!this.authorized(config, destination, req.headers)) return refuse(emptyReply(401), "token refused");
    if (req.method !== "POST") return refuse(emptyReply(405, { Allow: "POST" }), `method ${req.method}`);
    const retryAfter = this.overRate(config, destination);
    if (retryAfter !== null) return refuse(emptyReply(429, { "Retry-After": String(retryAfter) }), "over api_rate");
    const consumer = consumerName(req.headers.get(CONSUMER_HEADER));
    if (consumer === null)
      return refuse(problem(400, `${CONSUMER_HEADER} must be 1-64 letters, digits, _ . -`), "bad consumer name");
    try {
      return await (req.verb === "lease" ? this.lease(req, destination, consumer) : this.ack(req, destination));
    } catch (e) {
      // A spool that cannot answer now (a held lock, a full disk) is an outage to come back
      // after, not a 500; a lease it had granted expires, an ack it refused is sent again.
      this.d.caught(`pull ${req.verb}`, e);
      return emptyReply(503, { "Retry-After": "5" });
    }
  }

  /** The token against every one the destination lists (a rotation), each read now. */
  private authorized(config: Config, destination: string, headers: Headers): boolean {
    const given = bearer(headers);
    const refs = config.destinations[destination]?.token;
    const list: SecretRef[] = refs === undefined ? [] : Array.isArray(refs) ? refs : [refs];
    let ok = false;
    for (const ref of list) {
      let secret: string;
      try {
        secret = resolveSecret(ref, this.d.env);
      } catch {
        this.d.log.limited("warn", "pull token unreadable", { destination });
        continue;
      }
      // Every token is compared, so the time taken does not say which one matched.
      if (given !== null && constantTimeEqual(given, secret)) ok = true;
    }
    return ok;
  }

  /** Seconds until the destination's window has room, or null when this request fits. */
  private overRate(config: Config, destination: string): number | null {
    const rate = apiRate(config, destination);
    const now = this.d.clock.now();
    const times = (this.windows.get(destination) ?? []).filter((t) => t > now - rate.windowS && t <= now);
    this.windows.set(destination, times);
    if (times.length >= rate.limit) return Math.max(1, Math.ceil(times[0] + rate.windowS - now));
    times.push(now);
    return null;
  }

  private async lease(req: PullRequest, destination: string, consumer: string): Promise<Reply> {
    const wait = Number(req.search.get("wait") ?? "30");
    const max = Number(req.search.get("max") ?? "10");
    if (!Number.isFinite(wait) || wait < 0 || wait > PULL_MAX_WAIT_S)
      return problem(400, `wait must be 0-${PULL_MAX_WAIT_S} seconds`);
    if (!Number.isSafeInteger(max) || max < 1 || max > PULL_MAX_LEASE)
      return problem(400, `max must be a whole number 1-${PULL_MAX_LEASE}`);
    const store = await this.d.store();
    const until = performance.now() + wait * 1000;
    for (;;) {
      const leased = await this.leaseReady(store, destination, consumer, max);
      if (leased.length > 0 || req.signal.aborted || this.closing || performance.now() >= until) {
        if (leased.length > 0) await store.noteConsumer(destination, consumer, await store.effectiveNow());
        // An idle consumer's empty answers repeat: counted, one line per window.
        this.d.log.limited("info", "pull lease", {
          destination,
          reason: `${leased.length} batch(es) to ${consumer}`,
          remote: req.remote,
        });
        return {
          status: 200,
          body: `{"leases":[${leased.join(",")}]}`,
          headers: { "Content-Type": "application/json" },
        };
      }
      await this.sleep(Math.min(LOOK_EVERY_MS, until - performance.now()), req.signal);
    }
  }

  /** Lease what is ready now: each leased batch as its JSON text. */
  private async leaseReady(store: PullStore, destination: string, consumer: string, max: number): Promise<string[]> {
    const config = this.d.config();
    const now = await store.effectiveNow();
    const heads = await store.headsOf(destination, now, max);
    if (heads.length === 0) return [];
    const timeoutS = destinationSettings(config, destination)?.timeout_s ?? 60;
    const nonces = heads.map(() => randomBytes(16).toString("hex"));
    const claims = await store.claimBatches(
      heads.map((c, i) => ({
        batchId: c.id,
        route: c.route,
        key: c.key,
        destination,
        now,
        leaseUntil: now + timeoutS + config.dispatch.lease_grace_s,
        host: leaseHost(consumer, nonces[i]),
        pid: 0,
        deliveryId: (attempt, _n, resend) =>
          deliveryId("per-batch", store.instanceId, c.id, attempt, undefined, resend),
      })),
    );
    const out: string[] = [];
    // Batches whose every event is left out as stale: delivered at once, never handed out.
    const unsent: OutcomeEnd[] = [];
    for (const [i, claim] of claims.entries()) {
      if (claim === null || claim === "gated") continue;
      const text = await this.leasedText(store, heads[i].id, claim, nonces[i], now + timeoutS, now);
      if (text === "unsent")
        unsent.push({
          batchId: heads[i].id,
          destination,
          attemptId: claim.attemptId,
          owner: claim.owner,
          startedAt: now,
          probe: false,
          script: false,
          outcome: outcome({ kind: "ok", reason: "stale", sent: 0 }),
          emits: [],
          durationMs: 0,
          jitter: this.d.rng.next(),
          policy: policyOf(config),
          unsent: "stale",
        });
      else if (text !== null) out.push(text);
    }
    if (unsent.length > 0) {
      for (const r of await store.recordEnds(unsent)) if (r instanceof Error) throw r;
      this.wake();
    }
    return out;
  }

  /** A leased batch as its JSON text; "unsent" when the stale rule left every event out (nothing to hand over). */
  private async leasedText(
    store: PullStore,
    batchId: number,
    claim: Claim,
    nonce: string,
    deadline: number,
    now: number,
  ): Promise<string | "unsent" | null> {
    const delivery = await store.deliveryOf(batchId);
    if (!delivery) return null;
    const doc = buildDocument({
      batch: delivery.batch,
      content: delivery.content,
      deliveryId: claim.deliveryId ?? "",
      attempt: claim.n,
    });
    // This lease judged the batch (it fixed the floor): what the stale rules made of it counts once.
    if (delivery.batch.floor_at === now) countStale(doc);
    if (doc.allSkipped) return "unsent";
    const head = JSON.stringify({
      lease: formatLeaseId({ batchId, attemptId: claim.attemptId, nonce }),
      deadline,
      batch_id: batchId,
      webhook_id: claim.deliveryId ?? "",
      attempt: claim.n,
    });
    // The document spliced in as built, byte for byte, as a push would have sent it.
    return `${head.slice(0, -1)},"document":${doc.body}}`;
  }

  private sleep(ms: number, signal: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.waiters.delete(done);
        signal.removeEventListener("abort", done);
        resolve();
      };
      const timer = setTimeout(done, Math.max(0, ms));
      this.waiters.add(done);
      signal.addEventListener("abort", done);
    });
  }

  private async ack(req: PullRequest, destination: string): Promise<Reply> {
    const bytes = await req.readBody(PULL_ACK_MAX_BYTES);
    if (bytes === "too_large") return emptyReply(413);
    const acks = parseAcks(bytes);
    if (typeof acks === "string") return problem(400, acks);
    const store = await this.d.store();
    const config = this.d.config();
    const verdicts: AckVerdict[] = [];
    const ends: { at: number; end: OutcomeEnd }[] = [];
    for (const [i, a] of acks.entries()) {
      const checked = await this.checked(store, config, destination, a);
      if (typeof checked === "string") verdicts.push(checked);
      else {
        verdicts.push("stale");
        ends.push({ at: i, end: checked });
      }
    }
    // Every ack that holds its lease, in one outcome transaction (each its own part, as the
    // dispatcher's outcomes that end together).
    let recorded = 0;
    if (ends.length > 0) {
      const results = await store.recordEnds(ends.map((e) => e.end));
      for (const [j, r] of results.entries()) {
        if (r instanceof Error) throw r;
        if (r.applied) {
          verdicts[ends[j].at] = "recorded";
          recorded++;
        }
      }
    }
    if (recorded > 0) this.wake();
    this.d.log.info("pull ack", { destination, reason: `${recorded} of ${acks.length} recorded`, remote: req.remote });
    return json(200, { results: acks.map((a, i) => ({ lease: a.lease, verdict: verdicts[i] })) });
  }

  /**
   * One ack's outcome, if its lease is still the one its id names; else why not. Checked
   * before the mark, so a forged or stale id never touches another lease's attempt; the mark's
   * own fence still refuses a lease lost in between.
   */
  private async checked(
    store: PullStore,
    config: Config,
    destination: string,
    a: Ack,
  ): Promise<OutcomeEnd | "stale" | "unknown"> {
    const id = parseLeaseId(a.lease);
    if (id === null) return "unknown";
    const batch = await store.getBatch(id.batchId);
    if (!batch || batch.destination !== destination) return "unknown";
    if (batch.state !== "leased" || !ownsLease(batch.lease_owner, id)) return "stale";
    const timeoutS = destinationSettings(config, destination)?.timeout_s ?? 60;
    const startedAt = (batch.lease_until ?? 0) - timeoutS - config.dispatch.lease_grace_s;
    return {
      batchId: id.batchId,
      destination,
      attemptId: id.attemptId,
      owner: batch.lease_owner as string,
      startedAt,
      probe: false,
      script: false,
      outcome: outcomeOf(a),
      emits: [],
      durationMs: Math.max(0, Math.round((this.d.clock.now() - startedAt) * 1000)),
      jitter: this.d.rng.next(),
      policy: policyOf(config),
    };
  }
}

/** A consumer's word as the outcome a push's answer would have been. */
function outcomeOf(a: Ack): Outcome {
  const detail = (a.reason ?? "").slice(0, PULL_REASON_MAX);
  if (a.result === "ok") return outcome({ kind: "ok", reason: "acked", status: 200 });
  if (a.result === "retry")
    return outcome({ kind: "retry", klass: "batch", reason: "consumer retry", detail: detail || "consumer retry" });
  return outcome({ kind: "dead", klass: "permanent", reason: "consumer dead", detail: detail || "consumer dead" });
}

/** The ack body's acks, or why it is refused. */
function parseAcks(bytes: Uint8Array): Ack[] | string {
  let doc: unknown;
  try {
    doc = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes));
  } catch {
    return "the body is not JSON";
  }
  const list = (doc as { acks?: unknown } | null)?.acks;
  if (!Array.isArray(list)) return 'the body is {"acks": [{"lease": "...", "result": "ok"}]}';
  if (list.length > PULL_MAX_ACKS) return `at most ${PULL_MAX_ACKS} acks a request`;
  const out: Ack[] = [];
  for (const item of list) {
    const a = item as Partial<Ack> | null;
    if (typeof a?.lease !== "string" || !["ok", "retry", "dead"].includes(a.result as string))
      return 'each ack is {"lease": "<lease id>", "result": "ok" | "retry" | "dead", "reason": "..."}';
    if (a.reason !== undefined && typeof a.reason !== "string") return "an ack's reason is a string";
    out.push({ lease: a.lease, result: a.result as Ack["result"], reason: a.reason });
  }
  return out;
}
