// Every answer of the Hermes gateway, through a real dispatcher and the hermes destination, against
// a stand-in that answers as the upstream handler does (test/helpers/hermes-gateway.ts): accepted
// and delivered, a duplicate that only proves admission, ignored (with the gateway's reason and an
// issue past the threshold), a 404 that pauses the destination, a 429 that gates it, its rate
// read from the subscriptions file so the gateway never has to say 429, and a JSON object always.
import { afterEach, describe, expect, test } from "bun:test";
import { HermesDestination, type HermesDestinationOptions } from "../../src/destinations/hermes.ts";
import { renderStoreMetrics } from "../../src/obs/metrics.ts";
import { sqliteStatusStore } from "../../src/store/sqlite/store.ts";
import { join } from "node:path";
import { type GatewayOptions, HermesGateway } from "../helpers/hermes-gateway.ts";
import { batchIdOf, rig } from "../helpers/dispatch.ts";

const SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const gateways: HermesGateway[] = [];
afterEach(() => {
  for (const g of gateways.splice(0)) g.stop();
});

/** A dispatcher on a temp spool delivering to hermes:ci on a gateway stand-in that keeps the rig's clock. */
function setup(gw: Omit<GatewayOptions, "now">, dest: Partial<HermesDestinationOptions> = {}, config = "") {
  let r: ReturnType<typeof rig> | null = null;
  const gateway = new HermesGateway({ ...gw, now: () => (r ? r.clock.now() : Date.now() / 1000) });
  gateways.push(gateway);
  const hermes = new HermesDestination({
    name: "hermes:ci",
    route: "ci",
    baseUrl: gateway.url,
    subscriptionsPath: gateway.subscriptionsPath,
    instanceId: "inst1",
    timeoutS: 5,
    maxInflight: 4,
    ...dest,
  });
  r = rig(`[sources.s]\naction = "hermes:ci"\n${config}`, [hermes]);
  return { r, gateway, hermes };
}

/** One batch of `n` events of one key (a window of 1 s), sealed and attempted once. */
async function firstAttempt(r: ReturnType<typeof rig>, n: number): Promise<number> {
  const id = batchIdOf(r.put("k", "hermes:ci", { window: { quiet_s: 1, max_s: 1 } }));
  for (let i = 1; i < n; i++) r.put("k", "hermes:ci", { window: { quiet_s: 1, max_s: 1 } });
  r.clock.advance(2);
  await r.step();
  return id;
}

/** The batch's next attempt, once its retry is due. */
async function retryWhenDue(r: ReturnType<typeof rig>, id: number): Promise<void> {
  r.clock.set(r.batch(id).next_attempt_at as number);
  await r.step();
}

const attempts = (r: ReturnType<typeof rig>, id: number) =>
  r.attempts(id).map((a) => ({ outcome: a.outcome, status: a.status, answer: a.answer, unconfirmed: a.unconfirmed }));

