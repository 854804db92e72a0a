// One attempt's deadline and one bounded POST, shared by hermes, http and unwrap (spec 14.2:
// every request is bounded in total time by min(timeout_s, ctx.deadline), DNS and connect
// included, with a watchdog, so a stalled or dripping receiver cannot hold a worker past its lease).
import { outcomeForError } from "./status-map.ts";
import { type DeliveryContext, outcome, type Outcome } from "../delivery.ts";

/** The part of an answer a destination reads. The body is capped and never stored or logged. */
export interface Received {
  status: number;
  headers: Headers;
  text: string;
}

/** How much of a response body is read (Hermes' JSON status is tiny). */
export const RECEIVED_CAP = 64 * 1024;

const PASSED = Symbol("deadline passed");

/**
 * The one deadline of an attempt: min(timeout_s, ctx.deadline - now) from construction, and
 * ctx.signal (the worker deadline) too. Every request and body read of the attempt shares it, so
 * an unwrap attempt's requests together stay inside it (spec 6.4.1). Call dispose() when done.
 */
export class AttemptDeadline {
  private readonly controller = new AbortController();
  private readonly timer: ReturnType<typeof setTimeout>;
  private readonly onOuterAbort: () => void;
  private firedBy: "timeout" | "worker deadline" | null = null;
  readonly budgetS: number;
  /** Resolves (never rejects) when the deadline passes. */
  readonly passed: Promise<typeof PASSED>;

  constructor(
    timeoutS: number,
    private readonly ctx: Pick<DeliveryContext, "deadline" | "clock" | "signal">,
  ) {
    const untilDeadline = ctx.deadline - ctx.clock.now();
    const boundByWorker = untilDeadline < timeoutS;
    this.budgetS = Math.max(0, Math.min(timeoutS, untilDeadline));
    const fire = (by: "timeout" | "worker deadline") => {
      if (this.firedBy === null) this.firedBy = by;
      this.controller.abort();
    };
    this.passed = new Promise((resolve) => this.controller.signal.addEventListener("abort", () => resolve(PASSED), { once: true }));
    this.timer = setTimeout(() => fire(boundByWorker ? "worker deadline" : "timeout"), this.budgetS * 1000);
    this.onOuterAbort = () => fire("worker deadline");
    // Out of time before starting: no request at all, not one that races a zero timer.
    if (this.budgetS <= 0) fire(boundByWorker ? "worker deadline" : "timeout");
    if (ctx.signal.aborted) fire("worker deadline");
    else ctx.signal.addEventListener("abort", this.onOuterAbort, { once: true });
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  get expired(): boolean {
    return this.controller.signal.aborted;
  }

  /** The transport outcome of running out of time (spec 6.2: a worker deadline is transport). */
  outcome(): Outcome {
    const reason = this.firedBy ?? "timeout";
    return outcome({ kind: "retry", klass: "transport", reason, detail: `${reason}: no complete answer within ${this.budgetS.toFixed(1)} s` });
  }

  /** Race work against the deadline: the work's value, or PASSED. */
  race<T>(work: Promise<T>): Promise<T | typeof PASSED> {
    return Promise.race([work, this.passed]);
  }

  dispose(): void {
    clearTimeout(this.timer);
    this.ctx.signal.removeEventListener("abort", this.onOuterAbort);
  }
}

export function isPassed(x: unknown): x is typeof PASSED {
  return x === PASSED;
}

/** Read at most `cap` bytes of a body, then stop; the rest is never read. */
async function readCapped(res: Response, cap: number): Promise<string> {
  if (!res.body) return "";
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      chunks.push(value);
      size += value.byteLength;
      if (size >= cap) break;
    }
  } finally {
    reader.cancel().catch(() => {});
  }
  return new TextDecoder().decode(Buffer.concat(chunks).subarray(0, cap));
}

/**
 * POST body to url. Redirects are never followed (spec 10); TLS is always verified; the
 * deadline covers DNS, connect, the headers and reading the answer. Returns the answer, or an
 * outcome when there was none (transport, or config for a rejected certificate).
 */
export async function post(url: string, headers: Headers, body: Uint8Array, deadline: AttemptDeadline): Promise<Received | Outcome> {
  if (deadline.expired) return deadline.outcome();
  const work = (async (): Promise<Received> => {
    const res = await fetch(url, {
      method: "POST",
      headers,
      body,
      redirect: "manual",
      signal: deadline.signal,
      // Explicit, so NODE_TLS_REJECT_UNAUTHORIZED in the environment cannot turn verification off.
      tls: { rejectUnauthorized: true },
    });
    const text = await readCapped(res, RECEIVED_CAP);
    return { status: res.status, headers: res.headers, text };
  })();
  try {
    // The watchdog: whatever fetch does with the abort, the attempt returns at the deadline.
    const r = await deadline.race(work);
    return isPassed(r) ? deadline.outcome() : r;
  } catch (e) {
    return deadline.expired ? deadline.outcome() : outcomeForError(e);
  }
}

/** Whether a post() result is an answer (as opposed to an outcome without one). */
export function isReceived(r: Received | Outcome): r is Received {
  return "text" in r && "headers" in r;
}
