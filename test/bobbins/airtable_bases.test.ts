// airtable.bases: Airtable's webhook pings (X-Airtable-Content-MAC, the hex HMAC-SHA256 of the
// body keyed with the decoded bytes of the webhook's macSecretBase64), through a real
// `hookspool run`: a ping queued and answered 200 with an empty body as Airtable asks, a MAC
// made with the base64 text instead of its bytes refused; and the scheme against an intake.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHmac } from "node:crypto";
import type { TestIntake } from "../helpers/intake.ts";
import { bobbinTest, builtin, kitIntake, kitOf } from "./catalogue.ts";

const SECRET = kitOf(builtin("airtable.bases")).secrets.secret;

bobbinTest("airtable.bases", "a ping is queued and answered 200 empty, a MAC under the base64 text is 401", {
  answers: {
    "captures/accepted.http": { status: 200, body: "" },
    "captures/rejected.http": { status: 401, body: "" },
  },
});

describe("against an intake", () => {
  let t: TestIntake;
  beforeAll(async () => {
    t = await kitIntake("airtable.bases");
  });
  afterAll(() => t.stop());
  const ping = (webhook: string) =>
    JSON.stringify({ base: { id: "appBase0000000001" }, webhook: { id: webhook }, timestamp: "2026-08-22T12:00:01Z" });
  const mac = (key: string | Buffer, body: string) =>
    `hmac-sha256=${createHmac("sha256", key).update(body).digest("hex")}`;

  test("the key is the secret's decoded bytes; pings of one webhook share its batch", async () => {
    const key = Buffer.from(SECRET, "base64");
    for (const body of [ping("achWebhook0000001"), ping("achWebhook0000001")]) {
      const r = await t.post("/hooks/airtable", body, {
        "Content-Type": "application/json",
        "X-Airtable-Content-MAC": mac(key, body),
      });
      expect([r.status, await r.text(), r.headers.get("x-hookspool-status")]).toEqual([200, "", "queued"]);
    }
    const rows = t.db.db
      .query("SELECT b.key, e.event_type, b.id AS batch FROM events e JOIN batches b ON b.id = e.batch_id")
      .all() as { key: string; event_type: string; batch: number }[];
    expect(rows.map((r) => [r.key, r.event_type])).toEqual([
      ["achWebhook0000001", "airtable.ping"],
      ["achWebhook0000001", "airtable.ping"],
    ]);
    expect(new Set(rows.map((r) => r.batch)).size).toBe(1);
    const body = ping("achWebhook0000002");
    const text = await t.post("/hooks/airtable", body, {
      "Content-Type": "application/json",
      "X-Airtable-Content-MAC": mac(SECRET, body),
    });
    expect(text.status).toBe(401);
  });
});
