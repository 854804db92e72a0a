// send --follow's walk (store/follow.ts), over reads a test scripts: each state of the event's
// batch once, with its detail; the end at a terminal state or the timeout; no reads while the
// dialect says nothing was written.
import { expect, test } from "bun:test";
import { type FollowedBatch, type FollowReads, type FollowStep, followEvent } from "../../src/store/follow.ts";

const batch = (state: string, o: Partial<FollowedBatch> = {}): FollowedBatch => ({
  state,
  last_class: null,
  dead_reason: null,
  result: null,
  ...o,
});

/** Reads that hand out `states` one per look (the last repeats); the event shows up at look `appearsAt`. */
function scripted(states: FollowedBatch[], appearsAt = 0, changed?: () => boolean) {
  let looks = 0;
  const seen = { first: [] as [string, number][], state: 0 };
  const reads: FollowReads = {
    pauseMs: 1,
    changed,
    async firstBatchAfter(source, after) {
      seen.first.push([source, after]);
      return looks++ >= appearsAt ? 7 : null;
    },
    async batchState(id) {
      expect(id).toBe(7);
      return states[Math.min(seen.state++, states.length - 1)];
    },
  };
  return { reads, seen };
}

async function walk(reads: FollowReads, timeoutMs = 5_000): Promise<FollowStep[]> {
  const out: FollowStep[] = [];
  for await (const s of followEvent(reads, { source: "gh", after: 41, timeoutMs })) out.push(s);
  return out;
}

test("each state once, with a retry's class and a delivered batch's result, to the end", async () => {
  const { reads, seen } = scripted(
    [
      batch("open"),
      batch("open"),
      batch("leased"),
      batch("retry", { last_class: "transport" }),
      batch("leased"),
      batch("delivered", { result: "accepted" }),
    ],
    2,
  );
  expect(await walk(reads)).toEqual([
    { batch: 7, state: "open" },
    { batch: 7, state: "leased" },
    { batch: 7, state: "retry", detail: "transport" },
    { batch: 7, state: "leased" },
    { batch: 7, state: "delivered", detail: "accepted" },
  ]);
  // The event's batch is looked up until it exists, then never again.
  expect(seen.first).toEqual([
    ["gh", 41],
    ["gh", 41],
    ["gh", 41],
  ]);
});

test("a dead batch ends the walk with its reason; so does a dropped one", async () => {
  expect(await walk(scripted([batch("dead", { dead_reason: "agent_failed: no" })]).reads)).toEqual([
    { batch: 7, state: "dead", detail: "agent_failed: no" },
  ]);
  expect(await walk(scripted([batch("dropped")]).reads)).toEqual([{ batch: 7, state: "dropped" }]);
});

test("the timeout ends a walk whose batch never ends", async () => {
  const started = performance.now();
  expect(await walk(scripted([batch("awaiting")]).reads, 60)).toEqual([{ batch: 7, state: "awaiting" }]);
  expect(performance.now() - started).toBeGreaterThanOrEqual(60);
});

test("while the dialect says nothing was written, nothing is read", async () => {
  const answers = [true, false, false, true, false, true];
  const { reads, seen } = scripted([batch("open"), batch("delivered", { result: "ok" })], 0, () =>
    answers.length ? (answers.shift() as boolean) : true,
  );
  expect(await walk(reads)).toEqual([
    { batch: 7, state: "open" },
    { batch: 7, state: "delivered", detail: "ok" },
  ]);
  // Only the looks after a write read: the batch once, its state twice.
  expect(seen.first).toHaveLength(1);
  expect(seen.state).toBe(2);
});
