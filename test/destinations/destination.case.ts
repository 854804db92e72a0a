// The one destination suite: every type runs the same cases through a harness
// that knows how to stand up its kind of receiver.
import { describe, expect, test } from "bun:test";
import type { Destination } from "../../src/delivery.ts";
import { type CtxOptions, documentFor, events, leaks, makeCtx, SENTINEL, timed } from "./support.ts";

/** What the receiver got, whatever the transport (headers for HTTP, env and stdin for scripts). */
export interface Arrival {
  body: string;
  batchId: string | undefined;
  deliveryId: string | undefined;
  attempt: string | undefined;
}

export interface Harness {
  /** A receiver that accepts; received() lists what reached it, oldest first. */
  accepting(): Promise<{ dest: Destination; received(): Promise<Arrival[]> }>;
  /** A receiver that takes far longer than any deadline here; timeoutS is the destination's. */
  hanging(timeoutS: number): Promise<Destination>;
  /** Nothing to talk to (no listener, no file). */
  unreachable(): Promise<Destination>;
  /** A receiver that fails and echoes back everything it was given (body, headers, env). */
  failingEcho(): Promise<Destination>;
}

export function destinationConformance(type: string, make: () => Harness): void {
  describe(`${type} conformance`, () => {
    const evs = events(3);
    const ctxFor = (o: CtxOptions = {}) => makeCtx({ events: evs, attempt: 2, deliveryId: "hs_inst1_7_42", ...o });
    const body = documentFor(evs, 2, "hs_inst1_7_42");

    test("an accepting receiver gives ok, and the document arrives byte for byte", async () => {
      const { dest, received } = await make().accepting();
      const o = await dest.deliver(body, ctxFor());
      expect(o.kind).toBe("ok");
      expect(o.klass).toBeNull();
      expect(leaks(o)).toBe(false);
      const got = await received();
      expect(got).toHaveLength(1);
      expect(got[0].body).toBe(body);
    });

    test("the batch id, delivery id and attempt reach the receiver", async () => {
      const { dest, received } = await make().accepting();
      await dest.deliver(body, ctxFor());
      const [a] = await received();
      expect({ batch: a.batchId, delivery: a.deliveryId, attempt: a.attempt }).toEqual({
        batch: "7",
        delivery: "hs_inst1_7_42",
        attempt: "2",
      });
    });

    test("the worker deadline ends a stalled attempt as transport, on time", async () => {
      const dest = await make().hanging(30);
      const { value: o, ms } = await timed(() => dest.deliver(body, ctxFor({ workerInS: 0.5 })));
      expect({ kind: o.kind, klass: o.klass }).toEqual({ kind: "retry", klass: "transport" });
      expect(ms).toBeGreaterThanOrEqual(400);
      expect(ms).toBeLessThan(2000);
      expect(leaks(o)).toBe(false);
    });

    test("a deadline bound by the destination's timeout_s ends a stalled attempt", async () => {
      const dest = await make().hanging(0.5);
      const { value: o, ms } = await timed(() => dest.deliver(body, ctxFor({ timeoutS: dest.timeoutS })));
      expect({ kind: o.kind, klass: o.klass }).toEqual({ kind: "retry", klass: "transport" });
      expect(ms).toBeLessThan(2000);
    });

    test("a deadline the dispatcher ends early (a clock jump) ends the attempt at once", async () => {
      const dest = await make().hanging(30);
      const ctx = ctxFor();
      setTimeout(() => ctx.deadline.end("worker deadline"), 200);
      const { value: o, ms } = await timed(() => dest.deliver(body, ctx));
      expect(o.klass).toBe("transport");
      expect(ms).toBeLessThan(1500);
    });

    test("an unreachable receiver is a transport failure", async () => {
      const dest = await make().unreachable();
      const o = await dest.deliver(body, ctxFor());
      expect({ kind: o.kind, klass: o.klass }).toEqual({ kind: "retry", klass: "transport" });
      expect(o.reason.length).toBeLessThan(40);
    });

    test("a failure echoing the payload, headers and secrets leaks none of them into the outcome", async () => {
      const dest = await make().failingEcho();
      expect(body).toContain(SENTINEL);
      const o = await dest.deliver(body, ctxFor());
      expect(o.kind).not.toBe("ok");
      expect(leaks(o)).toBe(false);
      expect(o.detail.length).toBeLessThan(500);
    });
  });
}
