// Retention's chunk rule (store/retention.ts planFinishedChunk), the one both dialects apply to
// their finished batches: whole batches while they fit, the first that does not ends the chunk,
// and one too big for any transaction loses a transaction's worth of its events.
import { expect, test } from "bun:test";
import { planFinishedChunk } from "../../src/store/retention.ts";

const b = (id: number, events: number) => ({ id, events });

test("batches go whole with their events while they fit in the transaction", () => {
  // 3+1, 2+1, 4+1 = 12 rows of 12.
  expect(planFinishedChunk([b(1, 3), b(2, 2), b(3, 4), b(4, 0)], 12)).toEqual({ batches: [1, 2, 3] });
  expect(planFinishedChunk([b(1, 0), b(2, 0)], 10)).toEqual({ batches: [1, 2] });
  expect(planFinishedChunk([], 10)).toEqual({ batches: [] });
});

test("the first batch that does not fit ends the chunk, even if a later one would", () => {
  expect(planFinishedChunk([b(1, 5), b(2, 9), b(3, 0)], 10)).toEqual({ batches: [1] });
});

test("a batch bigger than a whole transaction loses a transaction's worth of events, oldest first", () => {
  expect(planFinishedChunk([b(1, 10), b(2, 0)], 10)).toEqual({ batches: [], someEventsOf: { id: 1, limit: 10 } });
  // Its batch row goes once the rest fits: 9 events + the row = 10.
  expect(planFinishedChunk([b(1, 9), b(2, 0)], 10)).toEqual({ batches: [1] });
  // Behind another batch it waits for the next transaction, which it then has alone.
  expect(planFinishedChunk([b(1, 0), b(2, 50)], 10)).toEqual({ batches: [1] });
});
