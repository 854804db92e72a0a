// The hermes destination against a stub gateway: signatures checked by an independent Standard
// Webhooks verifier, every answer the gateway can give, fresh secrets and per-attempt ids.
import { describe, expect, test } from "bun:test";
import { createHmac, randomBytes } from "node:crypto";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { Webhook } from "standardwebhooks";
import { HermesDestination, type HermesDestinationOptions } from "../../src/destinations/hermes.ts";
import { deliveryId } from "../../src/delivery.ts";
import { VERSION } from "../../src/version.ts";
import { tempDir } from "../helpers/tmp.ts";
import { documentFor, events, type Hit, json, makeCtx, nowClock, stub } from "./support.ts";

const WHSEC = `whsec_${randomBytes(24).toString("base64")}`;
const RAW = "a-raw-route-secret";

function gateway(
  routes: Record<string, unknown>,
  answer?: (hit: Hit, n: number) => Response | Promise<Response>,
  opts: Partial<HermesDestinationOptions> = {},
) {
  const dir = tempDir();
  const subs = join(dir, "webhook_subscriptions.json");
  const write = (r: Record<string, unknown>) => writeFileSync(subs, JSON.stringify(r));
  write(routes);
  const s = stub(answer ?? (() => json(202, { status: "accepted" })));
  const dest = new HermesDestination({
    name: "hermes:ci",
    route: "ci",
    baseUrl: s.url,
    subscriptionsPath: subs,
    instanceId: "inst1",
    ...opts,
  });
  return { dest, stub: s, subs, write };
}

const hubSig = (secret: string, body: string) => `sha256=${createHmac("sha256", secret).update(body).digest("hex")}`;

