// Attempts' ends through the dispatcher's outcome transaction: transport failures trip the
// breaker and a probe's success closes it; a 429 with Retry-After and one without gate the
// destination (the second for its throttle window); counted failures exhaust a batch; a refusal
// kills one; a config fault retries at the backoff cap, and a gateway's 404 pauses the
// destination with an issue; an ignored delivery's emits are enqueued. Every backend must
// leave these rows in batches, attempts, destinations, issues, events and the journal.
import { expect, test } from "bun:test";
import type { outcome } from "../../src/delivery.ts";
import type { NewEvent } from "../../src/store/enqueue.ts";
import type { Recorded } from "../../src/store/outcome-plan.ts";
import { attemptWith } from "../helpers/attempts.ts";
import { copy, ev, T0 } from "../helpers/spool.ts";
import type { Row, StoreUnderTest } from "../helpers/store-under-test.ts";
import type { Suite } from "./suite.ts";

const KEYS = ["a", "b", "c", "d", "e", "f"];

/** Rows as the expectations below spell them: the columns every row shares, then each row's own, in `cols` order. */
function table(shared: Row, cols: readonly string[], values: readonly unknown[][]): Row[] {
  return values.map((v) => ({ ...shared, ...Object.fromEntries(cols.map((c, i) => [c, v[i]])) }));
}

/** Issue rows without their ids (each backend numbers them itself: PostgreSQL's upserts use up sequence values). */
const withoutId = (rows: Row[]): Row[] => rows.map(({ id: _, ...r }) => r);

