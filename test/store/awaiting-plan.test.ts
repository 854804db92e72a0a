// The awaited-outcome rule as a pure plan: what ok, failed, failed --permanent and an overdue
// outcome do to an awaiting batch, the poison run and max_attempts, and which issues open or
// resolve. And the poison walk over a batch's attempts: an agent's failed run is a strike when
// another batch's run succeeded in between; another batch's 2xx alone (class await) is not.
import { describe, expect, test } from "bun:test";
import { type AwaitingFacts, planAwaiting, type ReportInput } from "../../src/store/awaiting-plan.ts";
import { transportStrikesTx } from "../../src/store/sqlite/outcome.ts";
import { POISON_STRIKES } from "../../src/store/outcome-plan.ts";
import { freshSpool } from "../helpers/spool.ts";

const policy = {
  maxAttempts: 64,
  backoffBaseS: 15,
  backoffCapS: 300,
  tripAfter: 3,
  cooldownInitialS: 30,
  cooldownMaxS: 600,
};
const facts = (over: Partial<AwaitingFacts> = {}): AwaitingFacts => ({
  attemptId: 10,
  acceptedAt: 1000,
  batch: { id: 5, state: "awaiting", destination: "hermes:ci", route: "r", attempts: 0 },
  newest: true,
  strikes: 0,
  attemptRows: 1,
  ...over,
});
const report = (over: Partial<ReportInput> = {}): ReportInput => ({
  deliveryId: "hs_x_5",
  status: "ok",
  reason: null,
  permanent: false,
  via: "cli",
  now: 1060,
  jitter: 0,
  policy,
  ...over,
});

describe("planAwaiting", () => {
  test("ok: delivered, a counted attempt, the run's duration; agent_failed and outcome_timeout issues resolve", () => {
    const p = planAwaiting(facts(), report());
    expect(p.mark).toEqual({ kind: "delivered", result: "ok" });
    expect(p.attempt).toEqual({ n: 2, outcome: "ok", answer: "ok", error: null, counted: true, durationMs: 60_000 });
    expect(p.resolve).toEqual(["delivery:hermes:ci:agent_failed", "delivery:hermes:ci:outcome_timeout"]);
    expect(p.raise).toEqual([]);
  });

  test("failed: retry at the backoff, counted; an issue from the third counted failure", () => {
    const p = planAwaiting(facts(), report({ status: "failed", reason: "model\ntimed out" }));
    expect(p.mark).toEqual({ kind: "retry", nextAttemptAt: 1060 + 15, error: "agent_failed: model timed out" });
    expect(p.attempt).toMatchObject({ outcome: "retry", counted: true, answer: "failed" });
    expect(p.raise).toEqual([]);
    expect(
      planAwaiting(facts({ batch: { ...facts().batch, attempts: 2 } }), report({ status: "failed" })).raise.map(
        (i) => i.fingerprint,
      ),
    ).toEqual(["delivery:hermes:ci:agent_failed"]);
  });

  test("failed --permanent: dead, agent_failed, with its issue", () => {
    const p = planAwaiting(facts(), report({ status: "failed", reason: "bad diff", permanent: true }));
    expect(p.mark).toEqual({ kind: "dead", deadReason: "agent_failed", error: "agent_failed: bad diff" });
    expect(p.raise.map((i) => i.fingerprint)).toEqual(["delivery:hermes:ci:agent_failed"]);
  });

  test("a failed run completing the poison run is dead as poison, uncounted; max_attempts counted is exhausted", () => {
    const poison = planAwaiting(facts({ strikes: POISON_STRIKES }), report({ status: "failed" }));
    expect(poison.mark).toMatchObject({ kind: "dead", deadReason: "poison" });
    expect(poison.attempt.counted).toBe(false);
    expect(planAwaiting(facts({ strikes: POISON_STRIKES - 1 }), report({ status: "failed" })).mark.kind).toBe("retry");
    const spent = planAwaiting(facts({ batch: { ...facts().batch, attempts: 63 } }), report({ status: "failed" }));
    expect(spent.mark).toMatchObject({ kind: "dead", deadReason: "exhausted" });
  });

  test("overdue: on_timeout retry delivers again with an issue; on_timeout delivered ends it, result timeout", () => {
    const again = planAwaiting(facts(), report({ status: "timeout", via: "timeout", onTimeout: "retry" }));
    expect(again.mark).toMatchObject({ kind: "retry", error: "no outcome in time" });
    expect(again.raise.map((i) => i.fingerprint)).toEqual(["delivery:hermes:ci:outcome_timeout"]);
    const done = planAwaiting(facts(), report({ status: "timeout", via: "timeout", onTimeout: "delivered" }));
    expect(done.mark).toEqual({ kind: "delivered", result: "timeout" });
    expect(done.raise.map((i) => i.fingerprint)).toEqual(["delivery:hermes:ci:outcome_timeout"]);
  });
});

describe("the poison walk over awaited runs", () => {
  /** Attempt rows for batch 1 and, between its failures, batch 2's, as the store writes them. */
  function history(between: { outcome: string; klass: string | null }) {
    const { spool } = freshSpool();
    const ins = spool.db.query(
      "INSERT INTO attempts (batch_id, n, destination, started_at, finished_at, outcome, klass) VALUES (?, ?, 'd', " +
        "?, ?, ?, ?)",
    );
    let t = 100;
    for (let i = 0; i < 3; i++) {
      ins.run(1, 2 * i + 1, t, t, "ok", "await"); // batch 1's 2xx
      ins.run(1, 2 * i + 2, t + 1, t + 1, "retry", "agent"); // its run failed
      ins.run(2, i + 1, t + 2, t + 2, between.outcome, between.klass); // batch 2 meanwhile
      t += 10;
    }
    return transportStrikesTx(spool.db, 1, "d", t);
  }

  test("another batch's run that ended ok between failed runs makes each a strike", () => {
    // Each of the three failures has batch 2's success after it, before the next (or now).
    expect(history({ outcome: "ok", klass: "agent" })).toBe(3);
  });

  test("another batch's 2xx alone (its run still to report) is no success: no strike", () => {
    expect(history({ outcome: "ok", klass: "await" })).toBe(0);
  });
});