describe("the gateway's answers", () => {
  test("202 accepted: delivered, its result accepted (the run is queued, not done)", async () => {
    const { r, gateway } = setup({ routes: { ci: { secret: SECRET } } });
    const id = batchIdOf(r.put("k", "hermes:ci"));
    await r.step();
    expect(gateway.counts()).toEqual({ accepted: 1 });
    expect(r.batch(id)).toMatchObject({ state: "delivered", result: "accepted" });
    expect(attempts(r, id)).toEqual([{ outcome: "ok", status: 202, answer: "accepted", unconfirmed: 0 }]);
  });

  test("200 delivered (a deliver_only route): delivered, result ok", async () => {
    const { r } = setup({ routes: { ci: { secret: SECRET, deliver_only: true } } });
    const id = batchIdOf(r.put("k", "hermes:ci"));
    await r.step();
    expect(r.batch(id)).toMatchObject({ state: "delivered", result: "ok" });
    expect(attempts(r, id)[0]).toMatchObject({ answer: "delivered" });
  });

  test("duplicate after a 5xx of ours: the gateway recorded the id and failed; delivered but unconfirmed", async () => {
    // deliver_only answers 502 after it recorded the delivery id: the retry's duplicate proves nothing ran.
    const { r, gateway } = setup(
      { routes: { ci: { secret: SECRET, deliver_only: true, deliverFails: (n) => n === 2 } } },
      { unwrap: true },
    );
    const id = await firstAttempt(r, 2);
    expect(r.batch(id)).toMatchObject({ state: "retry", last_class: "transport" });
    await retryWhenDue(r, id);
    // The first event got through and is not sent again (the gateway's window is spent by every request).
    expect(gateway.hits.map((h) => h.answer)).toEqual(["delivered", "error", "duplicate"]);
    expect(r.batch(id)).toMatchObject({ state: "delivered", result: "unconfirmed" });
    expect(attempts(r, id)[1]).toMatchObject({ outcome: "ok", answer: "duplicate", unconfirmed: 1 });
    const journal = r.spool.db
      .query("SELECT detail FROM journal WHERE kind = 'delivered' AND batch_id = ?")
      .get(id) as { detail: string };
    expect(JSON.parse(journal.detail)).toMatchObject({ unconfirmed: true });
  });

  test("duplicate after a timeout of ours: the gateway admitted it while we gave up; unconfirmed", async () => {
    const { r, gateway } = setup(
      { routes: { ci: { secret: SECRET } }, delayMs: (n) => (n === 1 ? 600 : 0) },
      { unwrap: true, timeoutS: 0.2 },
    );
    const id = batchIdOf(r.put("k", "hermes:ci"));
    await r.step();
    expect(r.batch(id)).toMatchObject({ state: "retry", last_class: "transport" });
    // The gateway finishes the request we abandoned, and keeps its id.
    for (let i = 0; i < 200 && gateway.hits.length === 0; i++) await Bun.sleep(10);
    expect(gateway.hits.map((h) => h.answer)).toEqual(["accepted"]);
    await retryWhenDue(r, id);
    expect(r.batch(id)).toMatchObject({ state: "delivered", result: "unconfirmed" });
  });

  test(
    "a duplicate for an event an earlier attempt saw accepted is confirmed (not paced: every event " + "goes again)",
    async () => {
      // A proxy answers 503 for the second request before the gateway sees it.
      const { r, gateway } = setup(
        { routes: { ci: { secret: SECRET } }, failBefore: (n) => (n === 2 ? 503 : undefined) },
        { unwrap: true, rate: null },
      );
      const id = await firstAttempt(r, 2);
      expect(r.batch(id)).toMatchObject({ state: "retry", last_class: "transport" });
      await retryWhenDue(r, id);
      expect(gateway.hits.map((h) => h.answer)).toEqual(["accepted", "proxy", "duplicate", "accepted"]);
      expect(r.batch(id)).toMatchObject({ state: "delivered", result: "accepted" });
      expect(attempts(r, id)[1]).toMatchObject({ outcome: "ok", answer: "accepted", unconfirmed: 0 });
    },
  );

  test(
    "paced: a retry sends only what did not get through, so a batch larger than the window still " + "finishes",
    async () => {
      // Three events, a window of two: the third gets 429; after the gate only it is sent.
      const { r, gateway } = setup(
        { routes: { ci: { secret: SECRET } }, rateLimit: 2 },
        { unwrap: true, rate: { limit: 30, windowS: 60 } },
      );
      const id = await firstAttempt(r, 3);
      expect(r.batch(id)).toMatchObject({ state: "retry", last_class: "throttle" });
      await retryWhenDue(r, id);
      expect(gateway.hits.map((h) => h.answer)).toEqual(["accepted", "accepted", "Rate limit exceeded", "accepted"]);
      expect(r.batch(id)).toMatchObject({ state: "delivered", result: "accepted" });
      expect(r.attempts(id).map((a) => a.hits)).toEqual([2, 1]);
    },
  );

  test(
    "200 ignored: delivered, recorded with the gateway's reason, counted in /metrics; an issue " +
      "after five in a row",
    async () => {
      const { r, gateway } = setup({ routes: { ci: { secret: SECRET, events: ["pull_request"] } } });
      const ids: number[] = [];
      for (let i = 0; i < 5; i++) {
        ids.push(batchIdOf(r.put(`k${i}`, "hermes:ci")));
        await r.step();
        const open = r.spool.db
          .query("SELECT state FROM issues WHERE fingerprint = 'delivery:hermes:ci:ignored'")
          .get();
        expect(open ?? null).toEqual(i < 4 ? null : { state: "open" });
      }
      expect(gateway.counts()).toEqual({ ignored: 5 });
      for (const id of ids) expect(r.batch(id)).toMatchObject({ state: "delivered", result: "ignored" });
      expect(r.attempts(ids[0])[0].error).toContain("ignored (events)");
      const metrics = await renderStoreMetrics(sqliteStatusStore(r.spool), r.config, join(r.home, "spool.db"), {
        now: r.clock.now(),
      });
      expect(metrics).toContain('hookspool_answers_30d{destination="hermes:ci",answer="ignored"} 5');
    },
  );

  test(
    "404 (a route the gateway skipped): the destination pauses itself with an issue naming the " + "route and the file",
    async () => {
      const { r, gateway } = setup({ routes: { ci: { secret: SECRET, skipped: true } } });
      const ids = ["a", "b", "c"].map((k) => batchIdOf(r.put(k, "hermes:ci")));
      await r.step();
      r.clock.advance(3600);
      await r.step();
      // No retries burnt on a route that is not there: what was in flight together, once, then nothing.
      const answered = gateway.hits.length;
      expect(answered).toBeGreaterThanOrEqual(1);
      expect(answered).toBeLessThanOrEqual(3);
      expect(gateway.hits.every((h) => h.status === 404)).toBe(true);
      r.clock.advance(3600);
      await r.step();
      expect(gateway.hits).toHaveLength(answered);
      expect(r.dest("hermes:ci")).toMatchObject({ state: "paused" });
      const issue = r.spool.db
        .query("SELECT state, last_error FROM issues WHERE fingerprint = 'delivery:hermes:ci:paused'")
        .get() as { state: string; last_error: string };
      expect(issue.state).toBe("open");
      expect(issue.last_error).toContain('route "ci"');
      expect(issue.last_error).toContain(gateway.subscriptionsPath);
      expect(ids.every((id) => ["retry", "sealed"].includes(r.batch(id).state as string))).toBe(true);
    },
  );

  test(
    "a payload that is not an object reaches the gateway as one (the upstream handler fails on " + "anything else)",
    async () => {
      const { r, gateway } = setup({ routes: { ci: { secret: SECRET } } }, { unwrap: true });
      const id = batchIdOf(r.put("k", "hermes:ci", { payload: "[1,2,3]" }));
      await r.step();
      expect(gateway.counts()).toEqual({ accepted: 1 });
      expect(JSON.parse(gateway.hits[0].body)).toEqual({ event_type: "t", payload: [1, 2, 3] });
      expect(r.batch(id).state).toBe("delivered");
    },
  );
});

