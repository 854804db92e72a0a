// One bounded POST, shared by hermes, http and unwrap: every request is bounded in total time by
// the attempt's deadline, DNS and connect included, with a watchdog, so a stalled or dripping
// receiver cannot hold a worker past its lease.
import { outcomeForError } from "./status-map.ts";
import { type Deadline, isPassed, type Outcome } from "../delivery.ts";

/** The part of an answer a destination reads. The body is capped and never stored or logged. */
export interface Received {
  status: number;
  headers: Headers;
  text: string;
}

/** How much of a response body is read (Hermes' JSON status is tiny). */
export const RECEIVED_CAP = 64 * 1024;

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
 * POST body to url. Redirects are never followed; TLS is always verified; the deadline covers
 * DNS, connect, the headers and reading the answer. Returns the answer, or an outcome when
 * there was none (transport, or config for a rejected certificate).
 */
export async function post(url: string, headers: Headers, body: Uint8Array, deadline: Deadline): Promise<Received | Outcome> {
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
