// Large bodies at the intake: a body above [spool] inline_max_bytes is streamed to a file while it
// arrives (bodies.ts), so sixteen 25 MB uploads hold sixteen chunks, not 400 MB; only one at a
// time then goes through the plugin steps (the gate), and GET /bodies/<sha256> serves a
// kept body to the holder of a signed, unexpired body_url.
import { randomUUID } from "node:crypto";
import { existsSync } from "node:fs";
import { type BodyFile, BodySink, bodyPath, bodyUrlKey, bodyUrlValid, isBodyName } from "../bodies.ts";

/**
 * Large bodies in the plugin steps and the enqueue at once. One: a 25 MB body is held twice while
 * it is verified and parsed (its bytes and text, then its text and parsed payload: the request
 * lets go of the bytes once decoded), and what it leaves is collected before the next comes in
 * (collectGarbage).
 */
export const LARGE_AT_ONCE = 1;

/**
 * A full collection, from a fresh turn of the event loop so that no stale pointer to a body on
 * the stack keeps it alive (the collector scans the stack conservatively). Without it the garbage
 * of one large body after another piles up until the heap next grows: the bodies bench measured
 * 444 MiB at 16 senders, and some 190 MiB with it.
 */
export async function collectGarbage(): Promise<void> {
  await new Promise((ok) => setImmediate(ok));
  Bun.gc(true);
}

/** A counting semaphore: at most `slots` holders; the rest wait in arrival order. */
export class Gate {
  private waiting: (() => void)[] = [];
  private held = 0;

  constructor(private readonly slots: number) {}

  async take(): Promise<() => void> {
    if (this.held >= this.slots) await new Promise<void>((ok) => this.waiting.push(ok));
    else this.held++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = this.waiting.shift();
      if (next) next();
      else this.held--;
    };
  }
}

/** A body streamed to a temporary file of the bodies directory, fsync'd, with its hash and length. */
export interface LargeBody {
  sink: BodySink;
  file: BodyFile;
}

/** A body received into a temporary file of `dir`: "too_large" past `cap` (the file is gone then). */
export async function receiveToFile(
  dir: string,
  cap: number,
  stream: (cap: number, sink: (chunk: Uint8Array) => Promise<void>) => Promise<number | "too_large">,
): Promise<LargeBody | "too_large"> {
  const sink = await BodySink.open(dir, randomUUID());
  try {
    const got = await stream(cap, (chunk) => sink.write(chunk));
    if (got === "too_large") {
      await sink.discard();
      return "too_large";
    }
    return { sink, file: await sink.finish() };
  } catch (e) {
    await sink.discard();
    throw e;
  }
}

/**
 * GET /bodies/<sha256>?expires=<s>&sig=<hex>: the body, streamed from its file, when the link is
 * the key's and unexpired; 403 otherwise (the answer never says which part failed), 404 when the
 * file is gone (retention deleted it).
 */
export function serveBody(dir: string, path: string, search: URLSearchParams, nowS: number): Response | null {
  const m = /^\/bodies\/([^/]+)$/.exec(path);
  if (!m) return null;
  const sha = m[1];
  const expires = Number(search.get("expires") ?? "");
  const sig = search.get("sig") ?? "";
  if (!isBodyName(sha) || !existsSync(dir) || !bodyUrlValid(bodyUrlKey(dir), sha, expires, sig, nowS))
    return new Response("", { status: 403 });
  const file = bodyPath(dir, sha);
  if (!existsSync(file)) return new Response("", { status: 404 });
  return new Response(Bun.file(file), { headers: { "Content-Type": "application/json" } });
}
