// The outcome classes through the dispatcher, on both backends: counted vs uncounted for every
// class, max_attempts, bad emits, config retries made due by a reload, emits and notices.
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { utimesSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { outcome } from "../../src/delivery.ts";
import { batchIdOf, fakeDestination, ok, rigOn } from "../helpers/dispatch.ts";
import { onBothWorlds } from "../helpers/world.ts";

setDefaultTimeout(30_000);

const BASE = `[sources.s]\naction = "hermes:a"\n\n[sources.out]\naction = "hermes:b"\n`;

onBothWorlds((open) => {
  describe("classes", () => {
    const cases = [
      { name: "ok", o: ok(), state: "delivered", counted: 1, attempts: 1, klass: null },
      {
        name: "transport",
        o: outcome({ kind: "retry", klass: "transport", reason: "connection refused" }),
        state: "retry",
        counted: 0,
        attempts: 0,
        klass: "transport",
      },
      {
        name: "throttle",
        o: outcome({ kind: "retry", klass: "throttle", reason: "http 429", status: 429 }),
        state: "retry",
        counted: 0,
        attempts: 0,
        klass: "throttle",
      },
      {
        name: "batch",
        o: outcome({ kind: "retry", klass: "batch", reason: "exit 3", status: 3 }),
        state: "retry",
        counted: 1,
        attempts: 1,
        klass: "batch",
      },
      {
        name: "config",
        o: outcome({ kind: "retry", klass: "config", reason: "bad secret", status: 401 }),
        state: "retry",
        counted: 0,
        attempts: 0,
        klass: "config",
      },
      {
        name: "permanent",
        o: outcome({ kind: "dead", klass: "permanent", reason: "http 422", status: 422 }),
        state: "dead",
        counted: 0,
        attempts: 0,
        klass: "permanent",
        deadReason: "rejected",
      },
      // A destination that knows the batch can never meet its bound: the pipeline's fault, not the receiver's.
      {
        name: "permanent (our bound)",
        o: outcome({ kind: "dead", klass: "permanent", reason: "body over max_body_bytes", deadReason: "config" }),
        state: "dead",
        counted: 0,
        attempts: 0,
        klass: "permanent",
        deadReason: "config",
      },
      {
        name: "permanent (a processor)",
        o: outcome({
          kind: "dead",
          klass: "permanent",
          reason: "exit 65",
          status: 65,
          deadReason: "processor_permanent",
        }),
        state: "dead",
        counted: 0,
        attempts: 0,
        klass: "permanent",
        deadReason: "processor_permanent",
      },
    ] as const;
    for (const c of cases) {
      test(`${c.name}: batch ${c.state}, counted ${c.counted}`, async () => {
        const a = fakeDestination("hermes:a");
        a.answer = () => c.o;
        const r = await rigOn(open, BASE, [a]);
        const id = batchIdOf(await r.put("A", "hermes:a"));
        await r.step();
        expect(await r.batch(id)).toMatchObject({
          state: c.state,
          attempts: c.attempts,
          dead_reason: "deadReason" in c ? c.deadReason : null,
        });
        if (c.state !== "delivered") expect((await r.batch(id)).last_class).toBe(c.klass);
        expect((await r.attempts(id))[0]).toMatchObject({ counted: c.counted, klass: c.klass });
      });
    }

    test(
      "a 429 without a usable hint gates the destination for 61 s;" +
        " a probe throttled again doubles the gate, up to the backoff cap",
      async () => {
        const a = fakeDestination("hermes:a");
        // What a destination hands over for "Retry-After: 0" is no hint; a 0 that slips through is none either.
        const hints = [null, 0, null, 0];
        a.answer = () =>
          outcome({
            kind: "retry",
            klass: "throttle",
            reason: "http 429",
            status: 429,
            retryAfterS: hints.shift() ?? null,
          });
        const r = await rigOn(open, BASE, [a]);
        const id = batchIdOf(await r.put("A", "hermes:a"));
        const delays: number[] = [];
        for (let i = 0; i < 4; i++) {
          const before = r.clock.now();
          await r.step();
          const next = (await r.batch(id)).next_attempt_at as number;
          delays.push(next - before);
          // The batch is due when the gate ends, and the gate is the destination's.
          expect(await r.dest("hermes:a")).toMatchObject({
            throttled_at: before,
            retry_after_until: next,
            throttle_s: next - before,
          });
          r.clock.set(next);
        }
        expect(a.calls).toHaveLength(4);
        expect(delays).toEqual([61, 122, 244, 300]);
        // The probe that is answered lifts the gate.
        a.answer = () => ok();
        await r.step();
        expect((await r.batch(id)).state).toBe("delivered");
        expect(await r.dest("hermes:a")).toMatchObject({ throttled_at: null, throttle_s: null });
      },
    );

    test("config retries wait for the backoff cap; a successful reload makes them due at once", async () => {
      const a = fakeDestination("hermes:a");
      a.answer = () => outcome({ kind: "retry", klass: "config", reason: "unknown route", status: 404 });
      const r = await rigOn(open, BASE, [a]);
      const id = batchIdOf(await r.put("A", "hermes:a"));
      await r.step();
      const next = (await r.batch(id)).next_attempt_at as number;
      expect(next).toBeGreaterThanOrEqual(r.t0 + 300);
      expect(await r.world.rows.get("SELECT state FROM issues WHERE fingerprint = 'config:delivery:hermes:a'")).toEqual(
        {
          state: "open",
        },
      );
      a.answer = () => ok();
      r.clock.advance(5);
      await r.step();
      expect(a.calls.length).toBe(1);
      const file = join(r.home, "config.toml");
      writeFileSync(file, `${BASE}\n# fixed\n`);
      utimesSync(file, r.t0 + 10, r.t0 + 10);
      await r.step();
      expect((await r.batch(id)).state).toBe("delivered");
      expect(await r.world.rows.get("SELECT state FROM issues WHERE fingerprint = 'config:delivery:hermes:a'")).toEqual(
        {
          state: "resolved",
        },
      );
    });

    test("a bad config reload keeps the previous config and opens config:file", async () => {
      const a = fakeDestination("hermes:a");
      const r = await rigOn(open, BASE, [a]);
      const file = join(r.home, "config.toml");
      writeFileSync(file, "[dispatch]\nparallel = 'many'\n");
      utimesSync(file, r.t0 + 10, r.t0 + 10);
      await r.put("A", "hermes:a");
      await r.step();
      expect(a.calls.length).toBe(1);
      expect(await r.world.rows.get("SELECT state FROM issues WHERE fingerprint = 'config:file'")).toEqual({
        state: "open",
      });
    });

    test(
      "max_attempts counted failures make the batch dead (exhausted)," + " with the replay command in the issue",
      async () => {
        const a = fakeDestination("hermes:a", { type: "script" });
        a.answer = () => outcome({ kind: "retry", klass: "batch", reason: "exit 3", status: 3 });
        const r = await rigOn(open, `${BASE}[dispatch]\nmax_attempts = 4\n`, [a]);
        const id = batchIdOf(await r.put("A", "hermes:a"));
        for (let i = 0; i < 6 && (await r.batch(id)).state !== "dead"; i++) {
          const next = (await r.batch(id)).next_attempt_at as number | null;
          if (next) r.clock.set(next);
          await r.step();
        }
        expect(await r.batch(id)).toMatchObject({
          state: "dead",
          attempts: 4,
          last_class: "batch",
          dead_reason: "exhausted",
        });
        expect(a.calls.length).toBe(4);
        expect(
          await r.world.rows.get("SELECT state FROM issues WHERE fingerprint = 'delivery:hermes:a:script_exit'"),
        ).toEqual({ state: "open" });
        const exhausted = (await r.world.rows.get(
          "SELECT last_error FROM issues" + " WHERE fingerprint = 'delivery:hermes:a:exhausted'",
        )) as { last_error: string };
        expect(exhausted.last_error).toContain(`hookspool replay ${id}`);
      },
    );

    test(
      "emits are enqueued with the delivered mark;" + " a bad emit fails the attempt, twice makes it permanent",
      async () => {
        const a = fakeDestination("hermes:a", { type: "script" });
        const b = fakeDestination("hermes:b");
        a.answer = () =>
          outcome({
            kind: "ok",
            reason: "exit 0",
            status: 0,
            emits: [{ source: "out", key: "k2", event_type: "note", payload: { hello: 1 } }],
          });
        const r = await rigOn(open, BASE, [a, b]);
        const id = batchIdOf(await r.put("A", "hermes:a"));
        await r.step();
        expect((await r.batch(id)).state).toBe("delivered");
        const emitted = await r.world.rows.all(
          "SELECT e.source, e.event_type, e.payload, b.destination FROM events e" +
            " JOIN batches b ON b.id = e.batch_id WHERE e.source = 'out'",
        );
        expect(emitted).toEqual([
          { source: "out", event_type: "note", payload: '{"hello":1}', destination: "hermes:b" },
        ]);

        a.answer = () =>
          outcome({ kind: "ok", reason: "exit 0", status: 0, emits: [{ source: "nowhere", key: "k", payload: {} }] });
        const bad = batchIdOf(await r.put("B", "hermes:a"));
        await r.step();
        expect(await r.batch(bad)).toMatchObject({ state: "retry", last_class: "batch", attempts: 1 });
        expect(await r.world.rows.get("SELECT COUNT(*) AS n FROM events WHERE source = 'nowhere'")).toEqual({ n: 0 });
        r.clock.set((await r.batch(bad)).next_attempt_at as number);
        await r.step();
        expect(await r.batch(bad)).toMatchObject({ state: "dead", last_class: "permanent", dead_reason: "bad_emit" });
      },
    );

    test(
      "an ignored answer is delivered with result ignored; an issue opens only after" +
        " ignored_issue_after in a row, and the next other answer resolves it",
      async () => {
        const a = fakeDestination("hermes:a", { ignoredIssueAfter: 3 });
        a.answer = () =>
          outcome({ kind: "ok", reason: "hermes ignored", status: 200, answer: "ignored", ignoredReason: "filter" });
        const r = await rigOn(open, BASE, [a]);
        const issue = async () =>
          (await r.world.rows.get(
            "SELECT state, count, last_error FROM issues" + " WHERE fingerprint = 'delivery:hermes:a:ignored'",
          )) as { state: string; count: number; last_error: string } | null;
        const ids: number[] = [];
        for (const key of ["A", "B"]) {
          ids.push(batchIdOf(await r.put(key, "hermes:a")));
          await r.step();
          expect(await issue()).toBeNull();
        }
        ids.push(batchIdOf(await r.put("C", "hermes:a")));
        await r.step();
        expect(await issue()).toMatchObject({ state: "open" });
        expect((await issue())?.last_error).toContain("ignored the last 3 deliveries (its filter)");
        for (const id of ids) expect(await r.batch(id)).toMatchObject({ state: "delivered", result: "ignored" });
        expect((await r.attempts(ids[0]))[0]).toMatchObject({ answer: "ignored", outcome: "ok" });
        a.answer = () => outcome({ kind: "ok", reason: "hermes accepted", status: 202, answer: "accepted" });
        const accepted = batchIdOf(await r.put("D", "hermes:a"));
        await r.step();
        expect(await r.batch(accepted)).toMatchObject({ state: "delivered", result: "accepted" });
        expect(await issue()).toMatchObject({ state: "resolved" });
      },
    );

    test("an unconfirmed duplicate is delivered, its result and attempt say unconfirmed", async () => {
      const a = fakeDestination("hermes:a");
      a.answer = () =>
        outcome({ kind: "ok", reason: "hermes duplicate", status: 200, answer: "duplicate", unconfirmed: true });
      const r = await rigOn(open, BASE, [a]);
      const id = batchIdOf(await r.put("A", "hermes:a"));
      await r.step();
      expect(await r.batch(id)).toMatchObject({ state: "delivered", result: "unconfirmed" });
      expect((await r.attempts(id))[0]).toMatchObject({ answer: "duplicate", unconfirmed: 1 });
      const journal = (await r.world.rows.get(
        "SELECT detail FROM journal WHERE kind = 'delivered' AND batch_id = ?",
        id,
      )) as { detail: string };
      expect(JSON.parse(journal.detail)).toMatchObject({ answer: "duplicate", unconfirmed: true });
    });

    test("an unknown destination is a config retry, never a loss", async () => {
      const r = await rigOn(open, BASE, []);
      const id = batchIdOf(await r.put("A", "hermes:ghost"));
      await r.step();
      expect(await r.batch(id)).toMatchObject({
        state: "retry",
        last_class: "config",
        last_error: "no destination named hermes:ghost in the config",
      });
    });

    test("the document: source, route, key, ids, counts, types, summary, hash, events and meta", async () => {
      const a = fakeDestination("hermes:a");
      const r = await rigOn(open, BASE, [a]);
      await r.put("A", "hermes:a", {
        payload: '{"big": 12345678901234567890}',
        eventType: "push",
        dedupId: "d1",
        headers: { "X-GitHub-Event": "push" },
        window: { quiet_s: 10, max_s: 10 },
      });
      await r.put("A", "hermes:a", { payload: '{"n":2}', eventType: "ping", window: { quiet_s: 10, max_s: 10 } });
      r.clock.advance(10);
      await r.step();
      const body = a.calls[0].body;
      expect(body).toContain('"events":[{"big": 12345678901234567890},{"n":2}]');
      const doc = JSON.parse(body);
      expect(doc).toMatchObject({
        source: "s",
        route: "r:hermes:a",
        key: "A",
        batch_id: 1,
        delivery_id: a.calls[0].deliveryId,
        attempt: 1,
        count: 2,
        first_at: r.t0,
        last_at: r.t0,
        event_type: "ping",
        event_types: { push: 1, ping: 1 },
        summary: "2 s event(s) for A (ping x1, push x1)",
      });
      expect(doc.content_hash).toBe((await r.batch(1)).content_hash);
      // keep_headers reach the receiver in event_meta; an event that kept none has no headers key.
      expect(doc.event_meta).toEqual([
        { id: 1, event_type: "push", received_at: r.t0, dedup_id: "d1", headers: { "X-GitHub-Event": "push" } },
        { id: 2, event_type: "ping", received_at: r.t0, dedup_id: null },
      ]);
      expect(Object.keys(doc)).toEqual([
        "source",
        "route",
        "key",
        "batch_id",
        "delivery_id",
        "attempt",
        "count",
        "first_at",
        "last_at",
        "event_type",
        "event_types",
        "summary",
        "content_hash",
        "events",
        "event_meta",
      ]);
    });
  });

  describe("delivery ids", () => {
    test("per batch for http and script (identical on every attempt), per attempt for hermes", async () => {
      const h = fakeDestination("hermes:a", { idempotency: "per-attempt" });
      const s = fakeDestination("hermes:b", { idempotency: "per-batch" });
      for (const d of [h, s])
        d.answer = (call) =>
          call.attempt === 1 ? outcome({ kind: "retry", klass: "transport", reason: "refused" }) : ok();
      const r = await rigOn(open, BASE, [h, s]);
      const x = batchIdOf(await r.put("X", "hermes:a"));
      const y = batchIdOf(await r.put("Y", "hermes:b"));
      await r.step();
      r.clock.set(Math.max((await r.batch(x)).next_attempt_at as number, (await r.batch(y)).next_attempt_at as number));
      await r.step();
      const inst = ((await r.world.rows.get("SELECT value FROM meta WHERE key = 'instance_id'")) as { value: string })
        .value;
      expect(s.calls.map((c) => c.deliveryId)).toEqual([`hs_${inst}_${y}`, `hs_${inst}_${y}`]);
      const [a1, a2] = h.calls.map((c) => c.deliveryId);
      expect(a1).toMatch(new RegExp(`^hs_${inst}_${x}_\\d+$`));
      expect(a2).not.toBe(a1);
      // the attempt rows record the id that was sent
      expect((await r.attempts(x)).map((a) => a.delivery_id)).toEqual([a1, a2]);
    });
  });
});
