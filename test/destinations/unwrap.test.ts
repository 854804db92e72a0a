// Unwrap on http and hermes: one request per event, stored bytes, per-event ids,
// event/dedup headers, stop at the first failure, resume from the first event.
import { describe, expect, test } from "bun:test";
import { createHmac } from "node:crypto";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { Webhook } from "standardwebhooks";
import { HermesDestination } from "../../src/destinations/hermes.ts";
import { HttpDestination } from "../../src/destinations/http.ts";
import type { Destination } from "../../src/delivery.ts";
import { tempDir } from "../helpers/tmp.ts";
import { documentFor, events, type Hit, json, makeCtx, stub, timed } from "./support.ts";

const SECRET = "unwrap-route-secret";

type Received = (hit: Hit, n: number) => Response | Promise<Response>;

interface Kind {
  label: string;
  make(answer: Received, o?: { maxBodyBytes?: number; rate?: null }): { dest: Destination; hits: Hit[] };
  ok: () => Response;
}

const kinds: Kind[] = [
  {
    label: "http",
    make(answer, o = {}) {
      const s = stub(answer);
      const dest = new HttpDestination({
        name: "gh-relay",
        url: `${s.url}/in`,
        allowInsecure: true,
        secret: { env: "S" },
        env: { S: SECRET },
        unwrap: true,
        eventHeader: "X-GitHub-Event",
        dedupHeader: "X-GitHub-Delivery",
        instanceId: "inst1",
        ...o,
      });
      return { dest, hits: s.hits };
    },
    ok: () => new Response("ok"),
  },
  {
    label: "hermes",
    make(answer, o = {}) {
      const s = stub(answer);
      const subs = join(tempDir(), "subs.json");
      writeFileSync(subs, JSON.stringify({ ci: { secret: SECRET, events: ["push"], coalesce: true } }));
      // No event_header of its own: it falls back to the source's (ctx.eventHeader).
      const dest = new HermesDestination({
        name: "hermes:ci",
        route: "ci",
        baseUrl: s.url,
        subscriptionsPath: subs,
        unwrap: true,
        dedupHeader: "X-GitHub-Delivery",
        instanceId: "inst1",
        ...o,
      });
      return { dest, hits: s.hits };
    },
    ok: () => json(202, { status: "accepted" }),
  },
];

const ctxFor = (evs = events(3), o = {}) =>
  makeCtx({ events: evs, eventHeader: "X-GitHub-Event", deliveryId: "hs_inst1_7", ...o });

