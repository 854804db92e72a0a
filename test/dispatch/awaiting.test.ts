// Awaited outcomes through a real dispatcher and real HTTP over loopback, on SQLite and on a
// real PostgreSQL server (skipped, saying so, without one): a 2xx from a destination with
// outcome = "await" leaves the batch awaiting and its key held (other keys go on); ok ends it,
// failed retries it as a counted attempt, failed --permanent kills it (agent_failed), an overdue
// outcome does what on_timeout says, and an unknown, repeated or stale id changes nothing.
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { systemClock } from "../../src/clock.ts";
import type { Dispatcher } from "../../src/dispatch/loop.ts";
import { policyOf } from "../../src/dispatch/worker.ts";
import type { OperatorStore } from "../../src/store/api.ts";
import type { ReportInput } from "../../src/store/awaiting-plan.ts";
import { type Backend, configHome, onBothBackends, type OpenBackend, startDispatcher } from "../helpers/backends.ts";
import { waitFor } from "../helpers/proc.ts";
import { copy, ev } from "../helpers/spool.ts";
import "../helpers/intake.ts"; // captures log lines instead of printing them

setDefaultTimeout(60_000);

type Open = OpenBackend;

/** A receiver on loopback answering 202 (as an agent gateway does), remembering each webhook-id and batch. */
function receiver() {
  const got: { id: string; batch: number }[] = [];
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    async fetch(req) {
      const doc = (await req.json()) as { batch_id: number };
      got.push({ id: req.headers.get("webhook-id") ?? "", batch: doc.batch_id });
      return new Response('{"status":"accepted"}', { status: 202 });
    },
  });
  return { got, url: `http://127.0.0.1:${server.port}/in`, stop: () => server.stop(true) };
}

interface World {
  b: Backend;
  d: Dispatcher;
  got: { id: string; batch: number }[];
  put(key: string): Promise<number>;
  batch(id: number): Promise<{
    state: string;
    attempts: number;
    last_class: string | null;
    last_error: string | null;
    dead_reason: string | null;
    result: string | null;
  }>;
  report(over: Partial<ReportInput> & { deliveryId: string }): ReturnType<OperatorStore["reportOutcome"]>;
  idOf(batch: number): string;
  stop(): Promise<void>;
}

async function world(open: Open, table: string): Promise<World> {
  const rx = receiver();
  const h = configHome(
    `[dispatch]\nparallel = 4\nbackoff_base_s = 0.2\nbackoff_cap_s = 0.4\n\n[sources.s]\naction = "a"\n\n` +
      `[destinations.a]\ntype = "http"\nurl = "${rx.url}"\nallow_insecure = true\nunsigned = true\n` +
      `outcome = "await"\n${table}\n`,
  );
  const b = await open();
  const d = await startDispatcher(await b.dispatch(), h);
  const loaded = h.loaded;
  const policy = policyOf(loaded.config);
  return {
    b,
    d,
    got: rx.got,
    async put(key) {
      const [r] = await b.intake.enqueueAll(
        [ev({ key, copies: [copy("r:a", "a", { quiet_s: 0, max_s: 0, max_events: 1 })] })],
        systemClock.now(),
      );
      d.wake();
      if (r.status !== "queued") throw new Error(r.status);
      return r.placed[0].batchId;
    },
    async batch(id) {
      const row = await b.operator.getBatch(id);
      if (!row) throw new Error(`no batch ${id}`);
      return row as never;
    },
    report: (over) =>
      b.operator.reportOutcome({
        status: "ok",
        reason: null,
        permanent: false,
        via: "cli",
        now: systemClock.now(),
        jitter: 0,
        policy,
        ...over,
      }),
    idOf(batch) {
      const hit = rx.got.filter((g) => g.batch === batch).at(-1);
      if (!hit) throw new Error(`batch ${batch} was never delivered`);
      return hit.id;
    },
    async stop() {
      await d.stop();
      await b.close();
      rx.stop();
    },
  };
}

async function awaited(w: World, id: number): Promise<void> {
  await waitFor(`batch ${id} awaiting`, async () => (await w.batch(id)).state === "awaiting");
}

