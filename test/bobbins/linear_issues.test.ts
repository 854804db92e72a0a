// linear.issues: Linear webhooks (Linear-Signature: the hex HMAC-SHA256 of the body; the body's
// webhookTimestamp within 60 s of the intake's clock; the resource type as the event type;
// events batched by the issue they are about).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHmac } from "node:crypto";
import { LOG_LINES, type TestIntake } from "../helpers/intake.ts";
import { bobbinTest, builtin, eventsByPayload, kitIntake, kitOf } from "./catalogue.ts";

const bobbin = builtin("linear.issues");
const kit = kitOf(bobbin);
const SECRET = kit.secrets.secret;
const sign = (body: string, key = SECRET) => createHmac("sha256", key).update(body).digest("hex");
const ISSUE = "9d8c7b6a-5f4e-4d3c-8b2a-1f0e9d8c7b6a";
const ORG = "0f1e2d3c-4b5a-4968-8776-655443322110";
// The intake's clock (Unix seconds), and the same instant in Linear's webhookTimestamp unit.
const NOW = kit.now ?? 0;
const NOW_MS = NOW * 1000;

bobbinTest(
  "linear.issues",
  "an issue and a comment on it are queued under the issue's id and delivered, a bad signature is 401",
  {
    answers: {
      "captures/accepted.http": { status: 202, key: ISSUE },
      "captures/comment.http": { status: 202, key: ISSUE },
      "captures/rejected.http": { status: 401, body: "", key: null },
    },
  },
);

