// One bounded POST, shared by hermes, http and unwrap: every request is bounded in total time by
// the attempt's deadline, DNS and connect included, with a watchdog, so a stalled or dripping
// receiver cannot hold a worker past its lease.
import { outcomeForError } from "./status-map.ts";
import type { Deadline, Outcome } from "../delivery.ts";

/** The part of an answer a destination reads. The body is capped and never stored or logged. */
export interface Received {
  status: number;
  headers: Headers;
  text: string;
}

/** How much of a response body is read (Hermes' JSON status is tiny). */
export const RECEIVED_CAP = 64 * 1024;

/** What has arrived of an answer so far: its status and headers once they came, then body bytes. */
interface Arriving {
  res: Response | null;
  chunks: Uint8Array[];
  size: number;
}

/** Read at most `cap` bytes of the body into `into`, then stop; the rest is never read. */
async function readCapped(res: Response, cap: number, into: Arriving): Promise<void> {
  if (!res.body) return;
  const reader = res.body.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      into.chunks.push(value);
      into.size += value.byteLength;
      if (into.size >= cap) break;
    }
  } finally {
    reader.cancel().catch(() => {});
  }
}

function received(a: Arriving, res: Response): Received {
  return {
    status: res.status,
    headers: res.headers,
    text: new TextDecoder().decode(Buffer.concat(a.chunks).subarray(0, RECEIVED_CAP)),
  };
}

/**
 * POST body to url. Redirects are never followed; TLS is always verified; the deadline covers
 * DNS, connect, the headers and reading the answer. Returns the answer, or an outcome when
 * there was none (transport, or config for a rejected certificate). The status line is the
 * answer: a body that trickles past the deadline, or breaks off, is read no further, and what
 * came of it is the text (a 2xx whose body never ends is still a 2xx).
 */
export async function post(
  url: string,
  headers: Headers,
  body: Uint8Array,
  deadline: Deadline,
): Promise<Received | Outcome> {
  if (deadline.expired) return deadline.outcome();
  const arriving: Arriving = { res: null, chunks: [], size: 0 };
  const work = (async (): Promise<void> => {
    const res = await fetch(url, {
      method: "POST",
      headers,
      body,
      redirect: "manual",
      signal: deadline.signal,
      // Explicit, so NODE_TLS_REJECT_UNAUTHORIZED in the environment cannot turn verification off.
      tls: { rejectUnauthorized: true },
    });
    arriving.res = res;
    await readCapped(res, RECEIVED_CAP, arriving);
  })();
  let failure: unknown = null;
  try {
    // The watchdog: whatever fetch does with the abort, the attempt returns at the deadline.
    await deadline.race(work);
  } catch (e) {
    failure = e;
  }
  if (arriving.res) return received(arriving, arriving.res);
  if (deadline.expired) return deadline.outcome();
  return failure === null ? deadline.outcome() : outcomeForError(failure);
}

/** Whether a post() result is an answer (as opposed to an outcome without one). */
export function isReceived(r: Received | Outcome): r is Received {
  return "text" in r && "headers" in r;
}
