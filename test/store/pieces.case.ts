// Split and exclude through the operator role: a sealed batch split into pieces of at most
// `max_events` (the original done, each piece its own content hash), an event excluded from a
// piece and from an open batch, and each verb's refusals. Every backend must leave these
// pieces and moved events and refuse with these words.
import { expect, test } from "bun:test";
import { copy, ev, T0 } from "../helpers/spool.ts";
import type { Suite } from "./suite.ts";

/** What a verb did: its result, or the message it refused with. */
async function said(f: () => Promise<unknown>): Promise<unknown> {
  try {
    return await f();
  } catch (e) {
    return (e as Error).message;
  }
}

/** A piece of the split: sealed, due not before the split (T0 + 20). */
const piece = (id: number, first_at: number, last_at: number, count: number, bytes: number, content_hash: string) => ({
  id,
  state: "sealed",
  first_at,
  last_at,
  count,
  bytes,
  content_hash,
  result: null,
  last_error: null,
  not_before: T0 + 20,
});

/** The split and exclude cases, on whatever store fresh() opens. */
export function pieceCases({ fresh }: Suite): void {
  test("the same pieces, moved events, content hashes and refusals", async () => {
    const s = await fresh();
    const op = s.operator;
    // Batch 1: five events of growing size, sealed when the fifth fills it; batch 2: three events, open.
    for (let i = 0; i < 5; i++) {
      const e = ev({
        key: "k",
        payload: JSON.stringify({ i, pad: "x".repeat(10 * i) }),
        copies: [copy("r", "http:d", { max_events: 5 })],
      });
      await s.intake.enqueueAll([e], T0 + i);
    }
    for (let i = 0; i < 3; i++) {
      const e = ev({ key: "open", payload: `{"open":${i}}`, copies: [copy("r", "http:d")] });
      await s.intake.enqueueAll([e], T0 + 10 + i);
    }
    expect(await said(() => op.splitBatch(1, { maxEvents: 2 }, T0 + 20))).toEqual([3, 4, 5]);
    expect(await said(() => op.splitBatch(3, { maxEvents: 5 }, T0 + 21))).toBe(
      "batch 3 already fits; nothing to split",
    );
    expect(await said(() => op.splitBatch(2, { maxEvents: 1 }, T0 + 21))).toBe(
      "batch 2 is open; split applies to sealed, retry or dead batches",
    );
    expect(await said(() => op.splitBatch(3, {}, T0))).toBe(
      "split needs exactly one of --max-events, --max-bytes, --at",
    );
    const hashOf3 = async () => (await s.row("batches", { cols: ["content_hash"], where: { id: 3 } }))?.content_hash;
    expect(await hashOf3()).toBe("sha256:6713905f1e169675a8523f44de3e207f06406c84250b9458eb159234a1972bdc");
    expect(await said(() => op.excludeEvents(3, [1], T0 + 22))).toBeUndefined();
    expect(await said(() => op.excludeEvents(3, [2], T0 + 23))).toBe("that would exclude every event of batch 3");
    expect(await said(() => op.excludeEvents(3, [7], T0 + 23))).toBe("event 7 is not in batch 3");
    expect(await said(() => op.excludeEvents(2, [6], T0 + 24))).toBeUndefined();
    // Batch 1 done as split; its pieces sealed, not before the split; batch 3's hash over its one event left (a
    // refused exclusion changed nothing); the open batch keeps no hash until it seals.
    expect(await hashOf3()).toBe("sha256:5ef5c7cb69a9eb2ee4f2649e69eb322363ffa93f9361e019013341958810eb5a");
    const cols = ["id", "state", "first_at", "last_at", "count", "bytes", "content_hash", "result", "last_error"];
    expect(await s.rows("batches", { cols: [...cols, "not_before"], order: "id" })).toEqual([
      {
        id: 1,
        state: "dropped",
        first_at: T0,
        last_at: T0 + 4,
        count: 5,
        bytes: 595,
        content_hash: "sha256:7b706ac3d4d1d52aaa969dfdb327ab5cf7e104bf1091d0ce8d11118103ddd979",
        result: "split",
        last_error: "split into #3, #4, #5 by operator",
        not_before: null,
      },
      {
        id: 2,
        state: "open",
        first_at: T0 + 10,
        last_at: T0 + 12,
        count: 3,
        bytes: 279,
        content_hash: null,
        result: null,
        last_error: null,
        not_before: null,
      },
      piece(3, T0, T0 + 1, 2, 178, "sha256:5ef5c7cb69a9eb2ee4f2649e69eb322363ffa93f9361e019013341958810eb5a"),
      piece(4, T0 + 2, T0 + 3, 2, 218, "sha256:b6b055e47529087d292bd5757c4f6eeb421bf0481b5a089ef820d65a4fbf3424"),
      piece(5, T0 + 4, T0 + 4, 1, 124, "sha256:205bb1553b41281593b6fd47964ee82ce0494a75946e8743ed7d38eb0c205758"),
    ]);
    // Events 1-5 moved to the pieces two by two; 1 and 6 excluded.
    expect(await s.rows("events", { cols: ["id", "batch_id", "excluded_at"], order: "id" })).toEqual([
      { id: 1, batch_id: 3, excluded_at: T0 + 22 },
      { id: 2, batch_id: 3, excluded_at: null },
      { id: 3, batch_id: 4, excluded_at: null },
      { id: 4, batch_id: 4, excluded_at: null },
      { id: 5, batch_id: 5, excluded_at: null },
      { id: 6, batch_id: 2, excluded_at: T0 + 24 },
      { id: 7, batch_id: 2, excluded_at: null },
      { id: 8, batch_id: 2, excluded_at: null },
    ]);
  });
}
