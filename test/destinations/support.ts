// Shared by the destination tests: delivery contexts, stub receivers on 127.0.0.1, documents
// and events carrying a sentinel, and temp files.
import { afterAll } from "bun:test";
import { chmodSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { FakeClock, systemClock } from "../../src/clock.ts";
import { Deadline, type DeliveryContext, type Outcome, type StoredEvent } from "../../src/delivery.ts";
import type { Logger } from "../../src/log.ts";

/** Planted in payloads and secrets: it must never show up in a reason or a detail. */
export const SENTINEL = "S3NT1NEL-7f3a";

/** A logger that keeps nothing (destinations do not log; the dispatcher does). */
export const quietLog: Logger = { info() {}, warn() {}, error() {}, limited() {}, child: () => quietLog };

/** A fake clock at the real time: the standardwebhooks package checks timestamps against Date.now. */
export function nowClock(): FakeClock {
  return new FakeClock(Math.floor(systemClock.now()));
}

/** Stored events with non-ASCII text, the sentinel and a number that re-encoding would change. */
export function events(n = 2, from = 11): StoredEvent[] {
  return Array.from({ length: n }, (_, i) => ({
    id: from + i,
    eventType: i % 2 ? "check_suite" : "push",
    dedupId: `dedup-${from + i}`,
    payload: `{"n":${i + 1}.0,"msg":"h\u00e9llo \u2713 ${SENTINEL}","nested":{"a":[1,2,3]}}`,
  }));
}

/** A document body of the shape the dispatcher sends (it builds the real one). */
export function documentFor(evs: StoredEvent[], attempt = 1, deliveryId = "hs_inst1_7"): string {
  return (
    `{"source":"github","route":"ci","key":"o/r:ci","batch_id":7,"delivery_id":"${deliveryId}",` +
    `"attempt":${attempt},"count":${evs.length},"events":[${evs.map((e) => e.payload).join(",")}],` +
    `"event_meta":[]}`
  );
}

const deadlines: Deadline[] = [];
afterAll(() => {
  for (const d of deadlines.splice(0)) d.dispose();
});

export interface CtxOptions extends Partial<Omit<DeliveryContext, "deadline">> {
  /** The destination's timeout_s, as the dispatcher would bound the attempt by it (60 s). */
  timeoutS?: number;
  /** Seconds from now to the worker deadline (60 s); negative: already passed. */
  workerInS?: number;
}

/** A delivery context with the attempt's deadline made as the dispatcher makes it. */
export function makeCtx(o: CtxOptions = {}): DeliveryContext {
  const { timeoutS = 60, workerInS = 60, ...rest } = o;
  const clock = rest.clock ?? nowClock();
  const deadline = new Deadline({ timeoutS, workerAt: clock.now() + workerInS, clock });
  deadlines.push(deadline);
  return {
    batchId: 7,
    attempt: 1,
    deliveryId: "hs_inst1_7",
    deadline,
    events: events(),
    eventHeader: null,
    clock,
    log: quietLog,
    ...rest,
  };
}

/** What a stub receiver saw of one request. */
export interface Hit {
  method: string;
  path: string;
  headers: Record<string, string>;
  body: string;
}

export interface Stub {
  url: string;
  port: number;
  hits: Hit[];
  stop(): void;
}

const servers: { stop(force?: boolean): unknown }[] = [];
afterAll(() => {
  for (const s of servers.splice(0)) s.stop(true);
});

/** A receiver on 127.0.0.1:0 that records every request and answers with `answer`. */
export function stub(
  answer: (hit: Hit, n: number) => Response | Promise<Response> = () => new Response("{}"),
  tls?: { key: string; cert: string },
): Stub {
  const hits: Hit[] = [];
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    idleTimeout: 30,
    tls,
    async fetch(req) {
      const url = new URL(req.url);
      const hit: Hit = {
        method: req.method,
        path: url.pathname,
        headers: Object.fromEntries(req.headers),
        body: await req.text(),
      };
      hits.push(hit);
      return answer(hit, hits.length);
    },
  });
  servers.push(server);
  return {
    url: `${tls ? "https" : "http"}://127.0.0.1:${server.port}`,
    port: server.port as number,
    hits,
    stop: () => server.stop(true),
  };
}

/** A loopback port nothing listens on (a server was there and is gone). */
export function closedPort(): number {
  const s = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("") });
  const port = s.port as number;
  s.stop(true);
  return port;
}

/** A handler that never answers (the server's stop at the end closes it). */
export const never = (): Promise<Response> => new Promise<Response>(() => {});

export function json(status: number, value: unknown, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify(value), { status, headers: { "content-type": "application/json", ...headers } });
}

/** Write an executable file (a script) and return its path. */
export function writeScript(dir: string, name: string, text: string): string {
  const p = join(dir, name);
  writeFileSync(p, text);
  chmodSync(p, 0o755);
  return p;
}

/** Assert-style helper: the sentinel is in neither the reason nor the detail nor the receiver's words. */
export function leaks(o: Outcome): boolean {
  return [o.reason, o.detail, o.answer ?? "", o.ignoredReason ?? "", o.pause ?? ""].some((s) => s.includes(SENTINEL));
}

/** Milliseconds taken by fn. */
export async function timed<T>(fn: () => Promise<T>): Promise<{ value: T; ms: number }> {
  const t0 = performance.now();
  const value = await fn();
  return { value, ms: performance.now() - t0 };
}
