// An attempt as the dispatcher makes one, for the store's conformance cases: the claim through
// DispatchStore.claimBatches (each input naming its batch's route and key, as loop.ts's
// claimInput does) and the attempt's end through DispatchStore.recordOutcomes, an OutcomeInput
// as worker.ts builds it. A case says how the attempt ended (delivered, retry, dead; counted or
// not) and these pick the Outcome the store's outcome plan turns into exactly that: with
// POLICY's zero backoff a retry is due after its Retry-After, the breaker never trips, and a
// counted death is a batch failure on the last attempt max_attempts allows.
import { type Outcome, outcome } from "../../src/delivery.ts";
import type { NewEvent } from "../../src/store/enqueue.ts";
import type { OutcomeInput, Policy, Recorded } from "../../src/store/outcome-plan.ts";
import type { Claim, ClaimInput } from "../../src/store/queue.ts";
import type { StoreUnderTest } from "./store-under-test.ts";

/** No backoff (a retry is due after its Retry-After, exactly), no breaker trip, no exhaustion. */
export const POLICY: Policy = {
  maxAttempts: 1_000_000,
  backoffBaseS: 0,
  backoffCapS: 0,
  tripAfter: 1_000_000,
  cooldownInitialS: 60,
  cooldownMaxS: 3600,
};

/** A claim's input; its route and key are read from the batch when not given. */
export type ClaimArgs = ClaimInput & { route?: string; key?: string };

/** Claim batches in one transaction, as a tick does; a batch another took first is null. */
export async function claimAll(s: StoreUnderTest, inputs: readonly ClaimArgs[]): Promise<(Claim | null)[]> {
  const full = [];
  for (const c of inputs) {
    if (c.route !== undefined && c.key !== undefined) full.push({ ...c, route: c.route, key: c.key });
    else {
      const b = await s.batch(c.batchId);
      full.push({ ...c, route: String(b?.route ?? ""), key: String(b?.key ?? "") });
    }
  }
  const out = await s.dispatch.claimBatches(full);
  return out.map((c, i) => {
    // The cases give no max_inflight: nothing gates their claims on either backend.
    if (c === "gated") throw new Error(`the claim of batch ${inputs[i].batchId} was gated`);
    return c;
  });
}

/** Claim one batch (null: it was not claimable). */
export async function claimOne(s: StoreUnderTest, c: ClaimArgs): Promise<Claim | null> {
  return (await claimAll(s, [c]))[0];
}

/** How an attempt ended, in the words of the batch's next state. */
export type Ending =
  /** A 2xx: counted unless the attempt was a probe (the way an uncounted delivery happens). */
  | { kind: "delivered"; status?: number; emits?: NewEvent[]; counted?: boolean }
  /**
   * Due again at `nextAttemptAt` (Retry-After, at most an hour on). "transport" (the default)
   * and "config" are uncounted ("transport" counts toward the breaker and the poison run,
   * "config" toward neither); "batch" is counted.
   */
  | {
      kind: "retry";
      nextAttemptAt: number;
      klass?: "transport" | "config" | "batch";
      status?: number | null;
      detail?: string;
    }
  /**
   * Dead: the receiver's refusal (uncounted, class "permanent"), or, `counted`, a batch failure
   * on its last allowed attempt (class "batch", exhausted).
   */
  | {
      kind: "dead";
      counted?: boolean;
      status?: number | null;
      detail?: string;
      /** For a counted death: the batch's counted attempts before this one (default: read from its row). */
      attempts?: number;
    };

/** An attempt to end: its claim's fence, when it ends and how. */
export interface AttemptEnd {
  batchId: number;
  attemptId: number;
  owner: string;
  now: number;
  ending: Ending;
  /** When the attempt started (default: now). */
  startedAt?: number;
  /** The batch's destination, as its claim saw it (only the order an outcome transaction locks in). */
  destination?: string;
}

function outcomeOf(e: Ending, now: number): Outcome {
  if (e.kind === "delivered")
    return outcome({ kind: "ok", reason: `http ${e.status ?? 200}`, status: e.status ?? 200 });
  if (e.kind === "retry") {
    const after = e.nextAttemptAt - now;
    if (after < 0 || after > 3600) throw new Error(`a retry due ${after} s on cannot be said with Retry-After`);
    const klass = e.klass ?? "transport";
    const status = e.status === undefined ? (klass === "transport" ? 502 : null) : e.status;
    return outcome({
      kind: "retry",
      klass,
      reason: status === null ? klass : `http ${status}`,
      status,
      detail: e.detail ?? "bad gateway",
      retryAfterS: after > 0 ? after : null,
    });
  }
  const status = e.status === undefined ? 422 : e.status;
  const reason = status === null ? "refused" : `http ${status}`;
  if (e.counted) return outcome({ kind: "retry", klass: "batch", reason, status, detail: e.detail ?? reason });
  return outcome({ kind: "dead", klass: "permanent", reason, status, detail: e.detail ?? reason });
}

