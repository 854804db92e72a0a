// calcom.bookings: Cal.com's webhooks (X-Cal-Signature-256, hex HMAC-SHA256 of the body, no
// timestamp), one batch per booking, deduplicated on the body's SHA-256, the Ping test ignored.
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { createHash, createHmac } from "node:crypto";
import { capturesOf } from "../../src/bobbin/captures.ts";
import type { TestIntake } from "../helpers/intake.ts";
import { bobbinTest, builtin, capturedRequest, eventByPayload, kitIntake, kitOf } from "./catalogue.ts";

// Real hookspool processes on a shared 2-core machine: seconds, not the 5 s default.
setDefaultTimeout(30_000);

const bobbin = builtin("calcom.bookings");
const kit = kitOf(bobbin);
const SECRET = kit.secrets.secret;
const sha256 = (s: string) => createHash("sha256").update(s).digest("hex");
/** The headers Cal.com's sendPayload sets, signed with `secret` (Cal.com's own fallback without one). */
const signed = (body: string, secret: string | null = SECRET) => ({
  "Content-Type": "application/json",
  "X-Cal-Signature-256": secret ? createHmac("sha256", secret).update(body).digest("hex") : "no-secret-provided",
  "X-Cal-Webhook-Version": "2021-10-20",
});

bobbinTest(
  "calcom.bookings",
  "a booking is queued and delivered, the Ping test is acked and ignored, a bad signature is 401",
  {
    answers: {
      "captures/accepted.http": 202,
      "captures/ping.http": 200,
      "captures/rejected.http": { status: 401, body: "" },
    },
  },
);