/** The outcome cases, on whatever store fresh() opens. */
export function outcomeCases({ fresh }: Suite): void {
  type S = StoreUnderTest;

  /** Claim batch `id` at `now` and end the attempt a second later with `o`. */
  const attempt = (
    s: S,
    id: number,
    now: number,
    o: Parameters<typeof outcome>[0],
    extra: { probe?: boolean; emits?: NewEvent[]; paced?: boolean } = {},
  ): Promise<Recorded | Error> =>
    attemptWith(s, {
      batchId: id,
      route: "r",
      key: KEYS[id - 1],
      now,
      endAt: now + 1,
      outcome: o,
      probe: extra.probe,
      emits: extra.emits,
      pacing: extra.paced ? { rate: { limit: 5, windowS: 60 }, hits: 1 } : undefined,
      durationMs: 7,
      jitter: 0.5,
    });

  test(
    "the breaker trips and closes, throttles gate, counted failures exhaust, a refusal, config faults " +
      "and a pause, an ignored delivery's emits",
    async () => {
      const s = await fresh();
      for (const [i, key] of KEYS.entries()) {
        const e = ev({ key, payload: `{"k":"${key}"}`, copies: [copy("r", "http:d", { max_events: 1 })] });
        await s.intake.enqueueAll([e], T0 + i);
      }
      const transport = {
        kind: "retry" as const,
        klass: "transport" as const,
        reason: "http 503",
        status: 503,
        detail: "HTTP 503",
      };
      expect(await attempt(s, 1, T0 + 10, transport)).toMatchObject({ applied: true, state: "retry" });
      expect(await attempt(s, 2, T0 + 11, transport)).toMatchObject({ breaker: "opened" });
      expect(await s.dispatch.halfOpenIfCooled("http:d", T0 + 30)).toBe(true);
      expect(await attempt(s, 1, T0 + 31, { kind: "ok", reason: "ok", status: 200 }, { probe: true })).toMatchObject({
        state: "delivered",
        breaker: "closed",
      });
      expect(
        await attempt(s, 3, T0 + 40, {
          kind: "retry",
          klass: "throttle",
          reason: "http 429",
          status: 429,
          retryAfterS: 30,
        }),
      ).toMatchObject({ state: "retry", nextAttemptAt: T0 + 71 });
      // A second throttle, without a hint: the destination is gated for 61 s (it has no rate), the batch due then;
      // its hits none.
      expect(
        await attempt(
          s,
          3,
          T0 + 72,
          { kind: "retry", klass: "throttle", reason: "http 429", status: 429 },
          { paced: true },
        ),
      ).toMatchObject({ state: "retry", nextAttemptAt: T0 + 73 + 61 });
      for (const [k, now] of [
        [0, 50],
        [1, 60],
        [2, 70],
      ] as const) {
        const r = await attempt(s, 2, T0 + now, {
          kind: "retry",
          klass: "batch",
          reason: "http 400",
          status: 400,
          detail: `HTTP 400 #${k}`,
        });
        expect(r).toMatchObject(k < 2 ? { state: "retry" } : { state: "dead", deadReason: "exhausted" });
      }
      expect(
        await attempt(s, 4, T0 + 80, { kind: "dead", klass: "permanent", reason: "http 422", status: 422 }),
      ).toMatchObject({ state: "dead", deadReason: "rejected" });
      expect(
        await attempt(s, 5, T0 + 90, { kind: "retry", klass: "config", reason: "http 401", status: 401 }),
      ).toMatchObject({ state: "retry" });
      // The gate's probe, answered: the 429 gate is lifted.
      expect(
        await attempt(
          s,
          3,
          T0 + 140,
          { kind: "ok", reason: "hermes accepted", status: 202, answer: "accepted" },
          { paced: true },
        ),
      ).toMatchObject({ state: "delivered" });
      // A 404 from the gateway: the destination pauses itself, with an issue.
      expect(
        await attempt(
          s,
          5,
          T0 + 150,
          {
            kind: "retry",
            klass: "config",
            reason: "unknown route or profile",
            status: 404,
            pause: 'the gateway answered 404 for route "d"',
          },
          { paced: true },
        ),
      ).toMatchObject({ state: "retry" });
      const emit = ev({ source: "s", key: "emitted", payload: '{"emitted":1}', copies: [copy("emits", "http:e")] });
      expect(
        await attempt(
          s,
          6,
          T0 + 95,
          { kind: "ok", reason: "hermes ignored", status: 200, answer: "ignored", ignoredReason: "filter" },
          { emits: [emit] },
        ),
      ).toMatchObject({ state: "delivered" });

      // What the steps leave, row by row: batch 1 delivered by the probe (uncounted), batch 2 exhausted after
      // three counted failures, batch 3 delivered once the 429 gate's probe was accepted, batch 4 rejected,
      // batch 5 waiting at the backoff cap on a paused destination, batch 6 ignored (its emit queued in batch 7).
      // floor_at is each batch's first lease (none for the emit's batch 7); no key delivered a version.
      const firstLeases = [T0 + 10, T0 + 11, T0 + 40, T0 + 80, T0 + 90, T0 + 95, null];
      expect(await s.rows("batches", { order: "id" })).toEqual(
        table(
          {
            source: "s",
            quiet_s: 60,
            max_s: 300,
            max_bytes: 786432,
            not_before: null,
            count: 1,
            lease_until: null,
            lease_owner: null,
            stale_floor: null,
          },
          [
            "id",
            "route",
            "destination",
            "key",
            "state",
            "first_at",
            "last_at",
            "max_events",
            "bytes",
            "sealed_at",
            "content_hash",
            "attempts",
            "next_attempt_at",
            "last_error",
            "last_class",
            "delivered_at",
            "result",
            "dead_reason",
          ],
          [
            [
              1,
              "r",
              "http:d",
              "a",
              "delivered",
              T0,
              T0,
              1,
              92,
              T0,
              "sha256:e1ac81c76695bc78481c37a330aa15faf83af6261c71818d32ab7d4c5897c69f",
              0,
              T0 + 12.125,
              null,
              null,
              T0 + 32,
              "ok",
              null,
            ],
            [
              2,
              "r",
              "http:d",
              "b",
              "dead",
              T0 + 1,
              T0 + 1,
              1,
              92,
              T0 + 1,
              "sha256:2ee588d3036df10b30fbd1d4166539b28a5456cc2e11678f7f04e7754a649e4e",
              3,
              null,
              "http 400; 3 counted attempts (max_attempts)",
              "batch",
              null,
              null,
              "exhausted",
            ],
            [
              3,
              "r",
              "http:d",
              "c",
              "delivered",
              T0 + 2,
              T0 + 2,
              1,
              92,
              T0 + 2,
              "sha256:605a9c692ac202860b345610531f1c966d258eb357e4be646852fec5822ccefa",
              1,
              T0 + 134,
              null,
              null,
              T0 + 141,
              "accepted",
              null,
            ],
            [
              4,
              "r",
              "http:d",
              "d",
              "dead",
              T0 + 3,
              T0 + 3,
              1,
              92,
              T0 + 3,
              "sha256:5e95a466661b27b6b3d68c193a13f6724ba844613144f0c43723006bb65090aa",
              0,
              null,
              "http 422",
              "permanent",
              null,
              null,
              "rejected",
            ],
            [
              5,
              "r",
              "http:d",
              "e",
              "retry",
              T0 + 4,
              T0 + 4,
              1,
              92,
              T0 + 4,
              "sha256:67a8afc96f6441b47f22d20b64f4016e1e557b759625d8d8dcc5eb4a001aa21f",
              0,
              T0 + 155,
              "unknown route or profile",
              "config",
              null,
              null,
              null,
            ],
            [
              6,
              "r",
              "http:d",
              "f",
              "delivered",
              T0 + 5,
              T0 + 5,
              1,
              92,
              T0 + 5,
              "sha256:acb83c6ada69ad1bcaf98646c8358ae5f81507ffec549ac95df09c8be4e605b9",
              1,
              null,
              null,
              null,
              T0 + 96,
              "ignored",
              null,
            ],
            [
              7,
              "emits",
              "http:e",
              "emitted",
              "open",
              T0 + 96,
              T0 + 96,
              500,
              96,
              null,
              null,
              0,
              null,
              null,
              null,
              null,
              null,
              null,
            ],
          ],
        ).map((r, i) => ({ ...r, floor_at: firstLeases[i] })),
      );
      // A throttled attempt of a paced destination made no hits; the accepted probe and the 404 made one.
      expect(await s.rows("attempts", { order: "id" })).toEqual(
        table(
          {
            destination: "http:d",
            duration_ms: 7,
            delivery_id: null,
            events_delivered: null,
            failed_event_id: null,
            unconfirmed: 0,
          },
          [
            "id",
            "batch_id",
            "n",
            "started_at",
            "finished_at",
            "outcome",
            "klass",
            "status",
            "error",
            "probe",
            "counted",
            "hits",
            "answer",
          ],
          [
            [1, 1, 1, T0 + 10, T0 + 11, "retry", "transport", 503, "HTTP 503", 0, 0, null, null],
            [2, 2, 1, T0 + 11, T0 + 12, "retry", "transport", 503, "HTTP 503", 0, 0, null, null],
            [3, 1, 2, T0 + 31, T0 + 32, "ok", null, 200, null, 1, 0, null, null],
            [4, 3, 1, T0 + 40, T0 + 41, "retry", "throttle", 429, "http 429", 0, 0, null, null],
            [5, 3, 2, T0 + 72, T0 + 73, "retry", "throttle", 429, "http 429", 0, 0, 0, null],
            [6, 2, 2, T0 + 50, T0 + 51, "retry", "batch", 400, "HTTP 400 #0", 0, 1, null, null],
            [7, 2, 3, T0 + 60, T0 + 61, "retry", "batch", 400, "HTTP 400 #1", 0, 1, null, null],
            [
              8,
              2,
              4,
              T0 + 70,
              T0 + 71,
              "dead",
              "batch",
              400,
              "http 400; 3 counted attempts (max_attempts)",
              0,
              1,
              null,
              null,
            ],
            [9, 4, 1, T0 + 80, T0 + 81, "dead", "permanent", 422, "http 422", 0, 0, null, null],
            [10, 5, 1, T0 + 90, T0 + 91, "retry", "config", 401, "http 401", 0, 0, null, null],
            [11, 3, 3, T0 + 140, T0 + 141, "ok", null, 202, null, 0, 1, 1, "accepted"],
            [12, 5, 2, T0 + 150, T0 + 151, "retry", "config", 404, "unknown route or profile", 0, 0, 1, null],
            [13, 6, 1, T0 + 95, T0 + 96, "ok", null, 200, "hermes ignored", 0, 1, null, "ignored"],
          ],
        ),
      );
      // Paused by the gateway's 404; closed before that (the probe's success), the Retry-After gate kept.
      expect(await s.rows("destinations", { order: "name" })).toEqual(
        table(
          {},
          [
            "name",
            "state",
            "consecutive_failures",
            "opened_at",
            "cooldown_s",
            "probe_until",
            "last_probe_batch_id",
            "paused_at",
            "paused_by",
            "last_ok_at",
            "last_error",
            "retry_after_until",
            "throttled_at",
            "throttle_s",
          ],
          [
            [
              "http:d",
              "paused",
              0,
              null,
              null,
              null,
              1,
              T0 + 151,
              'hookspool (the gateway answered 404 for route "d")',
              T0 + 96,
              null,
              T0 + 134,
              null,
              null,
            ],
          ],
        ),
      );
      // The breaker's and the config issue resolved by later successes; the deaths' and the pause's open.
      expect(withoutId(await s.rows("issues", { order: "fingerprint" }))).toEqual(
        table(
          { destination: "http:d", route: "r", count: 1, alerted_at: null },
          ["fingerprint", "kind", "state", "first_at", "last_at", "sample_batch_id", "last_error"],
          [
            ["config:delivery:http:d", "config", "resolved", T0 + 91, T0 + 141, 5, "http 401"],
            [
              "delivery:http:d:exhausted",
              "delivery",
              "open",
              T0 + 71,
              T0 + 71,
              2,
              "http 400; 3 counted attempts (max_attempts); batch 2 is dead (exhausted): " +
                "hookspool show 2 --attempts, then hookspool replay 2",
            ],
            [
              "delivery:http:d:http_5xx",
              "delivery",
              "resolved",
              T0 + 12,
              T0 + 32,
              2,
              "breaker open after http 503 (batch 2 failed last; " +
                "the next probe after the cooldown carries the oldest batch due)",
            ],
            [
              "delivery:http:d:paused",
              "delivery",
              "open",
              T0 + 151,
              T0 + 151,
              5,
              "paused by hookspool: unknown route or profile; fix it, then hookspool resume http:d",
            ],
            [
              "delivery:http:d:permanent",
              "delivery",
              "open",
              T0 + 81,
              T0 + 81,
              4,
              "http 422; batch 4 is dead (rejected): hookspool show 4 --attempts, then hookspool replay 4",
            ],
          ],
        ),
      );
      expect(await s.rows("events", { order: "id" })).toEqual(
        table(
          {
            source: "s",
            event_type: "t",
            dedup_id: null,
            raw: null,
            raw_is_payload: 0,
            headers: "{}",
            excluded_at: null,
            url: null,
            trace: null,
            version: null,
            body_file: null,
          },
          ["id", "route", "batch_id", "received_at", "payload", "size"],
          [
            [1, "r", 1, T0, '{"k":"a"}', 92],
            [2, "r", 2, T0 + 1, '{"k":"b"}', 92],
            [3, "r", 3, T0 + 2, '{"k":"c"}', 92],
            [4, "r", 4, T0 + 3, '{"k":"d"}', 92],
            [5, "r", 5, T0 + 4, '{"k":"e"}', 92],
            [6, "r", 6, T0 + 5, '{"k":"f"}', 92],
            [7, "emits", 7, T0 + 96, '{"emitted":1}', 96],
          ],
        ),
      );
      expect(await s.rows("journal", { cols: ["kind", "batch_id", "detail"], order: "id" })).toEqual(
        table(
          {},
          ["kind", "batch_id", "detail"],
          [
            ["event", 1, '{"type":"t","route":"r"}'],
            ["sealed", 1, null],
            ["event", 2, '{"type":"t","route":"r"}'],
            ["sealed", 2, null],
            ["event", 3, '{"type":"t","route":"r"}'],
            ["sealed", 3, null],
            ["event", 4, '{"type":"t","route":"r"}'],
            ["sealed", 4, null],
            ["event", 5, '{"type":"t","route":"r"}'],
            ["sealed", 5, null],
            ["event", 6, '{"type":"t","route":"r"}'],
            ["sealed", 6, null],
            ["leased", 1, '{"n":1}'],
            ["retry", 1, '{"class":"transport","status":503,"duration_ms":7,"next_attempt_at":1700000012.125}'],
            ["leased", 2, '{"n":1}'],
            ["retry", 2, '{"class":"transport","status":503,"duration_ms":7,"next_attempt_at":1700000014.25}'],
            ["leased", 1, '{"n":2}'],
            ["delivered", 1, '{"status":200,"duration_ms":7}'],
            ["leased", 3, '{"n":1}'],
            ["retry", 3, '{"class":"throttle","status":429,"duration_ms":7,"next_attempt_at":1700000071}'],
            ["leased", 3, '{"n":2}'],
            ["retry", 3, '{"class":"throttle","status":429,"duration_ms":7,"next_attempt_at":1700000134}'],
            ["leased", 2, '{"n":2}'],
            ["retry", 2, '{"class":"batch","status":400,"duration_ms":7,"next_attempt_at":1700000052.125}'],
            ["leased", 2, '{"n":3}'],
            ["retry", 2, '{"class":"batch","status":400,"duration_ms":7,"next_attempt_at":1700000063.25}'],
            ["leased", 2, '{"n":4}'],
            ["dead", 2, '{"class":"batch","status":400,"duration_ms":7,"reason":"exhausted"}'],
            ["leased", 4, '{"n":1}'],
            ["dead", 4, '{"class":"permanent","status":422,"duration_ms":7,"reason":"rejected"}'],
            ["leased", 5, '{"n":1}'],
            ["retry", 5, '{"class":"config","status":401,"duration_ms":7,"next_attempt_at":1700000095}'],
            ["leased", 3, '{"n":3}'],
            ["delivered", 3, '{"status":202,"answer":"accepted","duration_ms":7}'],
            ["leased", 5, '{"n":2}'],
            ["retry", 5, '{"class":"config","status":404,"duration_ms":7,"next_attempt_at":1700000155}'],
            ["leased", 6, '{"n":1}'],
            ["delivered", 6, '{"status":200,"answer":"ignored","duration_ms":7}'],
            ["event", 7, '{"type":"t","route":"emits"}'],
          ],
        ),
      );
    },
  );
}
