// sentry.issues: a Sentry internal integration's issue webhooks (Sentry-Hook-Signature, the hex
// HMAC-SHA256 of the body under the Client Secret), through a real `hookspool run`, and against an
// intake for what is Sentry's own: the key, the action as event type, Request-ID as dedup id.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHmac } from "node:crypto";
import type { TestIntake } from "../helpers/intake.ts";
import { bobbinTest, builtin, capturedRequest, eventsByPayload, kitIntake, kitOf } from "./catalogue.ts";

const bobbin = builtin("sentry.issues");
const kit = kitOf(bobbin);
const SECRET = kit.secrets.secret;
const { body: BODY, headers: HEADERS } = capturedRequest(bobbin);
const sign = (body: string) => createHmac("sha256", SECRET).update(body).digest("hex");

bobbinTest("sentry.issues", "an issue webhook is queued and delivered, a bad signature is 401", {
  answers: {
    "captures/accepted.http": 202,
    "captures/rejected.http": { status: 401, body: "" },
  },
});

describe("against an intake", () => {
  let t: TestIntake;
  beforeAll(async () => {
    t = await kitIntake("sentry.issues");
  });
  afterAll(() => t.stop());

  const rowOf = (body: string) =>
    eventsByPayload<{ key: string; event_type: string; dedup_id: string }>(t, "b.key, e.event_type, e.dedup_id", body);

  test(
    "the accepted capture is stored under the issue id, its action and its Request-ID; the same " +
      "request again is a duplicate",
    async () => {
      const first = await t.post("/hooks/sentry", BODY, HEADERS);
      expect([first.status, await first.text()]).toEqual([202, '{"status":"queued"}']);
      expect(rowOf(BODY)).toEqual([
        { key: "6120004242", event_type: "created", dedup_id: "7f3e9a1c5b2d4e6f8a0b1c2d3e4f5a6b" },
      ]);
      const again = await t.post("/hooks/sentry", BODY, HEADERS);
      expect([again.status, await again.text()]).toEqual([200, '{"status":"duplicate"}']);
      expect(rowOf(BODY)).toHaveLength(1);
    },
  );

  test(
    "a retry as Sentry builds it (the same body, a new Request-ID and timestamp) is a new event, " +
      "as README.md says",
    async () => {
      const retry = await t.post("/hooks/sentry", BODY, {
        ...HEADERS,
        "Request-ID": "1b2c3d4e5f60718293a4b5c6d7e8f901",
        "Sentry-Hook-Timestamp": "1773152826",
      });
      expect([retry.status, await retry.text()]).toEqual([202, '{"status":"queued"}']);
      expect(rowOf(BODY).map((r) => r.dedup_id)).toEqual([
        "7f3e9a1c5b2d4e6f8a0b1c2d3e4f5a6b",
        "1b2c3d4e5f60718293a4b5c6d7e8f901",
      ]);
    },
  );

  test(
    "the signature covers the body only: a changed Sentry-Hook-Timestamp still verifies, a changed " + "body does not",
    async () => {
      const assigned = BODY.replace('"action":"created"', '"action":"assigned"');
      const headers = { ...HEADERS, "Request-ID": "2c3d4e5f60718293a4b5c6d7e8f9012a" };
      const forged = await t.post("/hooks/sentry", assigned, headers);
      expect([forged.status, await forged.text()]).toEqual([401, ""]);
      const signed = await t.post("/hooks/sentry", assigned, {
        ...headers,
        "Sentry-Hook-Signature": sign(assigned),
        "Sentry-Hook-Timestamp": "1",
      });
      expect([signed.status, await signed.text()]).toEqual([202, '{"status":"queued"}']);
      expect(rowOf(assigned)).toEqual([
        { key: "6120004242", event_type: "assigned", dedup_id: "2c3d4e5f60718293a4b5c6d7e8f9012a" },
      ]);
    },
  );

  test("a comment webhook (its issue in data.issue_id), verified, is quarantined with key_missing", async () => {
    const comment = JSON.stringify({
      action: "created",
      installation: { uuid: "4c6b8f2e-0d3a-4e7b-9f1a-2b5c8d0e7a13" },
      data: {
        comment_id: "5001",
        issue_id: 6120004242,
        project_slug: "checkout-api",
        timestamp: "2026-03-10T14:40:02.000000Z",
        comment: "Looking into it.",
      },
      actor: { type: "user", id: 3100042, name: "Example Developer" },
    });
    const res = await t.post("/hooks/sentry", comment, {
      ...HEADERS,
      "Sentry-Hook-Resource": "comment",
      "Request-ID": "3d4e5f60718293a4b5c6d7e8f9012a3b",
      "Sentry-Hook-Signature": sign(comment),
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