for (const k of kinds) {
  describe(`${k.label} unwrap`, () => {
    test("one request per event, in the document's order, each body the stored payload byte for byte", async () => {
      const { dest, hits } = k.make(k.ok);
      expect(dest.idempotency).toBe("per-event");
      const evs = events(3);
      // The document's order: by the events' versions, so not always by id.
      const ordered = [evs[2], evs[0], evs[1]];
      const o = await dest.deliver(documentFor(evs), ctxFor(ordered));
      expect(o).toMatchObject({ kind: "ok", eventsDelivered: 3, failedEventId: null });
      expect(hits.map((h) => h.body)).toEqual(ordered.map((e) => e.payload));
      expect(hits.map((h) => h.headers["webhook-id"])).toEqual(["hs_inst1_7_13", "hs_inst1_7_11", "hs_inst1_7_12"]);
      for (const h of hits) {
        expect(() => new Webhook(SECRET, { format: "raw" }).verify(h.body, h.headers)).not.toThrow();
        expect(h.headers["x-hub-signature-256"]).toBe(
          `sha256=${createHmac("sha256", SECRET).update(h.body).digest("hex")}`,
        );
        expect(h.headers["x-hookspool-batch"]).toBe("7");
      }
      expect(hits.map((h) => h.headers["x-github-event"])).toEqual(ordered.map((e) => e.eventType));
      expect(hits.map((h) => h.headers["x-github-delivery"])).toEqual(["dedup-13", "dedup-11", "dedup-12"]);
      expect(hits.some((h) => h.headers["x-hookspool-stale"] !== undefined)).toBe(false);
    });

    test("an event its route marks stale carries X-Hookspool-Stale: true", async () => {
      const { dest, hits } = k.make(k.ok);
      const evs = events(2);
      evs[0] = { ...evs[0], stale: true };
      expect((await dest.deliver("{}", ctxFor(evs))).kind).toBe("ok");
      expect(hits.map((h) => h.headers["x-hookspool-stale"] ?? "")).toEqual(["true", ""]);
    });

    test("per-event ids are the same on every attempt", async () => {
      const { dest, hits } = k.make(k.ok);
      await dest.deliver("{}", ctxFor(events(2), { attempt: 1, deliveryId: "hs_inst1_7" }));
      await dest.deliver("{}", ctxFor(events(2), { attempt: 2, deliveryId: "hs_inst1_7" }));
      const ids = hits.map((h) => h.headers["webhook-id"]);
      expect(ids.slice(0, 2)).toEqual(ids.slice(2));
      expect(hits.map((h) => h.headers["x-hookspool-attempt"])).toEqual(["1", "1", "2", "2"]);
    });

    test("an event without a dedup id, or an unusable header value, sends no such header", async () => {
      const { dest, hits } = k.make(k.ok);
      const evs = events(2);
      evs[0] = { ...evs[0], dedupId: null };
      evs[1] = { ...evs[1], eventType: "bad\nvalue" };
      expect((await dest.deliver("{}", ctxFor(evs))).kind).toBe("ok");
      expect(hits[0].headers["x-github-delivery"]).toBeUndefined();
      expect(hits[1].headers["x-github-event"]).toBeUndefined();
      expect(hits[1].headers["x-github-delivery"]).toBe("dedup-12");
    });

    test("an event without a type, or an empty dedup id, sends no such header: never an empty one", async () => {
      const { dest, hits } = k.make(k.ok);
      const evs = events(3);
      evs[0] = { ...evs[0], eventType: "" };
      evs[1] = { ...evs[1], eventType: "  ", dedupId: "" };
      expect((await dest.deliver("{}", ctxFor(evs))).kind).toBe("ok");
      expect("x-github-event" in hits[0].headers).toBe(false);
      expect("x-github-event" in hits[1].headers).toBe(false);
      expect("x-github-delivery" in hits[1].headers).toBe(false);
      expect(hits[2].headers["x-github-event"]).toBe("push");
    });

    test("the first failure stops the attempt; the retry starts again at the first event", async () => {
      let failing = true;
      const { dest, hits } = k.make((_, n) => (failing && n === 2 ? json(500, {}) : k.ok()));
      const evs = events(3);
      const o = await dest.deliver("{}", ctxFor(evs));
      expect(o).toMatchObject({
        kind: "retry",
        klass: "transport",
        status: 500,
        eventsDelivered: 1,
        failedEventId: 12,
      });
      expect(o.detail).toContain("event 12 (2 of 3)");
      expect(hits).toHaveLength(2);
      failing = false;
      const again = await dest.deliver("{}", ctxFor(evs, { attempt: 2 }));
      expect(again).toMatchObject({ kind: "ok", eventsDelivered: 3 });
      expect(hits.map((h) => h.headers["webhook-id"])).toEqual([
        "hs_inst1_7_11",
        "hs_inst1_7_12",
        "hs_inst1_7_11",
        "hs_inst1_7_12",
        "hs_inst1_7_13",
      ]);
    });

    test("a failure is classified as a document's would be", async () => {
      const { dest } = k.make((_, n) => (n === 1 ? k.ok() : json(429, {}, { "retry-after": "7" })));
      expect(await dest.deliver("{}", ctxFor())).toMatchObject({
        klass: "throttle",
        retryAfterS: 7,
        eventsDelivered: 1,
        failedEventId: 12,
      });
      const bad = k.make(() => json(400, {}));
      expect(await bad.dest.deliver("{}", ctxFor())).toMatchObject({
        kind: "dead",
        klass: "permanent",
        eventsDelivered: 0,
        failedEventId: 11,
      });
    });

    test("max_body_bytes applies to each event, not the document", async () => {
      const evs = events(3);
      const size = Math.max(...evs.map((e) => Buffer.byteLength(e.payload)));
      const fits = k.make(k.ok, { maxBodyBytes: size });
      expect((await fits.dest.deliver(documentFor(evs), ctxFor(evs))).kind).toBe("ok");
      const big = [...evs];
      big[1] = { ...big[1], payload: `{"pad":"${"x".repeat(size)}"}` };
      const tight = k.make(k.ok, { maxBodyBytes: size });
      expect(await tight.dest.deliver("{}", ctxFor(big))).toMatchObject({
        kind: "dead",
        klass: "permanent",
        reason: "body over max_body_bytes",
        eventsDelivered: 1,
        failedEventId: 12,
        deadReason: "config",
      });
      expect(tight.hits).toHaveLength(1);
    });

    test("all requests share the attempt's one deadline", async () => {
      const { dest, hits } = k.make(async () => {
        await Bun.sleep(300);
        return k.ok();
      });
      const { value: o, ms } = await timed(() => dest.deliver("{}", ctxFor(events(3), { workerInS: 0.5 })));
      expect(o).toMatchObject({ kind: "retry", klass: "transport", eventsDelivered: 1, failedEventId: 12 });
      expect(ms).toBeLessThan(1500);
      expect(hits.length).toBeLessThanOrEqual(2);
    });
  });
}

