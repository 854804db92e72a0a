// The dashboard's figures from the spool: events per bucket and source, attempts per outcome,
// and readiness to 2xx measured from when the window closed, not from the first event.
import { expect, test } from "bun:test";
import { claimBatch } from "../../src/store/sqlite/claim.ts";
import { sealReady } from "../../src/store/sqlite/queue.ts";
import { attemptsByOutcome, eventsBySource, readyToOkLatency } from "../../src/store/sqlite/charts.ts";
import { enqueue } from "../../src/store/sqlite/enqueue.ts";
import { markDelivered, markRetry } from "../../src/store/sqlite/marks.ts";
import { copy, ev, freshSpool, T0 } from "../helpers/spool.ts";

function placed(r: ReturnType<typeof enqueue>): number {
  if (r.status !== "queued") throw new Error(r.status);
  return r.placed[0].batchId;
}

test("events per bucket and source; attempts per outcome; readiness to 2xx from the window's close", () => {
  const t = freshSpool();
  const b = { since: T0, bucketS: 60, count: 3 };
  // Quiet 10 s: the batch is ready at T0 + 10 + 10 (its last event at T0 + 10).
  const id = placed(enqueue(t.spool, ev({ source: "gh", copies: [copy("r", "http:d", { quiet_s: 10, max_s: 300 })] })));
  t.clock.advance(10);
  enqueue(t.spool, ev({ source: "gh", copies: [copy("r", "http:d", { quiet_s: 10, max_s: 300 })] }));
  t.clock.advance(65);
  enqueue(t.spool, ev({ source: "zoom", key: "z" }));
  expect(eventsBySource(t.spool, b)).toEqual({ gh: [2, 0, 0], zoom: [0, 1, 0] });

  // Sealed and delivered 4 s after it was ready: first a retry, then ok.
  t.clock.set(T0 + 20);
  expect(sealReady(t.spool, T0 + 20)).toContain(id);
  const first = claimBatch(t.spool, {
    batchId: id,
    destination: "http:d",
    now: T0 + 20,
    leaseUntil: T0 + 80,
    host: "t",
    pid: 1,
  });
  if (!first) throw new Error("not claimed");
  markRetry(t.spool, {
    batchId: id,
    attemptId: first.attemptId,
    owner: first.owner,
    now: T0 + 21,
    nextAttemptAt: T0 + 22,
    attempt: { klass: "transport", status: null, error: "refused", durationMs: 5, counted: false },
  });
  const second = claimBatch(t.spool, {
    batchId: id,
    destination: "http:d",
    now: T0 + 23,
    leaseUntil: T0 + 83,
    host: "t",
    pid: 1,
  });
  if (!second) throw new Error("not claimed again");
  t.clock.set(T0 + 24);
  markDelivered(t.spool, {
    batchId: id,
    attemptId: second.attemptId,
    owner: second.owner,
    now: T0 + 24,
    attempt: { klass: null, status: 200, error: null, durationMs: 3, counted: true },
  });
  expect(attemptsByOutcome(t.spool, b)).toEqual({ retry: [1, 0, 0], ok: [1, 0, 0] });
  expect(readyToOkLatency(t.spool, b)).toEqual({ p50: [4, null, null], p99: [4, null, null] });
});
