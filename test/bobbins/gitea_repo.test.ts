// gitea.repo: Gitea and Forgejo repository webhooks (X-Gitea-Signature: the hex HMAC-SHA256 of
// the body, no prefix; X-Gitea-Event as the event type; X-Gitea-Delivery as the dedup id).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHmac } from "node:crypto";
import type { TestIntake } from "../helpers/intake.ts";
import { bobbinTest, builtin, eventsByPayload, kitIntake, kitOf } from "./catalogue.ts";

const bobbin = builtin("gitea.repo");
const kit = kitOf(bobbin);
const SECRET = kit.secrets.secret;
const hex = (body: string, key = SECRET, alg = "sha256") => createHmac(alg, key).update(body).digest("hex");

bobbinTest("gitea.repo", "a Gitea push and a Forgejo pull request are queued and delivered, a bad signature is 401", {
  answers: {
    "captures/accepted.http": 202,
    "captures/forgejo.http": 202,
    "captures/rejected.http": { status: 401, body: "" },
  },
});

test("the Forgejo capture carries Forgejo's own headers beside Gitea's, with the same values", () => {
  const forgejo = new Map(
    bobbin
      .files()
      .get("captures/forgejo.http")
      ?.split("\n")
      .filter((l) => /^X-(Forgejo|Gitea)-/.test(l))
      .map((l) => l.split(": ") as [string, string]),
  );
  for (const h of ["Delivery", "Event", "Event-Type", "Signature"])
    expect([h, forgejo.get(`X-Forgejo-${h}`)]).toEqual([h, forgejo.get(`X-Gitea-${h}`)]);
});

describe("against an intake", () => {
  let t: TestIntake;
  beforeAll(async () => {
    t = await kitIntake("gitea.repo");
  });
  afterAll(() => t.stop());

  // The headers Gitea's addDefaultHeaders sets, for a body signed with `key`.
  const headers = (body: string, event: string, eventType: string, delivery: string, key = SECRET) => ({
    "Content-Type": "application/json",
    "X-Gitea-Delivery": delivery,
    "X-Gitea-Event": event,
    "X-Gitea-Event-Type": eventType,
    "X-Gitea-Signature": key ? hex(body, key) : "",
    "X-Gogs-Signature": key ? hex(body, key) : "",
    "X-Hub-Signature-256": `sha256=${key ? hex(body, key) : ""}`,
  });
  const stored = (payload: string) =>
    eventsByPayload<{ key: string; event_type: string; dedup_id: string | null }>(
      t,
      "b.key, e.event_type, e.dedup_id",
      payload,
    );

  test(
    "the same delivery twice is a duplicate; a replay from Gitea's page, with a new delivery UUID, " +
      "is queued again",
    async () => {
      const body = JSON.stringify(
        {
          action: "labeled",
          number: 3,
          issue: { id: 501, number: 3, title: "Retry counter" },
          label: { id: 8, name: "bug" },
          repository: { id: 42, full_name: "octo-org/hello-world" },
          sender: { id: 7, login: "octo-dev" },
        },
        null,
        2,
      );
      const first = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d";
      const res = await t.post("/hooks/gitea", body, headers(body, "issues", "issue_label", first));
      expect([res.status, await res.text()]).toEqual([202, '{"status":"queued"}']);
      const again = await t.post("/hooks/gitea", body, headers(body, "issues", "issue_label", first));
      expect([again.status, await again.text()]).toEqual([200, '{"status":"duplicate"}']);
      const replay = await t.post(
        "/hooks/gitea",
        body,
        headers(body, "issues", "issue_label", "5e6f7a8b-9c0d-4e1f-8a2b-3c4d5e6f7a8b"),
      );
      expect([replay.status, await replay.text()]).toEqual([202, '{"status":"queued"}']);
      expect(stored(body)).toEqual([
        { key: "octo-org/hello-world:issues", event_type: "issues", dedup_id: first },
        { key: "octo-org/hello-world:issues", event_type: "issues", dedup_id: "5e6f7a8b-9c0d-4e1f-8a2b-3c4d5e6f7a8b" },
      ]);
    },
  );

  test("a webhook without a secret sends empty signature headers: 401, nothing stored", async () => {
    const body = JSON.stringify({ ref: "refs/heads/main", repository: { full_name: "octo-org/hello-world" } }, null, 2);
    const events = t.count("events");
    for (const h of [
      headers(body, "push", "push", crypto.randomUUID(), ""),
      headers(body, "push", "push", crypto.randomUUID(), "kit-test-another-secret"),
    ]) {
      const res = await t.post("/hooks/gitea", body, h);
      expect([res.status, await res.text()]).toEqual([401, ""]);
    }
    expect(t.count("events")).toBe(events);
  });

  test("a form-encoded webhook (payload=<JSON>) verifies but is quarantined as not JSON", async () => {
    const push = { ref: "refs/heads/main", repository: { full_name: "octo-org/hello-world" } };
    const body = `payload=${encodeURIComponent(JSON.stringify(push))}`;
    const res = await t.post("/hooks/gitea", body, {
      ...headers(body, "push", "push", crypto.randomUUID()),
      "Content-Type": "application/x-www-form-urlencoded",
    });
    expect([res.status, await res.text()]).toEqual([202, '{"status":"quarantined"}']);
    const q = t.db.db
      .query(
        "SELECT b.last_error FROM events e JOIN batches b ON b.id = e.batch_id WHERE b.destination = " +
          "'quarantine' ORDER BY e.id DESC LIMIT 1",
      )
      .get() as { last_error: string } | null;
    expect(q?.last_error).toBe("not_json");
  });

  test("a package event of a package with no repository is keyed by the package's owner", async () => {
    const body = JSON.stringify(
      {
        action: "created",
        package: {
          id: 12,
          owner: { id: 3, login: "octo-org" },
          repository: null,
          creator: { id: 7, login: "octo-dev" },
          type: "npm",
          name: "hello-world",
          version: "1.2.0",
        },
        sender: { id: 7, login: "octo-dev" },
      },
      null,
      2,
    );
    const res = await t.post("/hooks/gitea", body, headers(body, "package", "package", crypto.randomUUID()));
    expect(res.status).toBe(202);
    expect(stored(body).map(({ key, event_type }) => ({ key, event_type }))).toEqual([
      { key: "octo-org:package", event_type: "package" },
    ]);
  });
});
