// intercom.conversations: an Intercom app's webhook notifications (X-Hub-Signature, "sha1=" and the
// hex HMAC-SHA1 of the body under the app's client secret), with the HEAD check and the ping,
// through a real `hookspool run`, and against an intake for what is Intercom's own: one batch per
// conversation, the topic as event type, the notification id as dedup id.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHmac } from "node:crypto";
import type { TestIntake } from "../helpers/intake.ts";
import { bobbinTest, builtin, capturedRequest, eventsByPayload, kitIntake, kitOf } from "./catalogue.ts";

const bobbin = builtin("intercom.conversations");
const kit = kitOf(bobbin);
const SECRET = kit.secrets.secret;
const accepted = capturedRequest(bobbin, "captures/accepted.http");
const ping = capturedRequest(bobbin, "captures/ping.http");
const signed = (body: string) => ({
  ...accepted.headers,
  "X-Hub-Signature": `sha1=${createHmac("sha1", SECRET).update(body).digest("hex")}`,
});

bobbinTest(
  "intercom.conversations",
  "a conversation notification is queued and delivered, the ping is ignored, the HEAD check is 200, a " +
    "bad signature is 401",
  {
    answers: {
      "captures/accepted.http": 202,
      "captures/handshake.http": { method: "HEAD", status: 200, body: "" },
      "captures/ping.http": 200,
      "captures/rejected.http": { status: 401, body: "" },
    },
  },
);

describe("against an intake", () => {
  let t: TestIntake;
  beforeAll(async () => {
    t = await kitIntake("intercom.conversations");
  });
  afterAll(() => t.stop());

  const rowOf = (body: string) =>
    eventsByPayload<{ key: string; event_type: string; dedup_id: string }>(t, "b.key, e.event_type, e.dedup_id", body);
  const batchOf = (body: string) => eventsByPayload<{ batch_id: number }>(t, "e.batch_id", body)[0].batch_id;

  test("the accepted capture is stored under the conversation id, its topic and the notification id", async () => {
    const res = await t.post("/hooks/intercom", accepted.body, accepted.headers);
    expect([res.status, await res.text()]).toEqual([202, '{"status":"queued"}']);
    expect(rowOf(accepted.body)).toEqual([
      {
        key: "215470331234567",
        event_type: "conversation.user.created",
        dedup_id: "notif_3f6c1a2e-9b7d-4c8e-a1f0-5d2b8e7c4a90",
      },
    ]);
  });

  test("Intercom's second attempt at the same notification (delivery_attempts 2) is a duplicate", async () => {
    const second = accepted.body.replace('"delivery_attempts":1', '"delivery_attempts":2');
    const res = await t.post("/hooks/intercom", second, signed(second));
    expect([res.status, await res.text()]).toEqual([200, '{"status":"duplicate"}']);
    expect(rowOf(second)).toEqual([]);
  });

  test("a teammate's reply in the same conversation joins its batch", async () => {
    const reply = accepted.body.replace(
      '"id":"notif_3f6c1a2e-9b7d-4c8e-a1f0-5d2b8e7c4a90","topic":"conversation.user.created"',
      '"id":"notif_9c1e5b3a-2d7f-4e8a-b6c0-3a5d7f9e1b24","topic":"conversation.admin.replied"',
    );
    const res = await t.post("/hooks/intercom", reply, signed(reply));
    expect([res.status, await res.text()]).toEqual([202, '{"status":"queued"}']);
    expect(rowOf(reply)).toEqual([
      {
        key: "215470331234567",
        event_type: "conversation.admin.replied",
        dedup_id: "notif_9c1e5b3a-2d7f-4e8a-b6c0-3a5d7f9e1b24",
      },
    ]);
    expect(batchOf(reply)).toBe(batchOf(accepted.body));
  });

  test("the ping is ignored only when signed; nothing of it is stored", async () => {
    const events = t.count("events");
    const good = await t.post("/hooks/intercom", ping.body, ping.headers);
    expect([good.status, await good.text()]).toEqual([200, '{"status":"ignored"}']);
    const bad = await t.post("/hooks/intercom", ping.body, {
      ...ping.headers,
      "X-Hub-Signature": `sha1=${"0".repeat(40)}`,
    });
    expect([bad.status, await bad.text()]).toEqual([401, ""]);
    const unprefixed = await t.post("/hooks/intercom", ping.body, {
      ...ping.headers,
      "X-Hub-Signature": ping.headers["X-Hub-Signature"].slice(5),
    });
    expect([unprefixed.status, await unprefixed.text()]).toEqual([401, ""]);
    expect(t.count("events")).toBe(events);
  });
});
