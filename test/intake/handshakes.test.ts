// The template's handshakes and answers through a real intake: a signed challenge echoed (Slack),
// a GET verify token (Meta), a constant reply (Discord's PING), an ack body for queued requests
// (Twilio), and a request split into one event per element (SendGrid). A handshake is never
// queued, and a bad signature or token gets an empty refusal that echoes nothing. On both backends.
import { afterEach, beforeEach, describe, expect, setDefaultTimeout, test } from "bun:test";
import { createHmac } from "node:crypto";
import { startIntakeOn, type WorldIntake } from "../helpers/intake-world.ts";
import { onBothWorlds, type OpenWorld } from "../helpers/world.ts";

setDefaultTimeout(30_000);

let running: WorldIntake | null = null;
afterEach(async () => {
  await running?.stop();
  running = null;
});
/** Where the running intake's clock started (T0 on SQLite, a day ahead on PostgreSQL): what signatures stamp. */
let T0 = 0;
let openWorld: OpenWorld | null = null;
async function intake(config: string, secrets: Record<string, string>): Promise<WorldIntake> {
  if (!openWorld) throw new Error("no world to open");
  running = await startIntakeOn(openWorld, config, { secrets });
  T0 = running.world.t0;
  return running;
}
const hex = (key: string, data: string) => createHmac("sha256", key).update(data).digest("hex");