describe("hermes wire format", () => {
  test("a whsec_ route secret: standardwebhooks verifies the body and headers", async () => {
    const g = gateway({ ci: { secret: WHSEC } });
    const evs = events(2);
    const body = documentFor(evs);
    const ctx = makeCtx({ events: evs, attempt: 3, deliveryId: "hs_inst1_7_900" });
    const o = await g.dest.deliver(body, ctx);
    expect(o).toMatchObject({
      kind: "ok",
      reason: "hermes accepted",
      status: 202,
      answer: "accepted",
      unconfirmed: false,
    });
    const [hit] = g.stub.hits;
    expect(hit.method).toBe("POST");
    expect(hit.path).toBe("/webhooks/ci");
    expect(hit.body).toBe(body);
    expect(() => new Webhook(WHSEC).verify(hit.body, hit.headers)).not.toThrow();
    expect(() => new Webhook(`whsec_${randomBytes(24).toString("base64")}`).verify(hit.body, hit.headers)).toThrow();
    expect(hit.headers).toMatchObject({
      "webhook-id": "hs_inst1_7_900",
      "webhook-timestamp": String(Math.floor(ctx.clock.now())),
      "x-hookspool-batch": "7",
      "x-hookspool-attempt": "3",
      "content-type": "application/json",
      "user-agent": `hookspool/${VERSION}`,
    });
    // Legacy receivers: the HMAC of the body under the secret's raw UTF-8, prefix and all.
    expect(hit.headers["x-hub-signature-256"]).toBe(hubSig(WHSEC, body));
  });

  test("a raw route secret: its UTF-8 bytes are the key", async () => {
    const g = gateway({ ci: { secret: RAW } });
    const body = documentFor(events(1));
    expect((await g.dest.deliver(body, makeCtx())).kind).toBe("ok");
    const [hit] = g.stub.hits;
    expect(() => new Webhook(RAW, { format: "raw" }).verify(hit.body, hit.headers)).not.toThrow();
    expect(hit.headers["x-hub-signature-256"]).toBe(hubSig(RAW, body));
  });

  test("legacy_signature = false leaves X-Hub-Signature-256 out", async () => {
    const g = gateway({ ci: { secret: RAW } }, undefined, { legacySignature: false });
    await g.dest.deliver(documentFor(events(1)), makeCtx());
    expect(g.stub.hits[0].headers["x-hub-signature-256"]).toBeUndefined();
    expect(g.stub.hits[0].headers["webhook-signature"]).toStartWith("v1,");
  });

  test("a route with a profile posts to /p/<profile>/webhooks/<route>", async () => {
    const g = gateway({ ci: { secret: RAW, profile: "work" } });
    await g.dest.deliver(documentFor(events(1)), makeCtx());
    expect(g.stub.hits[0].path).toBe("/p/work/webhooks/ci");
  });

  test("the secret is read fresh on every attempt", async () => {
    const g = gateway({ ci: { secret: "first-secret" } });
    const body = documentFor(events(1));
    await g.dest.deliver(body, makeCtx());
    g.write({ ci: { secret: "second-secret" } });
    await g.dest.deliver(body, makeCtx());
    const [a, b] = g.stub.hits;
    expect(() => new Webhook("first-secret", { format: "raw" }).verify(a.body, a.headers)).not.toThrow();
    expect(() => new Webhook("second-secret", { format: "raw" }).verify(b.body, b.headers)).not.toThrow();
    expect(() => new Webhook("first-secret", { format: "raw" }).verify(b.body, b.headers)).toThrow();
  });

  test("idempotency is per attempt: two attempts carry two ids, one batch header", async () => {
    const g = gateway({ ci: { secret: RAW } });
    expect(g.dest.idempotency).toBe("per-attempt");
    for (const attemptId of [101, 102]) {
      await g.dest.deliver(
        documentFor(events(1)),
        makeCtx({ deliveryId: deliveryId(g.dest.idempotency, "inst1", 7, attemptId) }),
      );
    }
    const [a, b] = g.stub.hits;
    expect(a.headers["webhook-id"]).toBe("hs_inst1_7_101");
    expect(b.headers["webhook-id"]).toBe("hs_inst1_7_102");
    expect(a.headers["x-hookspool-batch"]).toBe(b.headers["x-hookspool-batch"]);
  });

  test("the event header carries the batch's last event type, unless unusable", async () => {
    const g = gateway({ ci: { secret: RAW } });
    const evs = events(2); // push, check_suite
    await g.dest.deliver(documentFor(evs), makeCtx({ events: evs, eventHeader: "X-GitHub-Event" }));
    expect(g.stub.hits[0].headers["x-github-event"]).toBe("check_suite");
    // A name hookspool sets is never taken over; a value that cannot go on the wire is left out.
    await g.dest.deliver(documentFor(evs), makeCtx({ events: evs, eventHeader: "User-Agent" }));
    expect(g.stub.hits[1].headers["user-agent"]).toBe(`hookspool/${VERSION}`);
    const odd = [{ ...evs[0], eventType: "bad\r\nX-Injected: 1" }];
    await g.dest.deliver(documentFor(odd), makeCtx({ events: odd, eventHeader: "X-GitHub-Event" }));
    expect(g.stub.hits[2].headers["x-github-event"]).toBeUndefined();
    expect(g.stub.hits[2].headers["x-injected"]).toBeUndefined();
    const untyped = [{ ...evs[0], eventType: "" }];
    await g.dest.deliver(documentFor(untyped), makeCtx({ events: untyped, eventHeader: "X-GitHub-Event" }));
    expect("x-github-event" in g.stub.hits[3].headers).toBe(false);
    const wide = [{ ...evs[0], eventType: "push \u2713" }];
    await g.dest.deliver(documentFor(wide), makeCtx({ events: wide, eventHeader: "X-GitHub-Event" }));
    expect(g.stub.hits[4].headers["x-github-event"]).toBeUndefined();
  });

  test("the destination's own event_header wins over the source's", async () => {
    const g = gateway({ ci: { secret: RAW } }, undefined, { eventHeader: "X-Event" });
    await g.dest.deliver(documentFor(events(1)), makeCtx({ events: events(1), eventHeader: "X-GitHub-Event" }));
    expect(g.stub.hits[0].headers["x-event"]).toBe("push");
    expect(g.stub.hits[0].headers["x-github-event"]).toBeUndefined();
  });
});

