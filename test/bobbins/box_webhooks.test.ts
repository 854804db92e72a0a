// box.webhooks: Box V2 webhooks (box-signature-primary and box-signature-secondary, the base64
// HMAC-SHA256 of the body then box-delivery-timestamp under the app's two keys), through a real
// `hookspool run`, and against an intake for what is Box's own: either key alone verifies, a
// retry (a new box-delivery-id and timestamp, the same body id) is a duplicate, and the RFC 3339
// timestamp is held to 10 minutes.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHmac } from "node:crypto";
import { capturesOf } from "../../src/bobbin/captures.ts";
import { startIntake, type TestIntake } from "../helpers/intake.ts";
import { bobbinTest, builtin, KIT_DESTINATION, kitOf } from "./catalogue.ts";

const bobbin = builtin("box.webhooks");
const kit = kitOf(bobbin);
const PRIMARY = kit.secrets.secret;
const SECONDARY = kit.secrets.secret2;
const accepted = capturesOf(bobbin.files()).find((c) => c.file === "captures/accepted.http");
if (!accepted) throw new Error("no accepted capture");
const BODY = new TextDecoder().decode(accepted.request.body);
const sig = (key: string, body: string, ts: string) =>
  createHmac("sha256", key).update(body).update(ts).digest("base64");
const signed = (body: string, ts: string, keys: { primary?: string; secondary?: string }) => ({
  "Content-Type": "application/json",
  "box-delivery-id": crypto.randomUUID(),
  "box-delivery-timestamp": ts,
  "box-signature-version": "1",
  "box-signature-algorithm": "HmacSHA256",
  ...(keys.primary ? { "box-signature-primary": sig(keys.primary, body, ts) } : {}),
  ...(keys.secondary ? { "box-signature-secondary": sig(keys.secondary, body, ts) } : {}),
});

bobbinTest("box.webhooks", "an upload is queued, a rotation's secondary key alone verifies, wrong keys are 401", {
  answers: {
    "captures/accepted.http": 202,
    "captures/secondary-only.http": 202,
    "captures/rejected.http": { status: 401, body: "" },
  },
});

describe("against an intake", () => {
  let t: TestIntake;
  beforeAll(async () => {
    t = await startIntake(
      `[bobbins.box]
bobbin = "box.webhooks"
secrets.secret = { file = "{{secret:box-primary}}" }
secrets.secret2 = { file = "{{secret:box-secondary}}" }
outputs = { "*" = "kit" }

${KIT_DESTINATION}`,
      { secrets: { "box-primary": PRIMARY, "box-secondary": SECONDARY }, clockAt: kit.now },
    );
  });
  afterAll(async () => {
    await t.stop();
  });

  const rows = (body: string) =>
    t.db.db
      .query("SELECT b.key, e.event_type FROM events e JOIN batches b ON b.id = e.batch_id WHERE e.payload = ?")
      .all(body) as { key: string; event_type: string }[];

  test("either key alone verifies; Box's retry, re-signed with a new timestamp, is a duplicate", async () => {
    const first = await t.post("/hooks/box", BODY, signed(BODY, "2024-12-31T16:00:00-08:00", { primary: PRIMARY }));
    expect([first.status, await first.text()]).toEqual([202, '{"status":"queued"}']);
    expect(rows(BODY)).toEqual([{ key: "file:1654321987", event_type: "FILE.UPLOADED" }]);
    const retry = await t.post("/hooks/box", BODY, signed(BODY, "2025-01-01T00:04:00Z", { secondary: SECONDARY }));
    expect([retry.status, await retry.text()]).toEqual([200, '{"status":"duplicate"}']);
  });

  test("a signature under the other key's header, a stale or unreadable timestamp: 401", async () => {
    const body = BODY.replace("8d3b5d2c", "7e2a4c1b");
    const swapped = {
      ...signed(body, "2025-01-01T00:00:00Z", {}),
      "box-signature-primary": sig(SECONDARY, body, "2025-01-01T00:00:00Z"),
      "box-signature-secondary": sig(PRIMARY, body, "2025-01-01T00:00:00Z"),
    };
    const a = await t.post("/hooks/box", body, swapped);
    expect([a.status, await a.text()]).toEqual([401, ""]);
    const stale = await t.post("/hooks/box", body, signed(body, "2024-12-31T23:49:59Z", { primary: PRIMARY }));
    expect(stale.status).toBe(401);
    const local = await t.post("/hooks/box", body, signed(body, "2025-01-01T00:00:00", { primary: PRIMARY }));
    expect(local.status).toBe(401);
    expect(rows(body)).toEqual([]);
  });
});