function cases(open: () => Open): void {
  test("a 2xx holds the batch's key until its outcome; other keys go on; ok ends it", async () => {
    const w = await world(open(), "");
    try {
      const a1 = await w.put("A");
      const a2 = await w.put("A");
      const b1 = await w.put("B");
      await awaited(w, a1);
      await awaited(w, b1);
      // The key's next batch waits behind the awaiting one; B's went at once.
      expect(w.got.map((g) => g.batch).sort()).toEqual([a1, b1].sort());
      expect((await w.batch(a2)).state).toBe("sealed");
      const r = await w.report({ deliveryId: w.idOf(a1) });
      expect(r).toMatchObject({ kind: "settled", batchId: a1, state: "delivered" });
      expect(await w.batch(a1)).toMatchObject({ state: "delivered", result: "ok" });
      await awaited(w, a2);
      expect(w.got.map((g) => g.batch)).toContain(a2);
      // The outcome is an attempt row of class agent carrying the delivery's id.
      const attempts = await w.b.operator.batchAttempts(a1);
      expect(attempts.map((a) => [a.outcome, a.klass, a.counted])).toEqual([
        ["ok", "await", 0],
        ["ok", "agent", 1],
      ]);
      // Said twice: settled already, nothing changes; an id of no delivery of ours: unknown.
      expect(await w.report({ deliveryId: w.idOf(a1), status: "failed" })).toMatchObject({
        kind: "settled_already",
        state: "delivered",
      });
      expect((await w.batch(a1)).state).toBe("delivered");
      expect(await w.report({ deliveryId: "hs_nobody_1" })).toEqual({ kind: "unknown" });
    } finally {
      await w.stop();
    }
  });

  test("reports arriving together each settle once; the same one twice in that turn settles once", async () => {
    const w = await world(open(), "");
    try {
      const ids = [await w.put("A"), await w.put("B"), await w.put("C")];
      for (const id of ids) await awaited(w, id);
      const [a, b, c] = ids.map((id) => w.idOf(id));
      const out = await Promise.all([
        w.report({ deliveryId: a }),
        w.report({ deliveryId: b, status: "failed" }),
        w.report({ deliveryId: a }),
        w.report({ deliveryId: c }),
        w.report({ deliveryId: "hs_nobody_2" }),
      ]);
      const said = out.map((r) => (r.kind === "settled" ? r.state : r.kind));
      // a's two reports: exactly one settles it. Which one is the order the two transactions take
      // the batch's row in (PostgreSQL's reports of one turn may commit in two at once).
      expect([said[0], said[2]].sort()).toEqual(["delivered", "settled_already"]);
      expect([said[1], said[3], said[4]]).toEqual(["retry", "delivered", "unknown"]);
      expect((await w.b.operator.batchAttempts(ids[0])).filter((x) => x.klass === "agent")).toHaveLength(1);
    } finally {
      await w.stop();
    }
  });

  test("failed retries under the backoff as a counted attempt; the next run's ok ends it", async () => {
    const w = await world(open(), "");
    try {
      const a1 = await w.put("A");
      await awaited(w, a1);
      const first = w.idOf(a1);
      expect(await w.report({ deliveryId: first, status: "failed", reason: "model timed out" })).toMatchObject({
        kind: "settled",
        state: "retry",
      });
      const after = await w.batch(a1);
      expect(after).toMatchObject({
        state: "retry",
        attempts: 1,
        last_class: "agent",
        last_error: "agent_failed: model timed out",
      });
      // Delivered again after the backoff: a new delivery id (the receiver must not take it as a duplicate).
      await waitFor("the second delivery", () => w.got.filter((g) => g.batch === a1).length === 2);
      await awaited(w, a1);
      const second = w.idOf(a1);
      expect(second).not.toBe(first);
      // The first delivery's outcome is stale now: it settles nothing.
      expect(await w.report({ deliveryId: first })).toMatchObject({ kind: "settled_already", state: "awaiting" });
      expect(await w.report({ deliveryId: second })).toMatchObject({ kind: "settled", state: "delivered" });
      expect(await w.batch(a1)).toMatchObject({ state: "delivered", attempts: 2 });
    } finally {
      await w.stop();
    }
  });

  test("failed --permanent is dead with agent_failed, an issue opened, and the key moves on", async () => {
    const w = await world(open(), "");
    try {
      const a1 = await w.put("A");
      const a2 = await w.put("A");
      await awaited(w, a1);
      expect(
        await w.report({ deliveryId: w.idOf(a1), status: "failed", reason: "cannot parse", permanent: true }),
      ).toMatchObject({ kind: "settled", state: "dead", deadReason: "agent_failed" });
      expect(await w.batch(a1)).toMatchObject({
        state: "dead",
        dead_reason: "agent_failed",
        last_error: "agent_failed: cannot parse",
      });
      const issues = await w.b.operator.listIssues({});
      expect(issues.map((i) => i.fingerprint)).toContain("delivery:a:agent_failed");
      await awaited(w, a2);
    } finally {
      await w.stop();
    }
  });

  test("an overdue outcome with on_timeout = retry is delivered again", async () => {
    const w = await world(open(), "outcome_timeout_s = 1\n");
    try {
      const a1 = await w.put("A");
      await awaited(w, a1);
      await waitFor("the delivery after the timeout", () => w.got.filter((g) => g.batch === a1).length === 2, 20_000);
      const attempts = await w.b.operator.batchAttempts(a1);
      expect(attempts.map((a) => [a.outcome, a.klass])).toContainEqual(["retry", "agent"]);
      const issues = await w.b.operator.listIssues({});
      expect(issues.map((i) => i.fingerprint)).toContain("delivery:a:outcome_timeout");
    } finally {
      await w.stop();
    }
  });

  test("an overdue outcome with on_timeout = delivered ends the batch as delivered", async () => {
    const w = await world(open(), 'outcome_timeout_s = 1\non_timeout = "delivered"\n');
    try {
      const a1 = await w.put("A");
      await awaited(w, a1);
      await waitFor("the batch taken as delivered", async () => (await w.batch(a1)).state === "delivered", 20_000);
      expect((await w.batch(a1)).result).toBe("timeout");
      expect(w.got.filter((g) => g.batch === a1)).toHaveLength(1);
    } finally {
      await w.stop();
    }
  });
}

describe("awaited outcomes", () => {
  onBothBackends((open) => cases(() => open));
});