onBothWorlds((open) => {
  beforeEach(() => {
    openWorld = open;
  });

  describe("echo: Slack's url_verification", () => {
    const CONFIG = `[sources.slack]
${
  'template = { scheme = "hmac", header = "X-Slack-Signature", prefix = "v0=", ' +
  'timestamp_header = "X-Slack-Request-Timestamp", message = "v0:{ts}:{body}", ' +
  'key = "team_id", dedup = "event_id", event_type = "event.type", ' +
  'echo_when = "type=url_verification", echo_field = "challenge" }'
}
secrets.secret = { file = "{{secret:slack}}" }
action = "hermes:slack"
`;
    const challenge = JSON.stringify({
      token: "Jhj5dZrVaK7ZwHHjRyZWjbDl",
      challenge: "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P",
      type: "url_verification",
    });
    const signed = (body: string, secret = "slack-signing-test") => ({
      "X-Slack-Signature": `v0=${hex(secret, `v0:${T0}:${body}`)}`,
      "X-Slack-Request-Timestamp": String(T0),
      "Content-Type": "application/json",
    });
    test("a signed challenge is answered with its value as text and never queued", async () => {
      const s = await intake(CONFIG, { slack: "slack-signing-test" });
      const r = await s.post("/hooks/slack", challenge, signed(challenge));
      expect(r.status).toBe(200);
      expect(r.headers.get("content-type")).toContain("text/plain");
      expect(await r.text()).toBe("3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P");
      expect(await s.count("events")).toBe(0);
    });
    test("a challenge under a bad signature is 401 with an empty body: the challenge is not echoed", async () => {
      const s = await intake(CONFIG, { slack: "slack-signing-test" });
      const r = await s.post("/hooks/slack", challenge, signed(challenge, "not-the-secret"));
      expect(r.status).toBe(401);
      expect(await r.text()).toBe("");
      expect(await s.count("events")).toBe(0);
    });
    test("an event callback is queued as usual", async () => {
      const s = await intake(CONFIG, { slack: "slack-signing-test" });
      const body = JSON.stringify({
        type: "event_callback",
        team_id: "T1",
        event_id: "Ev1",
        event: { type: "app_mention", channel: "C1" },
      });
      const r = await s.post("/hooks/slack", body, signed(body));
      expect(r.status).toBe(202);
      expect(await s.world.rows.all("SELECT event_type, dedup_id FROM events")).toEqual([
        { event_type: "app_mention", dedup_id: "Ev1" },
      ]);
    });
  });

  describe("get_verify: Meta's GET verify token", () => {
    const CONFIG = `[sources.wa]
${
  'template = { scheme = "hmac-sha256-hex", header = "X-Hub-Signature-256", ' +
  'prefix = "sha256=", key = "entry.0.id", get_verify = true }'
}
secrets.secret = { file = "{{secret:wa}}" }
secrets.verify_token = { file = "{{secret:wa-token}}" }
action = "hermes:wa"
`;
    const get = (s: WorldIntake, q: string) => fetch(`${s.url}/hooks/wa?${q}`);
    test("the right token gets the challenge back, as text", async () => {
      const s = await intake(CONFIG, { wa: "app-secret-test", "wa-token": "verify-token-test" });
      const r = await get(s, "hub.mode=subscribe&hub.verify_token=verify-token-test&hub.challenge=1158201444");
      expect(r.status).toBe(200);
      expect(await r.text()).toBe("1158201444");
      expect(await s.count("events")).toBe(0);
    });
    test("a wrong token, a missing one, or another mode: 403 and nothing echoed", async () => {
      const s = await intake(CONFIG, { wa: "app-secret-test", "wa-token": "verify-token-test" });
      for (const q of [
        "hub.mode=subscribe&hub.verify_token=guess&hub.challenge=1158201444",
        "hub.mode=subscribe&hub.challenge=1158201444",
        "hub.mode=unsubscribe&hub.verify_token=verify-token-test&hub.challenge=1158201444",
      ]) {
        const r = await get(s, q);
        expect({ q, status: r.status, body: await r.text() }).toEqual({ q, status: 403, body: "" });
      }
      // Each refusal is counted as a failed verification, and the token is in no metric or line.
      const metrics = await (await fetch(`${s.url}/metrics`)).text();
      expect(metrics).toContain('hookspool_requests_rejected_total{source="wa",reason="unverified"} 3');
      expect(metrics).not.toContain("guess");
    });
    test("a source without it still answers GET with 405", async () => {
      const s = await intake(
        CONFIG.replace(", get_verify = true", "").replace(
          'secrets.verify_token = { file = "{{secret:wa-token}}" }\n',
          "",
        ),
        { wa: "app-secret-test" },
      );
      expect((await get(s, "hub.mode=subscribe&hub.verify_token=x&hub.challenge=1")).status).toBe(405);
    });
  });

  describe("reply and ack", () => {
    test("Discord's PING gets its constant reply; a command gets the ack; a bad signature 401", async () => {
      const { generateKeyPairSync, sign } = await import("node:crypto");
      const pair = generateKeyPairSync("ed25519");
      const pub = pair.publicKey.export({ format: "der", type: "spki" }).subarray(12).toString("hex");
      const s = await intake(
        `[sources.discord]
${
  'template = { scheme = "ed25519", header = "X-Signature-Ed25519", ' +
  'timestamp_header = "X-Signature-Timestamp", key = "channel_id|guild_id|const:dm", ' +
  'dedup = "id", event_type = "data.name|type", reply_when = "type=1", reply = \'{"type":1}\', ' +
  "ack = '{\"type\":5}' }"
}
secrets.secret = { file = "{{secret:discord}}" }
action = "hermes:discord"
`,
        { discord: pub },
      );
      const send = (body: string, key = pair.privateKey) =>
        s.post("/hooks/discord", body, {
          "X-Signature-Ed25519": sign(null, Buffer.from(`${T0}${body}`), key).toString("hex"),
          "X-Signature-Timestamp": String(T0),
          "Content-Type": "application/json",
        });
      const ping = await send('{"type":1,"id":"p1"}');
      expect([ping.status, ping.headers.get("content-type"), await ping.text()]).toEqual([
        200,
        "application/json",
        '{"type":1}',
      ]);
      const cmd = await send('{"type":2,"id":"i1","channel_id":"C9","data":{"name":"ask"}}');
      expect([cmd.status, await cmd.text(), cmd.headers.get("x-hookspool-status")]).toEqual([
        200,
        '{"type":5}',
        "queued",
      ]);
      const again = await send('{"type":2,"id":"i1","channel_id":"C9","data":{"name":"ask"}}');
      expect([again.status, await again.text(), again.headers.get("x-hookspool-status")]).toEqual([
        200,
        '{"type":5}',
        "duplicate",
      ]);
      // The PING's reply is a handshake, not a queued request: no word.
      expect(ping.headers.get("x-hookspool-status")).toBeNull();
      const forged = await send('{"type":1,"id":"p2"}', generateKeyPairSync("ed25519").privateKey);
      expect([forged.status, await forged.text()]).toEqual([401, ""]);
      expect(
        await s.world.rows.all("SELECT key, event_type, dedup_id FROM events e JOIN batches b ON b.id = e.batch_id"),
      ).toEqual([{ key: "C9", event_type: "ask", dedup_id: "i1" }]);
    });

    test("Twilio: a form body, queued as an object, answered with empty TwiML", async () => {
      const s = await intake(
        `[sources.sms]
${
  'template = { scheme = "hmac", header = "X-Twilio-Signature", algorithm = "sha1", ' +
  'encoding = "base64", public_url = "https://hooks.example.com/sms", ' +
  'message = "{url}{params}", body = "form", key = "From", dedup = "MessageSid", ' +
  'event_type = "const:sms", ack = "<Response/>", ack_type = "text/xml" }'
}
secrets.secret = { file = "{{secret:sms}}" }
action = "hermes:sms"
`,
        { sms: "twilio-auth-token-test" },
      );
      const body = "MessageSid=SM0001&From=%2B15550001111&To=%2B15550002222&Body=hello+there";
      const params = [...new URLSearchParams(body)]
        .sort(([a], [b]) => (a < b ? -1 : 1))
        .map(([k, v]) => k + v)
        .join("");
      const sig = createHmac("sha1", "twilio-auth-token-test")
        .update(`https://hooks.example.com/sms${params}`)
        .digest("base64");
      const r = await s.post("/hooks/sms", body, {
        "X-Twilio-Signature": sig,
        "Content-Type": "application/x-www-form-urlencoded",
      });
      expect([r.status, r.headers.get("content-type"), await r.text()]).toEqual([200, "text/xml", "<Response/>"]);
      const row = (await s.world.rows.get("SELECT payload, dedup_id FROM events")) as {
        payload: string;
        dedup_id: string;
      };
      expect(JSON.parse(row.payload)).toEqual({
        MessageSid: "SM0001",
        From: "+15550001111",
        To: "+15550002222",
        Body: "hello there",
      });
      expect(row.dedup_id).toBe("SM0001");
    });
  });

  describe("split: one event per element", () => {
    const CONFIG = `[sources.sg]
${
  'template = { scheme = "static-token", header = "X-Token", key = "sg_message_id", ' +
  'dedup = "sg_event_id", event_type = "event", split = "*" }'
}
secrets.secret = { file = "{{secret:sg}}" }
action = "hermes:sg"
`;
    const events = (ids: string[]) =>
      JSON.stringify(
        ids.map((id, i) => ({ sg_event_id: id, sg_message_id: `m${i % 2}`, event: i ? "delivered" : "processed" })),
      );
    const rows = async (s: WorldIntake) =>
      await s.world.rows.all(
        "SELECT e.dedup_id, e.event_type, b.key," +
          " CASE WHEN e.raw IS NOT NULL AND length(e.raw) > 0 THEN 1 ELSE 0 END AS has_raw" +
          " FROM events e JOIN batches b ON b.id = e.batch_id ORDER BY e.id",
      );
    test(
      "each element is its own event, with its own key, type and dedup id;" + " the raw body is kept once",
      async () => {
        const s = await intake(CONFIG, { sg: "sg-token-test" });
        const r = await s.post("/hooks/sg", events(["e1", "e2", "e3"]), { "X-Token": "sg-token-test" });
        expect(r.status).toBe(202);
        expect(await rows(s)).toEqual([
          { dedup_id: "e1", event_type: "processed", key: "m0", has_raw: 1 },
          { dedup_id: "e2", event_type: "delivered", key: "m1", has_raw: 0 },
          { dedup_id: "e3", event_type: "delivered", key: "m0", has_raw: 0 },
        ]);
      },
    );
    test("each element is deduplicated on its own id: a resend queues only what is new", async () => {
      const s = await intake(CONFIG, { sg: "sg-token-test" });
      expect((await s.post("/hooks/sg", events(["e1", "e2"]), { "X-Token": "sg-token-test" })).status).toBe(202);
      const again = await s.post("/hooks/sg", events(["e1", "e2"]), { "X-Token": "sg-token-test" });
      expect([again.status, await again.json()]).toEqual([200, { status: "duplicate" }]);
      expect((await s.post("/hooks/sg", events(["e2", "e9"]), { "X-Token": "sg-token-test" })).status).toBe(202);
      expect(((await rows(s)) as { dedup_id: string }[]).map((x) => x.dedup_id)).toEqual(["e1", "e2", "e9"]);
    });
    test("one element that cannot be classified quarantines the whole request: none is queued alone", async () => {
      const s = await intake(CONFIG, { sg: "sg-token-test" });
      const body = JSON.stringify([
        { sg_event_id: "e1", sg_message_id: "m0", event: "processed" },
        { sg_event_id: "e2", event: "delivered" },
      ]);
      const r = await s.post("/hooks/sg", body, { "X-Token": "sg-token-test" });
      expect([r.status, await r.json()]).toEqual([202, { status: "quarantined" }]);
      expect(await s.count("events", "batch_id IN (SELECT id FROM batches WHERE destination <> 'quarantine')")).toBe(0);
    });
    test(
      "a body that is not an array is the sender's fault;" + " an empty one holds nothing to queue (a heartbeat)",
      async () => {
        const s = await intake(CONFIG, { sg: "sg-token-test" });
        expect(
          (await (await s.post("/hooks/sg", '{"sg_event_id":"e1"}', { "X-Token": "sg-token-test" })).json()) as unknown,
        ).toEqual({ status: "quarantined" });
        expect((await (await s.post("/hooks/sg", "[]", { "X-Token": "sg-token-test" })).json()) as unknown).toEqual({
          status: "ignored",
        });
        expect(await s.count("events", "batch_id IN (SELECT id FROM batches WHERE destination <> 'quarantine')")).toBe(
          0,
        );
        expect(await s.count("events")).toBe(1);
      },
    );
  });
});
