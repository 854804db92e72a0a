// calendly.events: a Calendly webhook subscription (Calendly-Webhook-Signature t=<unix>,v1=<hex
// HMAC-SHA256 of "<t>.<body>">), through a real `hookspool run`, and against an intake on the
// kit's clock for what is Calendly's own: one batch per scheduled event, a reschedule's two
// events, the body's hash as the dedup id across a re-signed retry, and the 300 s window.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHash, createHmac } from "node:crypto";
import type { TestIntake } from "../helpers/intake.ts";
import { bobbinTest, builtin, eventByPayload, kitIntake, kitOf } from "./catalogue.ts";

const bobbin = builtin("calendly.events");
const kit = kitOf(bobbin);
const KEY = kit.secrets.secret;
const NOW = kit.now ?? 0;
const API = "https://api.calendly.com";
const v1 = (key: string, t: number, body: string) => createHmac("sha256", key).update(`${t}.${body}`).digest("hex");

bobbinTest("calendly.events", "a booking is queued and delivered, a bad signature is 401", {
  answers: {
    "captures/accepted.http": 202,
    "captures/rejected.http": { status: 401, body: "" },
  },
});

describe("against an intake on the kit's clock", () => {
  let t: TestIntake;
  beforeAll(async () => {
    t = await kitIntake("calendly.events");
  });
  afterAll(() => t.stop());

  const post = (body: string, ts: number, key = KEY) =>
    t.post("/hooks/calendly", body, {
      "Content-Type": "application/json; charset=utf-8",
      "Calendly-Webhook-Signature": `t=${ts},v1=${v1(key, ts, body)}`,
    });
  const stored = (body: string) =>
    eventByPayload<{ batch: number; key: string; event_type: string; dedup_id: string }>(
      t,
      "b.id AS batch, b.key, e.event_type, e.dedup_id",
      body,
    );
  const inviteeEvent = (event: string, eventUuid: string, guest: string, extra: Record<string, unknown>) =>
    JSON.stringify({
      created_at: "2026-08-22T12:00:00.000000Z",
      created_by: `${API}/users/KITEXAMPLEHOST01`,
      event,
      payload: {
        email: "guest@example.com",
        event: `${API}/scheduled_events/${eventUuid}`,
        name: "Example Guest",
        scheduled_event: {
          uri: `${API}/scheduled_events/${eventUuid}`,
          event_type: `${API}/event_types/KITEXAMPLETYPE01`,
          start_time: "2026-08-25T14:00:00.000000Z",
          status: "active",
        },
        uri: `${API}/scheduled_events/${eventUuid}/invitees/${guest}`,
        ...extra,
      },
    });

  test("a booking is stored under its scheduled event, its type, and the body's SHA-256", async () => {
    const body = inviteeEvent("invitee.created", "KITEXAMPLEEVENT2", "KITEXAMPLEGUEST2", {
      rescheduled: false,
      status: "active",
    });
    const res = await post(body, NOW);
    expect([res.status, await res.text()]).toEqual([202, '{"status":"queued"}']);
    expect(stored(body)).toEqual({
      batch: expect.any(Number),
      key: `${API}/scheduled_events/KITEXAMPLEEVENT2`,
      event_type: "invitee.created",
      dedup_id: createHash("sha256").update(body).digest("hex"),
    });
  });

  test("Calendly's retry of the same body, signed again later, is a duplicate", async () => {
    const body = inviteeEvent("invitee.created", "KITEXAMPLEEVENT3", "KITEXAMPLEGUEST3", {
      rescheduled: false,
      status: "active",
    });
    expect((await post(body, NOW)).status).toBe(202);
    t.clock.set(NOW + 600);
    const retry = await post(body, NOW + 600);
    t.clock.set(NOW);
    expect([retry.status, await retry.text()]).toEqual([200, '{"status":"duplicate"}']);
  });

  test("a reschedule is two batches: the old event's cancellation and the new event's booking", async () => {
    const canceled = inviteeEvent("invitee.canceled", "KITEXAMPLEEVENT4", "KITEXAMPLEGUEST4", {
      rescheduled: true,
      status: "canceled",
      new_invitee: `${API}/scheduled_events/KITEXAMPLEEVENT5/invitees/KITEXAMPLEGUEST5`,
    });
    const created = inviteeEvent("invitee.created", "KITEXAMPLEEVENT5", "KITEXAMPLEGUEST5", {
      rescheduled: false,
      status: "active",
      old_invitee: `${API}/scheduled_events/KITEXAMPLEEVENT4/invitees/KITEXAMPLEGUEST4`,
    });
    for (const body of [canceled, created]) expect((await post(body, NOW)).status).toBe(202);
    expect(stored(canceled)).toMatchObject({
      key: `${API}/scheduled_events/KITEXAMPLEEVENT4`,
      event_type: "invitee.canceled",
    });
    expect(stored(created)).toMatchObject({
      key: `${API}/scheduled_events/KITEXAMPLEEVENT5`,
      event_type: "invitee.created",
    });
    expect(stored(created)?.batch).not.toBe(stored(canceled)?.batch);
  });

  test("a payload without a scheduled event is keyed by its own uri", async () => {
    const body = JSON.stringify({
      created_at: "2026-08-22T12:00:01.000000Z",
      created_by: `${API}/users/KITEXAMPLEHOST01`,
      event: "routing_form_submission.created",
      payload: {
        uri: `${API}/routing_form_submissions/KITEXAMPLEFORM01`,
        routing_form: `${API}/routing_forms/KITEXAMPLEROUTE1`,
        questions_and_responses: [],
        result: { type: "event_type", value: `${API}/event_types/KITEXAMPLETYPE01` },
      },
    });
    expect((await post(body, NOW)).status).toBe(202);
    expect(stored(body)).toMatchObject({
      key: `${API}/routing_form_submissions/KITEXAMPLEFORM01`,
      event_type: "routing_form_submission.created",
    });
  });

  test("the window is 300 s either way: four minutes old passes, five and a second is refused", async () => {
    const a = inviteeEvent("invitee.created", "KITEXAMPLEEVENT6", "KITEXAMPLEGUEST6", { status: "active" });
    const b = inviteeEvent("invitee.created", "KITEXAMPLEEVENT7", "KITEXAMPLEGUEST7", { status: "active" });
    expect((await post(a, NOW - 240)).status).toBe(202);
    const stale = await post(b, NOW - 301);
    expect([stale.status, await stale.text()]).toEqual([401, ""]);
    const other = await post(b, NOW, "kit-test-other-signing-key");
    expect([other.status, await other.text()]).toEqual([401, ""]);
  });
});