describe("against an intake", () => {
  let t: TestIntake;
  beforeAll(async () => {
    t = await kitIntake("calcom.bookings");
  });
  afterAll(() => t.stop());

  const stored = (body: string) =>
    eventByPayload<{ key: string; event_type: string; dedup_id: string }>(t, "b.key, e.event_type, e.dedup_id", body);
  const post = async (body: string, headers: Record<string, string>) => {
    const res = await t.post("/hooks/calcom", body, headers);
    return [res.status, await res.text()];
  };

  test(
    "the accepted capture: key the booking's uid, event type BOOKING_CREATED, dedup id the body's " +
      "SHA-256; sent again, a duplicate",
    async () => {
      const { body } = capturedRequest(bobbin);
      expect(await post(body, signed(body))).toEqual([202, '{"status":"queued"}']);
      expect(stored(body)).toEqual({
        key: "kTq9ExampleBookingUid01",
        event_type: "BOOKING_CREATED",
        dedup_id: sha256(body),
      });
      expect(await post(body, signed(body))).toEqual([200, '{"status":"duplicate"}']);
    },
  );

  test(
    "every trigger's booking is found where Cal.com puts it; events without one fall back to their " +
      "form, entry or trigger",
    async () => {
      const at = (ms: number) => new Date(Date.UTC(2026, 10, 12, 15, 0, 0, ms)).toISOString();
      const cases: [string, string, Record<string, unknown>][] = [
        [
          "BOOKING_RESCHEDULED",
          "kTq9ExampleBookingUid02",
          {
            triggerEvent: "BOOKING_RESCHEDULED",
            createdAt: at(1),
            payload: {
              uid: "kTq9ExampleBookingUid02",
              rescheduleUid: "kTq9ExampleBookingUid01",
              bookingId: 92,
              status: "ACCEPTED",
            },
          },
        ],
        [
          "BOOKING_NO_SHOW_UPDATED",
          "kTq9ExampleBookingUid02",
          {
            triggerEvent: "BOOKING_NO_SHOW_UPDATED",
            createdAt: at(2),
            payload: {
              message: "guest@example.com marked as no-show",
              attendees: [{ email: "guest@example.com", noShow: true }],
              bookingUid: "kTq9ExampleBookingUid02",
              bookingId: 92,
            },
          },
        ],
        // MEETING_STARTED and MEETING_ENDED carry the booking at the top level, not under payload.
        [
          "MEETING_ENDED",
          "kTq9ExampleBookingUid02",
          {
            triggerEvent: "MEETING_ENDED",
            id: 92,
            uid: "kTq9ExampleBookingUid02",
            idempotencyKey: "00000000-0000-4000-8000-0000000000a2",
            title: "Intro call",
            createdAt: at(3),
            status: "ACCEPTED",
          },
        ],
        [
          "WRONG_ASSIGNMENT_REPORT",
          "kTq9ExampleBookingUid03",
          {
            triggerEvent: "WRONG_ASSIGNMENT_REPORT",
            createdAt: at(4),
            payload: { booking: { uid: "kTq9ExampleBookingUid03", id: 93 }, report: { routingReason: "kit test" } },
          },
        ],
        [
          "FORM_SUBMITTED",
          "0f0e0d0c-0000-4000-8000-00000000f001",
          {
            triggerEvent: "FORM_SUBMITTED",
            createdAt: at(5),
            payload: {
              formId: "0f0e0d0c-0000-4000-8000-00000000f001",
              formName: "Intake",
              teamId: null,
              responses: {},
            },
          },
        ],
        [
          "OOO_CREATED",
          "0a0b0c0d-0000-4000-8000-00000000a001",
          {
            triggerEvent: "OOO_CREATED",
            createdAt: at(6),
            payload: {
              oooEntry: {
                id: 7,
                uuid: "0a0b0c0d-0000-4000-8000-00000000a001",
                start: "2026-12-20T00:00:00+00:00",
                end: "2026-12-27T23:59:59+00:00",
              },
            },
          },
        ],
        [
          "DELEGATION_CREDENTIAL_ERROR",
          "DELEGATION_CREDENTIAL_ERROR",
          {
            triggerEvent: "DELEGATION_CREDENTIAL_ERROR",
            createdAt: at(7),
            payload: {
              error: { type: "CalendarAppDelegationCredentialError", message: "kit test" },
              credential: { id: 100 },
            },
          },
        ],
      ];
      for (const [type, key, doc] of cases) {
        const body = JSON.stringify(doc);
        expect([type, ...(await post(body, signed(body)))]).toEqual([type, 202, '{"status":"queued"}']);
        expect(stored(body)).toEqual({ key, event_type: type, dedup_id: sha256(body) });
      }
    },
  );

  test(
    "refused with 401, nothing stored: a webhook without a secret, another secret, the body " +
      "changed, no header, a sha256= prefix",
    async () => {
      const body = JSON.stringify({
        triggerEvent: "BOOKING_CANCELLED",
        createdAt: "2026-11-12T15:10:00.000Z",
        payload: { uid: "kTq9ExampleBookingUid04", cancellationReason: "kit test", status: "CANCELLED" },
      });
      const good = signed(body);
      const cases: [string, string, Record<string, string>][] = [
        ["no secret in Cal.com", body, signed(body, null)],
        ["another secret", body, signed(body, "not-the-kit-secret-calcom")],
        ["the body changed", body.replace('CANCELLED"}', 'ACCEPTED"}'), good],
        ["no X-Cal-Signature-256", body, { "Content-Type": "application/json" }],
        ["a sha256= prefix", body, { ...good, "X-Cal-Signature-256": `sha256=${good["X-Cal-Signature-256"]}` }],
      ];
      const events = t.count("events");
      for (const [name, b, h] of cases) expect([name, ...(await post(b, h))]).toEqual([name, 401, ""]);
      expect(t.count("events")).toBe(events);
    },
  );

  test("a ping is acked without being stored only when it is signed", async () => {
    const ping = capturesOf(bobbin.files()).find((c) => c.file === "captures/ping.http");
    if (!ping) throw new Error("no ping capture");
    const body = new TextDecoder().decode(ping.request.body);
    const events = t.count("events");
    expect(await post(body, signed(body))).toEqual([200, '{"status":"ignored"}']);
    expect(await post(body, signed(body, "not-the-kit-secret-calcom"))).toEqual([401, ""]);
    expect(t.count("events")).toBe(events);
  });
});