describe("the gateway's rate", () => {
  test(
    "read from the route's rate_limit: the gateway never has to say 429, and nothing waits longer " + "than the window",
    async () => {
      const { r, gateway, hermes } = setup({ routes: { ci: { secret: SECRET, rate_limit: 3 } } });
      expect(hermes.pace()).toMatchObject({
        rate: { limit: 3, windowS: 60 },
        from: expect.stringContaining("the route's rate_limit"),
      });
      const ids = ["a", "b", "c", "d", "e", "f", "g"].map((k) => batchIdOf(r.put(k, "hermes:ci")));
      for (let t = 0; t < 4 && ids.some((id) => r.batch(id).state !== "delivered"); t++) {
        await r.step();
        await r.step();
        r.clock.advance(61.5);
      }
      expect(gateway.counts()).toEqual({ accepted: 7 });
      expect(ids.every((id) => r.batch(id).state === "delivered")).toBe(true);
    },
  );

  test("without one, the gateway's default: [hermes] rate_limit per minute", async () => {
    const { hermes } = setup({ routes: { ci: { secret: SECRET } } }, { gatewayRateLimit: 12 });
    expect(hermes.pace()).toEqual({
      rate: { limit: 12, windowS: 60 },
      from: "the gateway's rate_limit ([hermes] rate_limit = 12)",
    });
  });

  test(
    "a 429 (another sender shares the gateway's window): the destination waits a window, then " +
      "sends one probe, then the rest",
    async () => {
      // Our own pace is off ("none"); the gateway lets one in per minute.
      const { r, gateway } = setup(
        { routes: { ci: { secret: SECRET } }, rateLimit: 1 },
        { rate: null, maxInflight: 1 },
      );
      const ids = ["a", "b", "c"].map((k) => batchIdOf(r.put(k, "hermes:ci")));
      await r.step();
      await r.step();
      expect(gateway.hits.map((h) => h.status)).toEqual([202, 429]);
      expect(gateway.hits[1].headers["retry-after"]).toBeUndefined();
      r.clock.advance(30);
      await r.step();
      expect(gateway.hits).toHaveLength(2);
      r.clock.advance(31);
      await r.step();
      // One probe after the window; it is let in, and the gate lifts.
      expect(gateway.hits.map((h) => h.status)).toEqual([202, 429, 202]);
      expect(r.dest("hermes:ci")).toMatchObject({ throttled_at: null });
      expect(ids.filter((id) => r.batch(id).state === "delivered")).toHaveLength(2);
    },
  );
});
