// atlassian.jira: Jira Cloud admin webhooks with a secret (X-Hub-Signature: sha256= and the hex
// HMAC-SHA256 of the body), through a real `hookspool run`, and against an intake for what is
// Jira's own: one batch per issue key (its comments join it), sprint and version events keyed by
// their self URLs, X-Atlassian-Webhook-Identifier as the dedup id kept across a retry, and a
// webhook saved without a secret refused.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHmac } from "node:crypto";
import type { TestIntake } from "../helpers/intake.ts";
import { bobbinTest, builtin, capturedRequest, eventsByPayload, kitIntake, kitOf } from "./catalogue.ts";

const bobbin = builtin("atlassian.jira");
const kit = kitOf(bobbin);
const SECRET = kit.secrets.secret;
const { body: BODY, headers: HEADERS } = capturedRequest(bobbin);
const signed = (body: string, id: string) => ({
  "Content-Type": "application/json",
  "X-Atlassian-Webhook-Identifier": id,
  "X-Hub-Signature": `sha256=${createHmac("sha256", SECRET).update(body).digest("hex")}`,
});

bobbinTest("atlassian.jira", "an issue update is queued and delivered, a bad signature is 401", {
  answers: {
    "captures/accepted.http": 202,
    "captures/rejected.http": { status: 401, body: "" },
  },
});

describe("against an intake", () => {
  let t: TestIntake;
  beforeAll(async () => {
    t = await kitIntake("atlassian.jira");
  });
  afterAll(() => t.stop());

  const rowOf = (body: string) =>
    eventsByPayload<{ key: string; event_type: string; dedup_id: string }>(t, "b.key, e.event_type, e.dedup_id", body);
  const batchOf = (body: string) => eventsByPayload<{ batch_id: number }>(t, "e.batch_id", body)[0].batch_id;

  test(
    "the accepted capture is stored under the issue key, webhookEvent and the delivery identifier; " +
      "Jira's retry of it is a duplicate",
    async () => {
      const first = await t.post("/hooks/jira", BODY, HEADERS);
      expect([first.status, await first.text()]).toEqual([202, '{"status":"queued"}']);
      expect(rowOf(BODY)).toEqual([
        { key: "SHOP-42", event_type: "jira:issue_updated", dedup_id: "7c4e2b1a-9f3d-4e8a-b6c5-0d1f2e3a4b5c" },
      ]);
      const retry = await t.post("/hooks/jira", BODY, { ...HEADERS, "X-Atlassian-Webhook-Retry": "1" });
      expect([retry.status, await retry.text()]).toEqual([200, '{"status":"duplicate"}']);
      expect(rowOf(BODY)).toHaveLength(1);
    },
  );

  test("a comment joins its issue's batch; sprint and version events are keyed apart by their self URLs", async () => {
    const { body: comment } = capturedRequest(bobbin, "captures/rejected.http");
    const res = await t.post("/hooks/jira", comment, signed(comment, "0b1c2d3e-0000-4000-8000-000000000001"));
    expect([res.status, await res.text()]).toEqual([202, '{"status":"queued"}']);
    expect(batchOf(comment)).toBe(batchOf(BODY));
    const sprint = JSON.stringify({
      timestamp: 1764001000000,
      webhookEvent: "sprint_started",
      sprint: { id: 12, self: "https://example.atlassian.net/rest/agile/1.0/sprint/12", state: "active", name: "S12" },
    });
    const version = JSON.stringify({
      timestamp: 1764001000000,
      webhookEvent: "jira:version_released",
      version: {
        id: "12",
        self: "https://example.atlassian.net/rest/api/2/version/12",
        name: "2.4.0",
        projectId: 10000,
      },
    });
    for (const [body, id] of [
      [sprint, "0b1c2d3e-0000-4000-8000-000000000002"],
      [version, "0b1c2d3e-0000-4000-8000-000000000003"],
    ]) {
      const r = await t.post("/hooks/jira", body, signed(body, id));
      expect(r.status).toBe(202);
    }
    expect([rowOf(sprint)[0]?.key, rowOf(version)[0]?.key]).toEqual([
      "https://example.atlassian.net/rest/agile/1.0/sprint/12",
      "https://example.atlassian.net/rest/api/2/version/12",
    ]);
  });

  test("a webhook without a secret (no X-Hub-Signature), GitHub's header or a bare digest is 401", async () => {
    const { "X-Hub-Signature": sig, ...unsigned } = HEADERS;
    for (const headers of [
      unsigned,
      { ...unsigned, "X-Hub-Signature-256": sig },
      { ...unsigned, "X-Hub-Signature": sig.replace("sha256=", "") },
    ]) {
      const res = await t.post("/hooks/jira", BODY, headers);
      expect([res.status, await res.text()]).toEqual([401, ""]);
    }
  });
});
