// The operator's seam methods the CLI's enqueue, prune, export and status --deep use, the same
// on both backends: one event in, its duplicate, a retention pass that deletes what is past its
// age, the export's records, and what each backend says of its file and its integrity check.
import { expect, setDefaultTimeout, test } from "bun:test";
import type { RetentionPolicy } from "../../src/store/retention.ts";
import type { ExportRecord } from "../../src/store/export.ts";
import { onBothBackends } from "../helpers/backends.ts";
import { ev, T0 } from "../helpers/spool.ts";

setDefaultTimeout(60_000);

const DAY = 86400;
const policy: RetentionPolicy = {
  deliveredDays: 7,
  attemptsDays: 30,
  droppedDays: 7,
  issuesDays: 30,
  dedupWindowS: () => DAY,
};

onBothBackends((open, backend) => {
  test("enqueue: one event in its own transaction, a second with its dedup id is a duplicate", async () => {
    const b = await open();
    try {
      const first = await b.operator.enqueue(ev({ dedupId: "d1" }), T0);
      expect(first).toMatchObject({
        status: "queued",
        placed: [{ batchId: 1, eventId: 1, route: "r", destination: "http:d" }],
      });
      expect(await b.operator.enqueue(ev({ dedupId: "d1" }), T0 + 1)).toMatchObject({
        status: "duplicate",
        eventId: 1,
      });
      expect((await b.operator.batchEvents(1)).length).toBe(1);
    } finally {
      await b.close();
    }
  });

  test(
    "runRetention deletes a dropped batch past its age and keeps a fresh one; exportBatches pages every batch, " +
      "oldest first",
    async () => {
      const b = await open();
      try {
        await b.operator.enqueue(ev({ key: "old" }), T0);
        await b.operator.enqueue(ev({ key: "new" }), T0);
        await b.operator.dropBatches([1], T0);
        await b.operator.dropBatches([2], T0 + 9 * DAY);
        const before: ExportRecord[] = [];
        for await (const rec of b.operator.exportBatches({})) before.push(rec);
        expect(before.map((r) => [r.batch.id, r.batch.key, r.events.length])).toEqual([
          [1, "old", 1],
          [2, "new", 1],
        ]);
        const counts = await b.operator.runRetention(policy, T0 + 10 * DAY);
        expect(counts).toMatchObject({ batches: 1, events: 1 });
        const after: number[] = [];
        for await (const rec of b.operator.exportBatches({})) after.push(rec.batch.id);
        expect(after).toEqual([2]);
        expect(await b.operator.runRetention(policy, T0 + 10 * DAY)).toMatchObject({ batches: 0, events: 0 });
      } finally {
        await b.close();
      }
    },
  );

  test(
    "the journal's cursor: from the start, filtered, on from a row's cursor, from now; a malformed one is a usage " +
      "error",
    async () => {
      const b = await open();
      try {
        await b.operator.enqueue(ev({ key: "a" }), T0);
        await b.operator.enqueue(ev({ key: "b" }), T0);
        const start = await b.operator.journalCursor("0");
        const all = await b.operator.journalAfter(start, {}, 10);
        expect(all.rows.map((r) => [r.kind, r.key])).toEqual([
          ["event", "a"],
          ["event", "b"],
        ]);
        expect(all.full).toBe(false);
        const onlyB = await b.operator.journalAfter(start, { key: "b" }, 10);
        expect(onlyB.rows.map((r) => r.key)).toEqual(["b"]);
        const after = await b.operator.journalAfter(await b.operator.journalCursor(all.rows[0].cursor), {}, 10);
        expect(after.rows.map((r) => r.key)).toEqual(["b"]);
        const head = await b.operator.journalCursor(undefined);
        expect((await b.operator.journalAfter(head, {}, 10)).rows).toEqual([]);
        await b.operator.enqueue(ev({ key: "c" }), T0);
        expect((await b.operator.journalAfter(head, {}, 10)).rows.map((r) => r.key)).toEqual(["c"]);
        await expect(b.operator.journalCursor("not-a-cursor")).rejects.toThrow("--since must be a cursor");
      } finally {
        await b.close();
      }
    },
  );

  test("spoolFile and checkIntegrity: SQLite's file and its quick_check; PostgreSQL has neither", async () => {
    const b = await open();
    try {
      if (backend === "sqlite") {
        expect(b.operator.spoolFile).toBe(b.spool?.path ?? "");
        expect(await b.operator.checkIntegrity()).toEqual([]);
        await b.operator.vacuum();
      } else {
        expect(b.operator.spoolFile).toBeNull();
        expect(await b.operator.checkIntegrity()).toBeNull();
        await expect(b.operator.vacuum()).rejects.toThrow();
      }
    } finally {
      await b.close();
    }
  });
});
