// slack.events: Slack's Events API (X-Slack-Signature, "v0=" and the hex HMAC-SHA256 of
// "v0:<X-Slack-Request-Timestamp>:<body>" under the signing secret, five minutes either side),
// through a real `hookspool run`, and against an intake for what is Slack's own: the signed
// url_verification answered and never queued, event_id as the dedup id across Slack's retries,
// one batch per workspace and channel, and the form-encoded interactivity of README.md's second
// instance.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHmac } from "node:crypto";
import type { TestIntake } from "../helpers/intake.ts";
import { bobbinTest, builtin, capturedRequest, eventsByPayload, kitIntake, kitOf } from "./catalogue.ts";

const bobbin = builtin("slack.events");
const kit = kitOf(bobbin);
const SECRET = kit.secrets.secret;
const NOW = kit.now ?? 0;
const accepted = capturedRequest(bobbin, "captures/accepted.http");
const retry = capturedRequest(bobbin, "captures/retry.http");
const challenge = capturedRequest(bobbin, "captures/url_verification.http");
/** Slack's headers for `body`, signed at `ts` with `secret`. */
const signed = (body: string, ts = NOW, secret = SECRET, contentType = "application/json") => ({
  "Content-Type": contentType,
  "X-Slack-Request-Timestamp": String(ts),
  "X-Slack-Signature": `v0=${createHmac("sha256", secret).update(`v0:${ts}:${body}`).digest("hex")}`,
});

bobbinTest(
  "slack.events",
  "an event is queued and delivered, Slack's retry is a duplicate, url_verification is answered, a " +
    "bad signature is 401",
  {
    answers: {
      "captures/accepted.http": 202,
      "captures/rejected.http": { status: 401, body: "" },
      "captures/retry.http": 200,
      "captures/url_verification.http": { status: 200, body: JSON.parse(challenge.body).challenge },
    },
  },
);

