// The dashboard's role of the store gives the same answers on SQLite and on a real PostgreSQL
// server (skipped, saying so, without one): its charts, ready counts and quarantine reasons, its
// actions with their record (a change that does nothing records nothing), the live tail's
// cursor, the status facts it shows, and its batch list's payload conditions.
import { describe, expect, test } from "bun:test";
import { HookspoolError } from "../../src/errors.ts";
import { type Backend, onBothBackends } from "../helpers/backends.ts";
import { copy, ev, T0 } from "../helpers/spool.ts";
import { parseWheres } from "../../src/store/where.ts";

async function put(b: Backend, source: string, at: number, quiet = 10): Promise<number> {
  const [r] = await b.intake.enqueueAll(
    [ev({ source, key: `${source}-k`, copies: [copy("r", "http:d", { quiet_s: quiet, max_s: 300 })] })],
    at,
  );
  if (r.status !== "queued") throw new Error(r.status);
  return r.placed[0].batchId;
}

async function refused(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (e) {
    if (e instanceof HookspoolError) return `${e.code}: ${e.message}`;
    throw e;
  }
  throw new Error("not refused");
}

onBothBackends((open) => {
  describe("the dashboard's store", () => {
    test("charts, ready counts and quarantine reasons per bucket", async () => {
      const b = await open();
      try {
        const d = b.dashboard;
        const bk = { since: T0, bucketS: 60, count: 3 };
        const first = await put(b, "gh", T0);
        await put(b, "gh", T0 + 5);
        await put(b, "zoom", T0 + 70);
        await b.intake.quarantine(
          {
            source: "gh",
            raw: new TextEncoder().encode("not json"),
            headers: {},
            authHeaders: [],
            url: "/hooks/gh",
            reason: "not_json",
          },
          T0 + 1,
        );
        // The quarantined request is an event of its source too.
        expect(await d.eventsBySource(bk)).toEqual({ gh: [3, 0, 0], zoom: [0, 1, 0] });
        expect(await d.quarantineReasons(T0)).toEqual([{ source: "gh", reason: "not_json", n: 1 }]);
        expect(await d.quarantineReasons(T0 + 2)).toEqual([]);
        const dispatch = await b.dispatch();
        expect(await dispatch.sealReady(T0 + 20)).toContain(first);
        expect(await d.readyCounts(T0 + 20)).toEqual(new Map([["http:d", 1]]));
        const [claim] = await dispatch.claimBatches([
          {
            batchId: first,
            destination: "http:d",
            now: T0 + 20,
            leaseUntil: T0 + 80,
            host: "t",
            pid: 1,
            route: "r",
            key: "gh-k",
          },
        ]);
        if (!claim || claim === "gated") throw new Error("not claimed");
        expect(await d.readyCounts(T0 + 20)).toEqual(new Map());
        await dispatch.abandonAttempt(claim.attemptId, T0 + 21, "gone");
        expect(await d.attemptsByOutcome(bk)).toEqual({ discarded: [1, 0, 0] });
        expect(await d.readyToOkLatency(bk)).toEqual({ p50: [null, null, null], p99: [null, null, null] });
      } finally {
        await b.close();
      }
    });

    test("actions change the spool and are recorded; one that does nothing records nothing", async () => {
      const b = await open();
      try {
        const d = b.dashboard;
        await put(b, "gh", T0);
        await d.act(T0 + 1, { verb: "pause", destination: "http:d", by: "the dashboard" });
        expect((await b.dispatch().then((s) => s.destinationState("http:d"))).state).toBe("paused");
        await d.act(T0 + 2, { verb: "resume", destination: "http:d" });
        expect(await refused(d.act(T0 + 3, { verb: "resume", destination: "http:d" }))).toBe(
          "E_NOTHING: destination http:d is not paused",
        );
        expect(await refused(d.act(T0 + 4, { verb: "ack", issue: 999 }))).toBe("E_NOT_FOUND: no issue 999");
        const actions = await d.recentActions(10);
        expect(actions.map(({ at, via, verb, target }) => ({ at, via, verb, target }))).toEqual([
          { at: T0 + 2, via: "dashboard", verb: "resume", target: "destination http:d" },
          { at: T0 + 1, via: "dashboard", verb: "pause", target: "destination http:d" },
        ]);
        expect((await d.recentActions(1)).length).toBe(1);
      } finally {
        await b.close();
      }
    });

    test("the batch list takes --where's conditions", async () => {
      const b = await open();
      try {
        for (const [i, payload] of [{ action: "opened" }, { action: "closed" }, { action: "opened", n: 1 }].entries())
          await b.intake.enqueueAll([ev({ key: `k${i}`, payload: JSON.stringify(payload) })], T0 + i);
        const ids = async (...conds: string[]) =>
          (await b.dashboard.listBatches({ where: parseWheres(conds, "where") })).map((r) => r.id);
        expect(await ids("action = opened")).toEqual([3, 1]);
        expect(await ids("action = opened", "n exists")).toEqual([3]);
        expect(await ids("action != opened")).toEqual([2]);
      } finally {
        await b.close();
      }
    });

    test("the live tail: the last rows and a cursor that follows only new ones", async () => {
      const b = await open();
      try {
        const d = b.dashboard;
        const empty = await d.journalTail(50);
        expect(empty.rows).toEqual([]);
        expect(await d.journalAfter(empty.cursor, 10)).toEqual([]);
        for (let i = 0; i < 3; i++) await put(b, `s${i}`, T0 + i);
        const tail = await d.journalTail(2);
        expect(tail.rows.map((r) => [r.kind, r.source])).toEqual([
          ["event", "s1"],
          ["event", "s2"],
        ]);
        expect(tail.cursor).toBe(tail.rows[1].cursor);
        expect(await d.journalAfter(tail.cursor, 10)).toEqual([]);
        await put(b, "late", T0 + 9);
        const next = await d.journalAfter(tail.cursor, 10);
        expect(next.map((r) => [r.kind, r.source, r.key])).toEqual([["event", "late", "late-k"]]);
        // A cursor from a row resumes after it; one the backend cannot read starts from the beginning.
        expect((await d.journalAfter(tail.rows[0].cursor, 10)).map((r) => r.source)).toEqual(["s2", "late"]);
        expect((await d.journalAfter("not a cursor", 10)).map((r) => r.source)).toEqual(["s0", "s1", "s2", "late"]);
      } finally {
        await b.close();
      }
    });

    test("the status facts it shows: counts, the gates, open issues", async () => {
      const b = await open();
      try {
        await put(b, "gh", T0);
        await b.dashboard.act(T0 + 1, { verb: "pause", destination: "http:d", by: "the dashboard" });
        const f = await b.dashboard.statusFacts({ now: T0 + 2, paces: new Map(), budgets: new Map(), staleS: 30 });
        expect(f.batches.open).toBe(1);
        expect(f.destinationRows.map((r) => [r.name, r.state])).toEqual([["http:d", "paused"]]);
        expect(f.destinationNames).toEqual(["http:d"]);
        expect(f.issuesOpen).toBe(0);
        expect(f.budgetSpends).toEqual(new Map());
        expect(f.backend === "sqlite" ? f.spoolBytes === null : (f.spoolBytes ?? 0) > 0).toBe(true);
      } finally {
        await b.close();
      }
    });
  });
});
