// zoom.meetings: a Zoom app's event subscription (x-zm-signature, v0 HMAC-SHA256 over
// "v0:<x-zm-request-timestamp>:<body>", and the endpoint.url_validation handshake after verify).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHmac } from "node:crypto";
import type { TestIntake } from "../helpers/intake.ts";
import { bobbinTest, builtin, eventsByPayload, kitIntake, kitOf } from "./catalogue.ts";

const bobbin = builtin("zoom.meetings");
const kit = kitOf(bobbin);
const SECRET = kit.secrets.webhook_secret;
const NOW = kit.now ?? 0;
const mac = (key: string, data: string) => createHmac("sha256", key).update(data).digest("hex");

bobbinTest(
  "zoom.meetings",
  "a meeting event is queued and delivered, a bad signature is 401, the URL validation is answered, a " +
    "non-JSON body is quarantined",
  {
    answers: {
      "captures/accepted.http": 202,
      "captures/rejected.http": { status: 401, body: "" },
      "captures/unclassifiable.http": 202,
      "captures/url-validation.http": 200,
    },
    afterwards(results) {
      // The handshake's answer, computed here independently of the plugin API.
      const validation = results.find((r) => r.capture.file === "captures/url-validation.http");
      if (!validation) throw new Error("no url-validation capture");
      const plainToken = (
        JSON.parse(new TextDecoder().decode(validation.capture.request.body)) as { payload: { plainToken: string } }
      ).payload.plainToken;
      expect(JSON.parse(validation.body)).toEqual({ plainToken, encryptedToken: mac(SECRET, plainToken) });
    },
  },
);

describe("against an intake on the kit's clock", () => {
  let t: TestIntake;
  beforeAll(async () => {
    t = await kitIntake("zoom.meetings");
  });
  afterAll(() => t.stop());

  const signed = (body: string, ts: number, key = SECRET) => ({
    "Content-Type": "application/json",
    "x-zm-request-timestamp": String(ts),
    "x-zm-signature": `v0=${mac(key, `v0:${ts}:${body}`)}`,
  });
  const validation = (plainToken: string) =>
    JSON.stringify({ payload: { plainToken }, event_ts: NOW * 1000, event: "endpoint.url_validation" });

  test("a URL validation with a bad signature: 401, an empty body, no token anywhere, nothing stored", async () => {
    const body = validation("kit-plain-token-bad-signature");
    const token = mac(SECRET, "kit-plain-token-bad-signature");
    const good = signed(body, NOW);
    const cases: [string, Record<string, string>][] = [
      ["another secret", signed(body, NOW, "not-the-kit-secret-example")],
      ["no signature", { "Content-Type": "application/json", "x-zm-request-timestamp": String(NOW) }],
      ["no timestamp", { "Content-Type": "application/json", "x-zm-signature": good["x-zm-signature"] }],
      ["the signature of another body", signed(validation("kit-plain-token-other"), NOW)],
      ["stale", signed(body, NOW - 301)],
      ["future-dated", signed(body, NOW + 301)],
      ["the signature without v0=", { ...good, "x-zm-signature": good["x-zm-signature"].slice(3) }],
    ];
    const events = t.count("events");
    for (const [name, headers] of cases) {
      const res = await t.post("/hooks/meetings", body, headers);
      expect([name, res.status, await res.text()]).toEqual([name, 401, ""]);
      for (const [h, v] of res.headers) expect([name, h, v.includes(token)]).toEqual([name, h, false]);
    }
    expect(t.count("events")).toBe(events);
    // The control: the same request, correctly signed, is answered and still not stored.
    const ok = await t.post("/hooks/meetings", body, good);
    expect(ok.status).toBe(200);
    expect(await ok.json()).toEqual({ plainToken: "kit-plain-token-bad-signature", encryptedToken: token });
    expect(t.count("events")).toBe(events);
  });

  test(
    "the key is the meeting id, the dedup id holds event_ts and the meeting id, and a retry is a " + "duplicate",
    async () => {
      const started = JSON.stringify({
        event: "meeting.started",
        payload: {
          account_id: "EXAMPLEacct0000000000B",
          object: {
            id: 81100000077,
            uuid: "EXAMPLEuuid000000000Bw==",
            host_id: "EXAMPLEhost0000000000B",
            topic: "Test",
            type: 1,
          },
        },
        event_ts: NOW * 1000 + 7,
      });
      const first = await t.post("/hooks/meetings", started, signed(started, NOW));
      expect([first.status, await first.text()]).toEqual([202, '{"status":"queued"}']);
      const [row] = eventsByPayload(t, "b.key, e.event_type, e.dedup_id", started);
      expect(row).toEqual({
        key: "81100000077",
        event_type: "meeting.started",
        dedup_id: `${NOW * 1000 + 7}:81100000077:meeting.started`,
      });
      // Zoom's retry, minutes later: the same body under a new timestamp and signature.
      t.clock.set(NOW + 300);
      const retry = await t.post("/hooks/meetings", started, signed(started, NOW + 300));
      t.clock.set(NOW);
      expect([retry.status, await retry.text()]).toEqual([200, '{"status":"duplicate"}']);
      // Two participants joining in the same millisecond are two events.
      const joined = (user: string) =>
        JSON.stringify({
          event: "meeting.participant_joined",
          payload: {
            account_id: "EXAMPLEacct0000000000B",
            object: { id: "81100000077", participant: { user_id: user, user_name: "Example User" } },
          },
          event_ts: NOW * 1000 + 9,
        });
      for (const user of ["16778240", "16779264"]) {
        const res = await t.post("/hooks/meetings", joined(user), signed(joined(user), NOW));
        expect([user, res.status, await res.text()]).toEqual([user, 202, '{"status":"queued"}']);
      }
    },
  );

  test("a verified event without a meeting id, or a validation without a plainToken, is quarantined", async () => {
    const body = JSON.stringify({
      event: "meeting.started",
      payload: { account_id: "EXAMPLEacct0000000000B", object: {} },
      event_ts: NOW * 1000 + 11,
    });
    const res = await t.post("/hooks/meetings", body, signed(body, NOW));
    expect([res.status, await res.text()]).toEqual([202, '{"status":"quarantined"}']);
    const q = t.db.db
      .query(
        "SELECT b.last_error FROM events e JOIN batches b ON b.id = e.batch_id WHERE b.destination = " +
          "'quarantine' ORDER BY e.id DESC LIMIT 1",
      )
      .get() as { last_error: string } | null;
    expect(q?.last_error).toBe("key_missing");
    // A verified validation without a plainToken is not answered with a token of nothing.
    const empty = JSON.stringify({ payload: {}, event_ts: NOW * 1000 + 13, event: "endpoint.url_validation" });
    const res2 = await t.post("/hooks/meetings", empty, signed(empty, NOW));
    expect([res2.status, await res2.text()]).toEqual([202, '{"status":"quarantined"}']);
  });
});
