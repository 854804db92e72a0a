// The operator's verbs through the operator role, as their rows and refusals: replay of a dead
// batch, retry now, drop, replay --delivered (resend), a quarantined request classified again
// by a fixed plugin, and each verb's refusal of a batch it does not apply to. Every backend must
// leave these rows and refuse with these words.
import { expect, test } from "bun:test";
import type { outcome } from "../../src/delivery.ts";
import { attemptWith } from "../helpers/attempts.ts";
import { copy, ev, T0 } from "../helpers/spool.ts";
import type { Row, StoreUnderTest } from "../helpers/store-under-test.ts";
import type { Suite } from "./suite.ts";

/** Rows as the expectations below spell them: the columns every row shares, then each row's own, in `cols` order. */
function table(shared: Row, cols: readonly string[], values: readonly unknown[][]): Row[] {
  return values.map((v) => ({ ...shared, ...Object.fromEntries(cols.map((c, i) => [c, v[i]])) }));
}

/** What a verb did: its result, or the message it refused with. */
async function said(f: () => Promise<unknown>): Promise<unknown> {
  try {
    return await f();
  } catch (e) {
    return (e as Error).message;
  }
}

/** The verb cases, on whatever store fresh() opens. */
export function verbCases({ fresh }: Suite): void {
  type S = StoreUnderTest;

  /** Claim batch `id` (key `key`) at `now` and end its attempt then with `o`. */
  async function end(s: S, id: number, key: string, o: Parameters<typeof outcome>[0], now: number): Promise<void> {
    expect(await attemptWith(s, { batchId: id, route: "r", key, now, outcome: o })).toMatchObject({ applied: true });
  }

  test("replay, retry now, drop, replay --delivered, a quarantine classified again; the verbs' refusals", async () => {
    const s = await fresh();
    const op = s.operator;
    for (const [i, key] of ["a", "b", "c"].entries()) {
      const e = ev({ key, payload: `{"k":"${key}"}`, copies: [copy("r", "http:d", { max_events: 1 })] });
      await s.intake.enqueueAll([e], T0 + i);
    }
    await end(s, 1, "a", { kind: "dead", klass: "permanent", reason: "http 422", status: 422 }, T0 + 10);
    await end(s, 3, "c", { kind: "ok", reason: "ok", status: 200 }, T0 + 11);

    expect(await said(() => op.replayBatch(1, T0 + 20))).toEqual({ batchId: 1, kind: "replayed" });
    expect(await said(() => op.replayBatch(1, T0 + 21))).toBe("batch 1 is retry; replay applies to dead batches");
    expect(await said(() => op.retryNow(1, T0 + 22))).toBeUndefined();
    expect(await said(() => op.retryNow(2, T0 + 22))).toBe("batch 2 is sealed; retry applies to retry batches");
    expect(await said(() => op.dropBatches([2], T0 + 23))).toBeUndefined();
    expect(await said(() => op.dropBatches([3], T0 + 23))).toBe(
      "batch 3 is delivered; drop applies to open, sealed, retry, awaiting or dead batches",
    );
    expect(await said(() => op.resendDelivered(3, T0 + 24))).toBeUndefined();
    expect(await said(() => op.replayBatch(99, T0))).toBe("no batch 99");
    // A quarantined request, classified again by a (fixed) plugin: it becomes an event of its own.
    const q = {
      source: "s",
      raw: new TextEncoder().encode('{"n":1}'),
      headers: {},
      authHeaders: [],
      url: "/hooks/s",
      reason: "bad_payload",
    };
    const quarantined = await s.intake.quarantine(q, T0 + 30);
    expect(quarantined).toEqual({ eventId: 4, batchId: 4, reason: "bad_payload" });
    const fixed = () => [ev({ key: "requeued", payload: '{"n":1}', copies: [copy("r", "http:d")] })];
    expect(await said(() => op.replayBatch(4, T0 + 31, fixed))).toMatchObject({ kind: "reclassified" });

    // Once delivered (reclassified), the quarantine batch is no longer the replay's to take.
    expect(await said(() => op.replayBatch(4, T0 + 32, fixed))).toBe(
      "batch 4 is delivered; replay applies to dead batches",
    );

    // Batch 1 replayed and then due at once; 2 dropped; 3 resent (due at once, not before then); the quarantine
    // batch delivered as reclassified, its request now batch 5's event.
    const cols = ["id", "state", "attempts", "next_attempt_at", "not_before", "delivered_at", "result", "last_error"];
    expect(await s.rows("batches", { cols: [...cols, "dead_reason", "key"], order: "id" })).toEqual(
      table(
        { attempts: 0, dead_reason: null },
        ["id", "state", "next_attempt_at", "not_before", "delivered_at", "result", "last_error", "key"],
        [
          [1, "retry", T0 + 22, T0 + 20, null, null, "http 422", "a"],
          [2, "dropped", null, null, T0 + 23, "dropped", "dropped by operator", "b"],
          [3, "retry", T0 + 24, T0 + 24, null, null, null, "c"],
          [4, "delivered", null, null, T0 + 31, "reclassified", "bad_payload", "quarantine"],
          [5, "open", null, null, null, null, null, "requeued"],
        ],
      ),
    );
    // The replayed death's issue and the source's quarantine issue are resolved.
    expect(
      await s.rows("issues", {
        cols: ["fingerprint", "state", "count", "last_at", "last_error"],
        order: "fingerprint",
      }),
    ).toEqual(
      table(
        { state: "resolved", count: 1 },
        ["fingerprint", "last_at", "last_error"],
        [
          [
            "delivery:http:d:permanent",
            T0 + 20,
            "http 422; batch 1 is dead (rejected): hookspool show 1 --attempts, then hookspool replay 1",
          ],
          ["source:quarantine:s", T0 + 31, "quarantined: bad_payload"],
        ],
      ),
    );
    expect(await s.rows("journal", { cols: ["kind", "batch_id", "detail"], order: "id" })).toEqual(
      table(
        {},
        ["kind", "batch_id", "detail"],
        [
          ["event", 1, '{"type":"t","route":"r"}'],
          ["sealed", 1, null],
          ["event", 2, '{"type":"t","route":"r"}'],
          ["sealed", 2, null],
          ["event", 3, '{"type":"t","route":"r"}'],
          ["sealed", 3, null],
          ["leased", 1, '{"n":1}'],
          ["dead", 1, '{"class":"permanent","status":422,"duration_ms":3,"reason":"rejected"}'],
          ["leased", 3, '{"n":1}'],
          ["delivered", 3, '{"status":200,"duration_ms":3}'],
          ["retry", 1, '{"replayed":true}'],
          ["dropped", 2, '{"result":"dropped"}'],
          ["retry", 3, '{"resend":true}'],
          ["event", 4, '{"quarantined":"bad_payload"}'],
          ["dead", 4, '{"reason":"quarantined"}'],
          ["event", 5, '{"type":"t","route":"r"}'],
          ["delivered", 4, '{"reclassified":1}'],
        ],
      ),
    );
  });
}