describe("hermes unwrap answers", () => {
  test("ignored and coalesced are ok; the attempt's word is ignored only when every event was", async () => {
    const mixed = kinds[1].make((_, n) => json(n === 1 ? 200 : 202, { status: n === 1 ? "ignored" : "coalesced" }));
    expect(await mixed.dest.deliver("{}", ctxFor(events(2)))).toMatchObject({
      kind: "ok",
      eventsDelivered: 2,
      answer: "coalesced",
      unconfirmed: false,
    });
    const all = kinds[1].make(() => json(200, { status: "ignored", reason: "filter" }));
    expect(await all.dest.deliver("{}", ctxFor(events(2)))).toMatchObject({
      kind: "ok",
      answer: "ignored",
      ignoredReason: "filter",
    });
    // An unwrap destination sees its route's own filter at work: never an issue for it.
    expect(all.dest.ignoredIssueAfter).toBe(0);
  });

  test(
    "a duplicate is confirmed only for the events an earlier attempt got through, and not when " +
      "that was itself unconfirmed",
    async () => {
      const { dest } = kinds[1].make(() => json(200, { status: "duplicate" }));
      const none = kinds[1].make(() => json(200, { status: "duplicate" }), { rate: null });
      // Not paced (rate none): every event is sent again; the first two got through before.
      expect(
        await none.dest.deliver("{}", ctxFor(events(3), { attempt: 2, resume: { before: 13, unconfirmed: false } })),
      ).toMatchObject({ kind: "ok", answer: "duplicate", unconfirmed: true });
      expect(
        await none.dest.deliver("{}", ctxFor(events(2), { attempt: 2, resume: { before: 13, unconfirmed: false } })),
      ).toMatchObject({ kind: "ok", answer: "duplicate", unconfirmed: false });
      expect(
        await none.dest.deliver("{}", ctxFor(events(2), { attempt: 2, resume: { before: 13, unconfirmed: true } })),
      ).toMatchObject({ unconfirmed: true });
      expect(await dest.deliver("{}", ctxFor(events(3)))).toMatchObject({ unconfirmed: true });
    },
  );

  test(
    "paced: a retry does not send again what an earlier attempt got through, and carries what was " + "said of it",
    async () => {
      const { dest, hits } = kinds[1].make(() => json(202, { status: "accepted" }));
      const o = await dest.deliver("{}", ctxFor(events(3), { attempt: 2, resume: { before: 13, unconfirmed: true } }));
      expect(hits.map((h) => h.headers["webhook-id"])).toEqual(["hs_inst1_7_13"]);
      expect(o).toMatchObject({ kind: "ok", eventsDelivered: 3, sent: 1, answer: "accepted", unconfirmed: true });
    },
  );

  test("a payload that is not a JSON object goes to the gateway wrapped in one; an object goes as it is", async () => {
    const { dest, hits } = kinds[1].make(() => json(202, { status: "accepted" }));
    const evs = [
      { id: 21, eventType: "list", dedupId: null, payload: "[1,2,3]" },
      { id: 22, eventType: "text", dedupId: null, payload: '"just a string"' },
      { id: 23, eventType: "object", dedupId: null, payload: ' {"a":1}' },
    ];
    expect((await dest.deliver("{}", ctxFor(evs))).kind).toBe("ok");
    expect(hits.map((h) => JSON.parse(h.body))).toEqual([
      { event_type: "list", payload: [1, 2, 3] },
      { event_type: "text", payload: "just a string" },
      { a: 1 },
    ]);
    expect(hits[2].body).toBe(' {"a":1}');
    // The wrapped body is what is signed.
    for (const h of hits) expect(() => new Webhook(SECRET, { format: "raw" }).verify(h.body, h.headers)).not.toThrow();
  });

  test("401 on a later event is config, with the progress recorded", async () => {
    const { dest } = kinds[1].make((_, n) => (n === 1 ? json(200, { status: "duplicate" }) : json(401, {})));
    expect(await dest.deliver("{}", ctxFor(events(2)))).toMatchObject({
      klass: "config",
      reason: "bad secret",
      eventsDelivered: 1,
      failedEventId: 12,
    });
  });

  test("check() allows the gateway's events and coalesce for an unwrap route", () => {
    expect(kinds[1].make(() => json(200, {})).dest.check()).toEqual([]);
  });
});