/** End attempts together, in one outcome transaction, each at its own `now`. */
export async function endAll(s: StoreUnderTest, ends: readonly AttemptEnd[]): Promise<(Recorded | Error)[]> {
  return s.dispatch.recordOutcomes(await inputsOf(s, ends));
}

/** End attempts together as the dispatcher's OutcomeWriter does: at the store's now_eff (their `now` unused). */
export async function endAllAtNow(s: StoreUnderTest, ends: readonly AttemptEnd[]): Promise<(Recorded | Error)[]> {
  return s.dispatch.recordEnds((await inputsOf(s, ends)).map(({ now: _, ...end }) => end));
}

async function inputsOf(s: StoreUnderTest, ends: readonly AttemptEnd[]): Promise<OutcomeInput[]> {
  const inputs: OutcomeInput[] = [];
  for (const a of ends) {
    const e = a.ending;
    let policy = POLICY;
    if (e.kind === "dead" && e.counted) {
      // The attempt max_attempts allows last: the batch's counted attempts so far, and this one.
      const before = e.attempts ?? Number((await s.batch(a.batchId))?.attempts ?? 0);
      policy = { ...POLICY, maxAttempts: before + 1 };
    }
    inputs.push({
      batchId: a.batchId,
      destination: a.destination,
      attemptId: a.attemptId,
      owner: a.owner,
      startedAt: a.startedAt ?? a.now,
      probe: e.kind === "delivered" && e.counted === false,
      script: false,
      outcome: outcomeOf(e, a.now),
      emits: e.kind === "delivered" ? (e.emits ?? []) : [],
      durationMs: 1,
      now: a.now,
      jitter: 0,
      policy,
    });
  }
  return inputs;
}

/** End one attempt; an outcome that failed alone (a bad emit, say) is its Error. */
export async function endOne(s: StoreUnderTest, a: AttemptEnd): Promise<Recorded | Error> {
  return (await endAll(s, [a]))[0];
}

/** End one attempt that must not fail: what it recorded ({ applied: false }: the lease was lost). */
export async function end(s: StoreUnderTest, a: AttemptEnd): Promise<Recorded> {
  const r = await endOne(s, a);
  if (r instanceof Error) throw r;
  return r;
}

/**
 * The policy of the cases that watch the breaker and the backoff work: two counted failures trip
 * it, cooldowns of 10 s up to 25 s, backoff 1 s up to 4 s, three attempts at most.
 */
export const COUNTING_POLICY: Policy = {
  maxAttempts: 3,
  backoffBaseS: 1,
  backoffCapS: 4,
  tripAfter: 2,
  cooldownInitialS: 10,
  cooldownMaxS: 25,
};

/** An attempt whose Outcome the case gives itself: claimed at `now`, ended at `endAt`. */
export interface RawAttempt {
  batchId: number;
  /** The batch's route and key (read from its row when not given). */
  route?: string;
  key?: string;
  destination?: string;
  now: number;
  /** When the attempt ends (default: now). */
  endAt?: number;
  /** An Outcome, or the fields outcome() completes into one. */
  outcome: Parameters<typeof outcome>[0];
  probe?: boolean;
  script?: boolean;
  emits?: NewEvent[];
  /** The claim's lease, in seconds from now (default 60). */
  leaseS?: number;
  /** A paced claim: its destination's rate and the requests the attempt counts. */
  pacing?: Pick<ClaimInput, "rate" | "hits">;
  durationMs?: number;
  jitter?: number;
  /** Default COUNTING_POLICY. */
  policy?: Policy;
}

/** Claim the batch, then end its attempt with the case's Outcome, as one dispatcher attempt. */
export async function attemptWith(s: StoreUnderTest, a: RawAttempt): Promise<Recorded | Error> {
  const destination = a.destination ?? "http:d";
  const c = await claimOne(s, {
    batchId: a.batchId,
    route: a.route,
    key: a.key,
    destination,
    now: a.now,
    leaseUntil: a.now + (a.leaseS ?? 60),
    host: "h",
    pid: 1,
    probe: a.probe,
    ...a.pacing,
  });
  if (!c) throw new Error(`batch ${a.batchId} not claimed`);
  return endWith(s, c, a);
}

/** End the attempt of claim `c` with the case's Outcome (`a.now`: when it started). */
export async function endWith(
  s: StoreUnderTest,
  c: Claim,
  a: Omit<RawAttempt, "route" | "key" | "leaseS" | "pacing">,
): Promise<Recorded | Error> {
  const [r] = await s.dispatch.recordOutcomes([
    {
      batchId: a.batchId,
      attemptId: c.attemptId,
      owner: c.owner,
      startedAt: a.now,
      probe: a.probe ?? false,
      script: a.script ?? false,
      // outcome() keeps every field it is given: a whole Outcome passes through unchanged.
      outcome: outcome(a.outcome),
      emits: a.emits ?? [],
      durationMs: a.durationMs ?? 3,
      now: a.endAt ?? a.now,
      jitter: a.jitter ?? 0,
      policy: a.policy ?? COUNTING_POLICY,
    },
  ]);
  return r;
}