describe("against an intake", () => {
  let t: TestIntake;
  beforeAll(async () => {
    t = await kitIntake("linear.issues", {
      config: `# Routes see the bobbin's attributes: new issues of one team go elsewhere.
[[routes]]
name = "linear-eng-new"
source = "linear"
match = { event_type = "Issue", action = "create", team = "ENG" }
destination = "kit"
`,
    });
  });
  afterAll(() => t.stop());

  const headers = (body: string, event: string, delivery: string, key = SECRET) => ({
    "Content-Type": "application/json; charset=utf-8",
    "User-Agent": "Linear-Webhook",
    "Linear-Delivery": delivery,
    "Linear-Event": event,
    "Linear-Signature": sign(body, key),
  });
  const stored = (payload: string) =>
    eventsByPayload<{ key: string; event_type: string; dedup_id: string | null; route: string }>(
      t,
      "b.key, e.event_type, e.dedup_id, e.route",
      payload,
    );
  const envelope = (type: string, action: string, data: unknown, ts: number) =>
    JSON.stringify({
      action,
      actor: { id: "2b3c4d5e-6f7a-4b8c-9d0e-1f2a3b4c5d6e", name: "Octo Dev", type: "user" },
      createdAt: new Date(ts - 100).toISOString(),
      data,
      url: "https://linear.app/octo-org/issue/ENG-42",
      type,
      organizationId: ORG,
      webhookTimestamp: ts,
      webhookId: "1e2f3a4b-5c6d-4e7f-8a9b-0c1d2e3f4a5b",
    });

  test(
    "an issue created in team ENG takes the route on type, action and team; Linear's retry of the " +
      "delivery is a duplicate",
    async () => {
      const body = envelope(
        "Issue",
        "create",
        {
          id: "aa11bb22-cc33-4d44-8e55-ff6677889900",
          identifier: "ENG-43",
          title: "Flaky test",
          teamId: "7a8b9c0d-1e2f-4a3b-8c4d-5e6f7a8b9c0d",
          team: { id: "7a8b9c0d-1e2f-4a3b-8c4d-5e6f7a8b9c0d", key: "ENG", name: "Engineering" },
        },
        NOW_MS - 2000,
      );
      const delivery = "c0d1e2f3-a4b5-4c6d-8e7f-901a2b3c4d5e";
      const first = await t.post("/hooks/linear", body, headers(body, "Issue", delivery));
      expect([first.status, await first.text()]).toEqual([202, '{"status":"queued"}']);
      const retry = await t.post("/hooks/linear", body, headers(body, "Issue", delivery));
      expect([retry.status, await retry.text()]).toEqual([200, '{"status":"duplicate"}']);
      expect(stored(body)).toEqual([
        {
          key: "aa11bb22-cc33-4d44-8e55-ff6677889900",
          event_type: "Issue",
          dedup_id: delivery,
          route: "linear-eng-new",
        },
      ]);
    },
  );

  test("an SLA event is keyed by issueData.id, an app revocation (no data) by the workspace", async () => {
    const sla = JSON.stringify({
      action: "highRisk",
      createdAt: new Date(NOW_MS - 1100).toISOString(),
      issueData: {
        id: ISSUE,
        identifier: "ENG-42",
        title: "Retry counter restarts at zero",
        teamId: "7a8b9c0d-1e2f-4a3b-8c4d-5e6f7a8b9c0d",
        team: { id: "7a8b9c0d-1e2f-4a3b-8c4d-5e6f7a8b9c0d", key: "ENG", name: "Engineering" },
      },
      organizationId: ORG,
      type: "IssueSLA",
      url: "https://linear.app/octo-org/issue/ENG-42",
      webhookId: "1e2f3a4b-5c6d-4e7f-8a9b-0c1d2e3f4a5b",
      webhookTimestamp: NOW_MS - 1000,
    });
    const revoked = JSON.stringify({
      action: "revoked",
      createdAt: new Date(NOW_MS - 600).toISOString(),
      oauthClientId: "5c6d7e8f-9a0b-4c1d-8e2f-3a4b5c6d7e8f",
      organizationId: ORG,
      type: "OAuthApp",
      webhookId: "1e2f3a4b-5c6d-4e7f-8a9b-0c1d2e3f4a5b",
      webhookTimestamp: NOW_MS - 500,
    });
    for (const [body, event] of [
      [sla, "IssueSLA"],
      [revoked, "OAuthApp"],
    ]) {
      const res = await t.post("/hooks/linear", body, headers(body, event, crypto.randomUUID()));
      expect([event, res.status]).toEqual([event, 202]);
    }
    expect(stored(sla).map(({ key, event_type }) => ({ key, event_type }))).toEqual([
      { key: ISSUE, event_type: "IssueSLA" },
    ]);
    expect(stored(revoked).map(({ key, event_type }) => ({ key, event_type }))).toEqual([
      { key: ORG, event_type: "OAuthApp" },
    ]);
  });

  test(
    "a good signature is refused 401 when webhookTimestamp is 61 s old or 61 s ahead of the " +
      "intake's clock; nothing is stored",
    async () => {
      // Linear's SDK (verify() in packages/sdk/src/webhooks/client.ts) refuses a timestamp more
      // than 1000 * 60 ms from its clock, either side; the bobbin's tolerance_s is 60.
      const events = t.count("events");
      const from = LOG_LINES.length;
      for (const ms of [NOW_MS - 61_000, NOW_MS + 61_000]) {
        const body = envelope(
          "Comment",
          "create",
          { id: "0e1f2a3b-4c5d-4e6f-8a7b-9c0d1e2f3a4b", body: `At ${ms}`, issueId: ISSUE },
          ms,
        );
        const res = await t.post("/hooks/linear", body, headers(body, "Comment", crypto.randomUUID()));
        expect([ms - NOW_MS, res.status, await res.text()]).toEqual([ms - NOW_MS, 401, ""]);
        expect(stored(body)).toEqual([]);
      }
      expect(t.count("events")).toBe(events);
      const reasons = LOG_LINES.slice(from)
        .filter((l) => l.includes("unverified"))
        .map((l) => /reason=(\w+)/.exec(l)?.[1]);
      expect(reasons).toEqual(["stale", "future"]);
    },
  );

  test(
    "a good signature is accepted when webhookTimestamp is 59 s (or exactly 60 s) old or ahead of " +
      "the intake's clock",
    async () => {
      for (const ms of [NOW_MS - 59_000, NOW_MS + 59_000, NOW_MS - 60_000, NOW_MS + 60_000]) {
        const body = envelope(
          "Comment",
          "create",
          { id: "1f2a3b4c-5d6e-4f7a-8b9c-0d1e2f3a4b5c", body: `At ${ms}`, issueId: ISSUE },
          ms,
        );
        const res = await t.post("/hooks/linear", body, headers(body, "Comment", crypto.randomUUID()));
        expect([ms - NOW_MS, res.status, await res.text()]).toEqual([ms - NOW_MS, 202, '{"status":"queued"}']);
        expect(stored(body).map((r) => r.key)).toEqual([ISSUE]);
      }
    },
  );

  test("a body without webhookTimestamp is refused 401 even with a good signature", async () => {
    // The payload types in Linear's schema that carry webhookTimestamp declare it Float! (never
    // null); the SDK would fall back to the Linear-Timestamp header, which the bobbin does not read.
    const body = JSON.stringify({
      action: "create",
      type: "Comment",
      data: { id: "2a3b4c5d-6e7f-4a8b-9c0d-1e2f3a4b5c6d", body: "No time", issueId: ISSUE },
      organizationId: ORG,
    });
    const from = LOG_LINES.length;
    const res = await t.post("/hooks/linear", body, {
      ...headers(body, "Comment", crypto.randomUUID()),
      "Linear-Timestamp": String(NOW_MS),
    });
    expect([res.status, await res.text()]).toEqual([401, ""]);
    expect(stored(body)).toEqual([]);
    expect(
      LOG_LINES.slice(from)
        .filter((l) => l.includes("unverified"))
        .map((l) => /reason=(\w+)/.exec(l)?.[1]),
    ).toEqual(["missing_signature"]);
  });

  test("a wrong, prefixed or missing signature is 401 and nothing is stored", async () => {
    const body = envelope("Issue", "update", { id: ISSUE, title: "Retry counter restarts at zero" }, NOW_MS);
    const good = headers(body, "Issue", crypto.randomUUID());
    const events = t.count("events");
    const { "Linear-Signature": _, ...unsigned } = good;
    for (const h of [
      unsigned,
      { ...good, "Linear-Signature": sign(body, "kit-test-another-secret") },
      { ...good, "Linear-Signature": `sha256=${good["Linear-Signature"]}` },
    ]) {
      const res = await t.post("/hooks/linear", body, h);
      expect([res.status, await res.text()]).toEqual([401, ""]);
    }
    expect(t.count("events")).toBe(events);
  });
});