describe("every gateway answer maps to its outcome", () => {
  const clock = nowClock();
  const cases: [string, () => Response, Record<string, unknown>][] = [
    [
      "202 accepted",
      () => json(202, { status: "accepted", route: "ci", delivery_id: "x" }),
      { kind: "ok", klass: null, answer: "accepted", unconfirmed: false, pause: null },
    ],
    [
      "202 coalesced",
      () => json(202, { status: "coalesced" }),
      { kind: "ok", answer: "coalesced", unconfirmed: false },
    ],
    // A document's id is new on every attempt: nothing of ours can confirm a duplicate of it.
    ["200 duplicate", () => json(200, { status: "duplicate" }), { kind: "ok", answer: "duplicate", unconfirmed: true }],
    [
      "200 ignored (events filter)",
      () => json(200, { status: "ignored", event: "push" }),
      { kind: "ok", answer: "ignored", ignoredReason: "events" },
    ],
    [
      "200 ignored (a filter)",
      () => json(200, { status: "ignored", reason: "filter", route: "ci" }),
      { kind: "ok", answer: "ignored", ignoredReason: "filter" },
    ],
    [
      "200 ignored (the route's script)",
      () => json(200, { status: "ignored", reason: "script", route: "ci" }),
      { kind: "ok", answer: "ignored", ignoredReason: "script" },
    ],
    [
      "200 ignored with an odd reason",
      () => json(200, { status: "ignored", reason: "Has\nSpaces" }),
      { kind: "ok", answer: "ignored", ignoredReason: null },
    ],
    [
      "200 delivered",
      () => json(200, { status: "delivered" }),
      { kind: "ok", answer: "delivered", unconfirmed: false },
    ],
    ["200 with an unknown status", () => json(200, { status: "whatever" }), { kind: "ok", answer: null }],
    ["200 not JSON", () => new Response("ok", { status: 200 }), { kind: "ok", answer: null }],
    [
      "401",
      () => json(401, { error: "bad signature" }),
      { kind: "retry", klass: "config", reason: "bad secret", status: 401 },
    ],
    [
      "403",
      () => json(403, { error: "disabled" }),
      { kind: "retry", klass: "config", reason: "route disabled or missing secret", status: 403 },
    ],
    [
      "404",
      () => json(404, { error: "Unknown route: ci" }),
      {
        kind: "retry",
        klass: "config",
        reason: "unknown route or profile",
        status: 404,
        pause: 'the gateway answered 404 for route "ci"',
      },
    ],
    ["413", () => json(413, { error: "too large" }), { kind: "dead", klass: "permanent", status: 413 }],
    [
      "429 with Retry-After",
      () => json(429, { error: "rate limited" }, { "retry-after": "30" }),
      { kind: "retry", klass: "throttle", retryAfterS: 30 },
    ],
    [
      "429 with a Retry-After date",
      () => json(429, {}, { "retry-after": new Date((clock.now() + 120) * 1000).toUTCString() }),
      { kind: "retry", klass: "throttle", retryAfterS: 120 },
    ],
    ["400", () => json(400, { error: "unparseable" }), { kind: "dead", klass: "permanent", status: 400 }],
    [
      "302",
      () => new Response(null, { status: 302, headers: { location: "http://127.0.0.1:1/elsewhere" } }),
      { kind: "retry", klass: "config", status: 302 },
    ],
    ["500", () => json(500, {}), { kind: "retry", klass: "transport", status: 500 }],
    [
      "503 with Retry-After",
      () => json(503, {}, { "retry-after": "45" }),
      { kind: "retry", klass: "throttle", retryAfterS: 45 },
    ],
    ["503 without Retry-After", () => json(503, {}), { kind: "retry", klass: "transport", retryAfterS: null }],
    ["409 (any other 4xx)", () => json(409, {}), { kind: "retry", klass: "config" }],
    ["408", () => json(408, {}), { kind: "retry", klass: "transport" }],
  ];
  for (const [label, answer, want] of cases) {
    test(label, async () => {
      const g = gateway({ ci: { secret: RAW } }, answer);
      const o = await g.dest.deliver(documentFor(events(1)), makeCtx({ clock }));
      expect(o).toMatchObject(want);
    });
  }
});

