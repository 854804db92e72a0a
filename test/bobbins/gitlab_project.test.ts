// gitlab.project: GitLab project and group webhooks (the Secret token in X-Gitlab-Token, the
// Idempotency-Key header as the dedup id, object_kind as the event type).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { TestIntake } from "../helpers/intake.ts";
import { bobbinTest, builtin, eventsByPayload, kitIntake, kitOf } from "./catalogue.ts";

const bobbin = builtin("gitlab.project");
const kit = kitOf(bobbin);
const TOKEN = kit.secrets.secret;

bobbinTest("gitlab.project", "a push is queued and delivered, a wrong token is 401", {
  answers: {
    "captures/accepted.http": 202,
    "captures/rejected.http": { status: 401, body: "" },
  },
});

describe("against an intake", () => {
  let t: TestIntake;
  beforeAll(async () => {
    t = await kitIntake("gitlab.project", {
      config: `# Routes see the bobbin's attributes: merge requests that open go elsewhere.
[[routes]]
name = "gitlab-mr-open"
source = "gitlab"
match = { event_type = "merge_request", action = "open" }
destination = "kit"
`,
    });
  });
  afterAll(() => t.stop());

  const accepted = bobbin.files().get("captures/accepted.http") ?? "";
  const pushBody = accepted.slice(accepted.indexOf("\n\n") + 2).replace(/\n$/, "");
  const headers = (event: string, extra: Record<string, string> = {}) => ({
    "Content-Type": "application/json",
    "User-Agent": "GitLab/18.5.2",
    "X-Gitlab-Event": event,
    "X-Gitlab-Instance": "https://gitlab.example.com",
    "X-Gitlab-Webhook-UUID": crypto.randomUUID(),
    "X-Gitlab-Token": TOKEN,
    ...extra,
  });
  const stored = (payload: string) =>
    eventsByPayload<{ key: string; event_type: string; dedup_id: string | null; route: string; headers: string }>(
      t,
      "b.key, e.event_type, e.dedup_id, e.route, e.headers",
      payload,
    );

  test(
    "the push is keyed by project and kind, deduplicated by Idempotency-Key, and a resend is a " + "duplicate",
    async () => {
      const key = "6a2f0d1e-9b3c-4e5f-8a7b-1c2d3e4f5a6b";
      const first = await t.post("/hooks/gitlab", pushBody, headers("Push Hook", { "Idempotency-Key": key }));
      expect([first.status, await first.text()]).toEqual([202, '{"status":"queued"}']);
      // GitLab's Resend Request: the same body and Idempotency-Key, a new X-Gitlab-Webhook-UUID.
      const resend = await t.post("/hooks/gitlab", pushBody, headers("Push Hook", { "Idempotency-Key": key }));
      expect([resend.status, await resend.text()]).toEqual([200, '{"status":"duplicate"}']);
      const rows = stored(pushBody);
      expect(rows.map(({ key, event_type, dedup_id, route }) => ({ key, event_type, dedup_id, route }))).toEqual([
        { key: "octo-group/hello-world:push", event_type: "push", dedup_id: key, route: "gitlab" },
      ]);
      // The token is never stored with the event.
      expect(rows[0].headers).not.toContain(TOKEN);
    },
  );

  test("GitLab before 17.4 sends no Idempotency-Key: each delivery is queued, with no dedup id", async () => {
    const body = pushBody.replace('"total_commits_count":1', '"total_commits_count":1,"kit":"old-gitlab"');
    for (let i = 0; i < 2; i++) {
      const res = await t.post("/hooks/gitlab", body, headers("Push Hook"));
      expect([i, res.status, await res.text()]).toEqual([i, 202, '{"status":"queued"}']);
    }
    expect(stored(body).map((r) => r.dedup_id)).toEqual([null, null]);
  });

  test("a merge request that opens matches a route on event type and action", async () => {
    const body = JSON.stringify({
      object_kind: "merge_request",
      event_type: "merge_request",
      user: { id: 8812001, name: "Octo Dev", username: "octo-dev" },
      project: {
        id: 4710023,
        name: "hello-world",
        path_with_namespace: "octo-group/hello-world",
        web_url: "https://gitlab.example.com/octo-group/hello-world",
      },
      object_attributes: {
        id: 99001,
        iid: 7,
        title: "Fix the retry counter",
        state: "opened",
        action: "open",
        source_branch: "fix-retry",
        target_branch: "main",
      },
    });
    const res = await t.post(
      "/hooks/gitlab",
      body,
      headers("Merge Request Hook", { "Idempotency-Key": crypto.randomUUID() }),
    );
    expect(res.status).toBe(202);
    expect(stored(body).map(({ key, event_type, route }) => ({ key, event_type, route }))).toEqual([
      { key: "octo-group/hello-world:merge_request", event_type: "merge_request", route: "gitlab-mr-open" },
    ]);
  });

  test(
    "a group webhook's events without a project fall back to the group's path, the event type to " + "event_name",
    async () => {
      const member = JSON.stringify({
        created_at: "2026-11-24T09:40:12Z",
        updated_at: "2026-11-24T09:40:12Z",
        group_name: "Octo Group",
        group_path: "octo-group",
        group_id: 330001,
        user_username: "octo-dev",
        user_name: "Octo Dev",
        user_email: "octo-dev@example.com",
        user_id: 8812001,
        group_access: "Developer",
        group_plan: null,
        expires_at: null,
        event_name: "user_add_to_group",
      });
      const subgroup = JSON.stringify({
        created_at: "2026-11-24T09:41:00Z",
        updated_at: "2026-11-24T09:41:00Z",
        event_name: "subgroup_create",
        name: "tools",
        path: "tools",
        full_path: "octo-group/tools",
        group_id: 330002,
        parent_group_id: 330001,
        parent_name: "Octo Group",
        parent_path: "octo-group",
        parent_full_path: "octo-group",
      });
      for (const [body, event] of [
        [member, "Member Hook"],
        [subgroup, "Subgroup Hook"],
      ]) {
        const res = await t.post("/hooks/gitlab", body, headers(event, { "Idempotency-Key": crypto.randomUUID() }));
        expect([event, res.status]).toEqual([event, 202]);
      }
      expect(stored(member).map(({ key, event_type }) => ({ key, event_type }))).toEqual([
        { key: "octo-group:user_add_to_group", event_type: "user_add_to_group" },
      ]);
      expect(stored(subgroup).map(({ key, event_type }) => ({ key, event_type }))).toEqual([
        { key: "octo-group/tools:subgroup_create", event_type: "subgroup_create" },
      ]);
    },
  );

  test("a token that differs, or is only a prefix of the secret, is 401 and nothing is stored", async () => {
    const events = t.count("events");
    for (const token of [`${TOKEN}x`, TOKEN.slice(0, -1), `Bearer ${TOKEN}`, ""]) {
      const res = await t.post(
        "/hooks/gitlab",
        pushBody,
        headers("Push Hook", { "X-Gitlab-Token": token, "Idempotency-Key": crypto.randomUUID() }),
      );
      expect([token.length, res.status, await res.text()]).toEqual([token.length, 401, ""]);
    }
    expect(t.count("events")).toBe(events);
  });
});