/** README.md's second instance, for interactivity and slash commands, exactly as it shows it. */
function interactiveInstance(): string {
  const readme = bobbin.files().get("README.md") ?? "";
  const block = [...readme.matchAll(/```toml\n([\s\S]*?)```/g)]
    .map((m) => m[1])
    .find((t) => t.includes('bobbin = "hookspool.webhook"'));
  if (!block) throw new Error("README.md shows no hookspool.webhook instance");
  return block
    .replace(/\{ file = "[^"]+" \}/, '{ file = "{{secret:slack-secret}}" }')
    .replace(/"hermes:[^"]+"/g, '"kit"');
}

describe("against an intake", () => {
  let t: TestIntake;
  beforeAll(async () => {
    t = await kitIntake("slack.events", { config: interactiveInstance() });
  });
  afterAll(() => t.stop());

  const rowsOf = (body: string) =>
    eventsByPayload<{ source: string; key: string; event_type: string; dedup_id: string }>(
      t,
      "e.source, b.key, e.event_type, e.dedup_id",
      body,
    );

  test(
    "the accepted capture is stored under workspace:channel, the inner event's type and event_id; " +
      "Slack's retry is a duplicate",
    async () => {
      const first = await t.post("/hooks/slack", accepted.body, accepted.headers);
      expect([first.status, await first.text()]).toEqual([202, '{"status":"queued"}']);
      expect(rowsOf(accepted.body)).toEqual([
        { source: "slack", key: "T0KITEXAMPL:C0KITCHAN01", event_type: "app_mention", dedup_id: "Ev0KITEVENT01" },
      ]);
      // The retry is signed afresh at a later timestamp, with X-Slack-Retry-Num: same event_id.
      const again = await t.post("/hooks/slack", retry.body, retry.headers);
      expect([again.status, await again.text()]).toEqual([200, '{"status":"duplicate"}']);
      expect(rowsOf(accepted.body)).toHaveLength(1);
    },
  );

  test("url_verification is echoed as text only when signed, and never stored", async () => {
    const events = t.count("events");
    const good = await t.post("/hooks/slack", challenge.body, challenge.headers);
    expect([good.status, good.headers.get("content-type"), await good.text()]).toEqual([
      200,
      "text/plain; charset=utf-8",
      JSON.parse(challenge.body).challenge,
    ]);
    const forged = await t.post("/hooks/slack", challenge.body, signed(challenge.body, NOW, "not-the-signing-secret"));
    expect([forged.status, await forged.text()]).toEqual([401, ""]);
    const unsigned = await t.post("/hooks/slack", challenge.body, { "Content-Type": "application/json" });
    expect([unsigned.status, await unsigned.text()]).toEqual([401, ""]);
    // Signed, but six minutes old: Slack's own rule, and the challenge is not echoed either.
    const stale = await t.post("/hooks/slack", challenge.body, signed(challenge.body, NOW - 360));
    expect([stale.status, await stale.text()]).toEqual([401, ""]);
    expect(t.count("events")).toBe(events);
  });

  test(
    "the signature covers the timestamp: the accepted body under a changed " + "X-Slack-Request-Timestamp is 401",
    async () => {
      const moved = await t.post("/hooks/slack", accepted.body, {
        ...accepted.headers,
        "X-Slack-Request-Timestamp": String(NOW + 1),
      });
      expect([moved.status, await moved.text()]).toEqual([401, ""]);
    },
  );

  test("an event without a channel (a member joined) falls back to its user, in the same workspace", async () => {
    const body = JSON.stringify({
      token: "kitTestVerificationToken0",
      team_id: "T0KITEXAMPL",
      api_app_id: "A0KITEXAMPL",
      event: {
        type: "team_join",
        user: { id: "U0KITUSER03", team_id: "T0KITEXAMPL", name: "example.newcomer" },
        event_ts: "1778162440.000100",
      },
      type: "event_callback",
      event_id: "Ev0KITEVENT03",
      event_time: 1778162440,
    });
    const res = await t.post("/hooks/slack", body, signed(body));
    expect([res.status, await res.text()]).toEqual([202, '{"status":"queued"}']);
    expect(rowsOf(body)).toEqual([
      { source: "slack", key: "T0KITEXAMPL:U0KITUSER03", event_type: "team_join", dedup_id: "Ev0KITEVENT03" },
    ]);
  });

  test(
    "an interactivity request (form-encoded) sent to this instance is verified and quarantined as " + "not_json",
    async () => {
      const body =
        `payloa` + `d=${encodeURIComponent(JSON.stringify({ type: "block_actions", team: { id: "T0KITEXAMPL" } }))}`;
      const res = await t.post("/hooks/slack", body, signed(body, NOW, SECRET, "application/x-www-form-urlencoded"));
      expect([res.status, await res.text()]).toEqual([202, '{"status":"quarantined"}']);
      const q = t.db.db
        .query(
          "SELECT b.last_error FROM events e JOIN batches b ON b.id = e.batch_id WHERE b.destination = " +
            "'quarantine' ORDER BY e.id DESC LIMIT 1",
        )
        .get() as { last_error: string } | null;
      expect(q?.last_error).toBe("not_json");
    },
  );

  test(
    "README.md's second instance takes a button press (payload=) and a slash command (plain form) " +
      "under the same signing secret",
    async () => {
      const action = {
        type: "block_actions",
        trigger_id: "5550100123.1778162450.kit0test0trigger",
        team: { id: "T0KITEXAMPL", domain: "example" },
        user: { id: "U0KITUSER01" },
        channel: { id: "C0KITCHAN01", name: "deploys" },
        actions: [{ type: "button", action_id: "approve", value: "2026.05.07" }],
      };
      const press = `payload=${encodeURIComponent(JSON.stringify(action))}`;
      const r1 = await t.post(
        "/hooks/slack-interactive",
        press,
        signed(press, NOW, SECRET, "application/x-www-form-urlencoded"),
      );
      expect([r1.status, await r1.text()]).toEqual([202, '{"status":"queued"}']);
      expect(rowsOf(JSON.stringify(action))).toEqual([
        {
          source: "slack-interactive",
          key: "T0KITEXAMPL:C0KITCHAN01",
          event_type: "block_actions",
          dedup_id: action.trigger_id,
        },
      ]);
      const command =
        "token=kitTestVerificationToken0&team_id=T0KITEXAMPL&team_domain=example&channel_id=C0KITCHAN02&" +
        "channel_name=ops&user_id=U0KITUSER02&command=%2Fdeploy&text=status&" +
        "trigger_id=5550100123.1778162455.kit0test0command";
      const r2 = await t.post(
        "/hooks/slack-interactive",
        command,
        signed(command, NOW, SECRET, "application/x-www-form-urlencoded"),
      );
      expect([r2.status, await r2.text()]).toEqual([202, '{"status":"queued"}']);
      const row = t.db.db
        .query(
          "SELECT b.key, e.event_type, e.payload FROM events e JOIN batches b ON b.id = e.batch_id " +
            "WHERE e.dedup_id = ?",
        )
        .get("5550100123.1778162455.kit0test0command") as { key: string; event_type: string; payload: string };
      expect([row.key, row.event_type, JSON.parse(row.payload).text]).toEqual([
        "T0KITEXAMPL:C0KITCHAN02",
        "/deploy",
        "status",
      ]);
      const forged = await t.post(
        "/hooks/slack-interactive",
        press,
        signed(press, NOW, "not-the-signing-secret", "application/x-www-form-urlencoded"),
      );
      expect([forged.status, await forged.text()]).toEqual([401, ""]);
    },
  );
});
