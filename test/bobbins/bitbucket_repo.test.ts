// bitbucket.repo: Bitbucket Cloud repository webhooks (X-Hub-Signature: "sha256=" and the hex
// HMAC-SHA256 of the body; X-Event-Key as the event type; X-Request-UUID as the dedup id).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHmac } from "node:crypto";
import type { TestIntake } from "../helpers/intake.ts";
import { bobbinTest, builtin, eventsByPayload, kitIntake, kitOf } from "./catalogue.ts";

const bobbin = builtin("bitbucket.repo");
const kit = kitOf(bobbin);
const SECRET = kit.secrets.secret;
const sign = (body: string, key = SECRET) => `sha256=${createHmac("sha256", key).update(body).digest("hex")}`;

bobbinTest("bitbucket.repo", "a push is queued and delivered, a bad signature is 401", {
  answers: {
    "captures/accepted.http": 202,
    "captures/rejected.http": { status: 401, body: "" },
  },
});

describe("against an intake", () => {
  let t: TestIntake;
  beforeAll(async () => {
    t = await kitIntake("bitbucket.repo");
  });
  afterAll(() => t.stop());

  const headers = (body: string, event: string, request: string, attempt = 1, extra: Record<string, string> = {}) => ({
    "Content-Type": "application/json",
    "User-Agent": "Bitbucket-Webhooks/2.0",
    "X-Event-Key": event,
    "X-Hook-UUID": "2f6d8a0c-4e1b-4c3d-9e5f-7a1b3c5d7e9f",
    "X-Request-UUID": request,
    "X-Attempt-Number": String(attempt),
    "X-Hub-Signature": sign(body),
    ...extra,
  });
  const stored = (payload: string) =>
    eventsByPayload<{ key: string; event_type: string; dedup_id: string | null; destination: string }>(
      t,
      "b.key, e.event_type, e.dedup_id, b.destination",
      payload,
    );

  test(
    "a pull request event is keyed by repository and event key; Bitbucket's retry of the same " +
      "request is a duplicate",
    async () => {
      const body = JSON.stringify({
        repository: {
          type: "repository",
          full_name: "octo-team/hello-world",
          name: "hello-world",
          workspace: { type: "workspace", slug: "octo-team", name: "Octo Team" },
          project: { type: "project", key: "HW", name: "Hello World" },
        },
        actor: { type: "user", display_name: "Octo Dev", nickname: "octo-dev" },
        pullrequest: {
          type: "pullrequest",
          id: 17,
          title: "Fix the retry counter",
          state: "OPEN",
          source: { branch: { name: "fix-retry" } },
          destination: { branch: { name: "main" } },
        },
      });
      const request = "7c5a3e1f-9d2b-4a6c-8e0f-2b4d6f8a0c1e";
      const first = await t.post("/hooks/bitbucket", body, headers(body, "pullrequest:created", request));
      expect([first.status, await first.text()]).toEqual([202, '{"status":"queued"}']);
      // A 5xx somewhere on the way: Bitbucket's second attempt at the same request.
      const retry = await t.post("/hooks/bitbucket", body, headers(body, "pullrequest:created", request, 2));
      expect([retry.status, await retry.text()]).toEqual([200, '{"status":"duplicate"}']);
      expect(stored(body).map(({ key, event_type, dedup_id }) => ({ key, event_type, dedup_id }))).toEqual([
        { key: "octo-team/hello-world:pullrequest:created", event_type: "pullrequest:created", dedup_id: request },
      ]);
    },
  );

  test("a webhook without a secret sends no X-Hub-Signature: 401, nothing stored", async () => {
    const body = JSON.stringify({ repository: { full_name: "octo-team/hello-world" }, push: { changes: [] } });
    const events = t.count("events");
    const { "X-Hub-Signature": _, ...unsigned } = headers(body, "repo:push", crypto.randomUUID());
    for (const h of [
      unsigned,
      { ...unsigned, "X-Hub-Signature": sign(body, "kit-test-another-secret") },
      { ...unsigned, "X-Hub-Signature": sign(body).slice("sha256=".length) },
    ]) {
      const res = await t.post("/hooks/bitbucket", body, h);
      expect([res.status, await res.text()]).toEqual([401, ""]);
    }
    expect(t.count("events")).toBe(events);
  });

  test("a Bitbucket Data Center delivery (no repository.full_name) is verified but quarantined", async () => {
    const body = JSON.stringify({
      eventKey: "pr:opened",
      date: "2026-11-24T10:15:42+0000",
      actor: { name: "octo-dev" },
      pullRequest: { id: 5, toRef: { repository: { slug: "hello-world", project: { key: "HW" } } } },
    });
    const res = await t.post("/hooks/bitbucket", body, {
      "Content-Type": "application/json; charset=UTF-8",
      "X-Event-Key": "pr:opened",
      "X-Request-Id": crypto.randomUUID(),
      "X-Hub-Signature": sign(body),
    });
    expect([res.status, await res.text()]).toEqual([202, '{"status":"quarantined"}']);
    const q = t.db.db
      .query(
        "SELECT b.last_error FROM events e JOIN batches b ON b.id = e.batch_id WHERE b.destination = " +
          "'quarantine' ORDER BY e.id DESC LIMIT 1",
      )
      .get() as { last_error: string } | null;
    expect(q?.last_error).toBe("key_missing");
  });
});