describe("subscriptions problems are config outcomes, with no request", () => {
  const cases: [string, (subs: string) => void, string][] = [
    ["the file is missing", () => {}, "subscriptions file unreadable"],
    ["the file is not JSON", (p) => writeFileSync(p, "{nope"), "subscriptions file invalid"],
    [
      "the route is not there",
      (p) => writeFileSync(p, JSON.stringify({ other: { secret: RAW } })),
      "unknown hermes route",
    ],
    [
      "the route has no secret",
      (p) => writeFileSync(p, JSON.stringify({ ci: { prompt: "x" } })),
      "hermes route has no secret",
    ],
    [
      "the whsec_ secret is not base64",
      (p) => writeFileSync(p, JSON.stringify({ ci: { secret: "whsec_***" } })),
      "route secret is not valid whsec_ base64",
    ],
  ];
  for (const [label, setup, reason] of cases) {
    test(label, async () => {
      const s = stub();
      const subs = join(tempDir(), "subs.json");
      setup(subs);
      const dest = new HermesDestination({
        name: "hermes:ci",
        route: "ci",
        baseUrl: s.url,
        subscriptionsPath: subs,
        instanceId: "inst1",
      });
      const o = await dest.deliver(documentFor(events(1)), makeCtx());
      expect(o).toMatchObject({ kind: "retry", klass: "config", reason });
      expect(o.detail).not.toContain(RAW);
      expect(s.hits).toHaveLength(0);
      expect(dest.check().length).toBeGreaterThan(0);
    });
  }

  test("~ in subscriptions_path is the dispatcher's HOME", async () => {
    const home = tempDir();
    writeFileSync(join(home, "subs.json"), JSON.stringify({ ci: { secret: RAW } }));
    const s = stub(() => json(200, { status: "delivered" }));
    const dest = new HermesDestination({
      name: "hermes:ci",
      route: "ci",
      baseUrl: s.url,
      subscriptionsPath: "~/subs.json",
      instanceId: "i",
      env: { HOME: home },
    });
    expect((await dest.deliver(documentFor(events(1)), makeCtx())).kind).toBe("ok");
  });
});

describe("hermes check()", () => {
  test("events or coalesce on a route hookspool feeds is a problem, except with unwrap", () => {
    const g = gateway({ ci: { secret: RAW, events: ["push"], coalesce: true } });
    const problems = g.dest.check();
    expect(problems.some((p) => p.includes("sets events"))).toBe(true);
    expect(problems.some((p) => p.includes("sets coalesce"))).toBe(true);
    const u = new HermesDestination({
      name: "hermes:ci",
      route: "ci",
      baseUrl: g.stub.url,
      subscriptionsPath: g.subs,
      instanceId: "i",
      unwrap: true,
    });
    expect(u.check()).toEqual([]);
  });

  test("a clean route has no problems; a reserved event_header is one", () => {
    expect(gateway({ ci: { secret: RAW, events: [], coalesce: false } }).dest.check()).toEqual([]);
    const g = gateway({ ci: { secret: RAW } }, undefined, {
      eventHeader: "webhook-id",
      dedupHeader: "X-Hookspool-Batch",
    });
    expect(g.dest.check()).toHaveLength(2);
  });

  test("defaults: per-attempt, two in flight, 1 MiB", () => {
    const { dest } = gateway({ ci: { secret: RAW } });
    expect({
      idem: dest.idempotency,
      inflight: dest.maxInflight,
      max: dest.maxBodyBytes,
      unwrap: dest.unwrap,
      type: dest.type,
    }).toEqual({
      idem: "per-attempt",
      inflight: 2,
      max: 1048576,
      unwrap: false,
      type: "hermes",
    });
  });
});
