// coinbase.commerce: Coinbase Commerce's webhooks (X-CC-Webhook-Signature, the hex HMAC-SHA256 of
// the body under the shared secret), through a real `hookspool run`, and against an intake for what
// is Commerce's own: one batch per charge, event.id as dedup id across attempts whose envelope
// differs.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHmac } from "node:crypto";
import { capturesOf } from "../../src/bobbin/captures.ts";
import { startIntake, type TestIntake } from "../helpers/intake.ts";
import { bobbinTest, builtin, KIT_DESTINATION, kitOf } from "./catalogue.ts";

const bobbin = builtin("coinbase.commerce");
const kit = kitOf(bobbin);
const SECRET = kit.secrets.secret;
const accepted = capturesOf(bobbin.files()).find((c) => c.file === "captures/accepted.http");
if (!accepted) throw new Error("no accepted capture");
const BODY = new TextDecoder().decode(accepted.request.body);
/** The capture's headers as Commerce sent them, less the framing fetch redoes. */
const HEADERS = Object.fromEntries(
  accepted.request.headers.filter(([k]) => !["host", "content-length"].includes(k.toLowerCase())),
);
const sign = (body: string) => createHmac("sha256", SECRET).update(body).digest("hex");
const signed = (body: string) => ({ ...HEADERS, "X-CC-Webhook-Signature": sign(body) });

bobbinTest("coinbase.commerce", "a charge event is queued and delivered, a bad signature is 401", {
  answers: {
    "captures/accepted.http": 202,
    "captures/rejected.http": { status: 401, body: "" },
  },
});

describe("against an intake", () => {
  let t: TestIntake;
  beforeAll(async () => {
    t = await startIntake(
      `[bobbins.coinbase]
bobbin = "coinbase.commerce"
secrets.secret = { file = "{{secret:coinbase}}" }
outputs = { "*" = "kit" }

${KIT_DESTINATION}`,
      { secrets: { coinbase: SECRET } },
    );
  });
  afterAll(async () => {
    await t.stop();
  });

  const rowOf = (body: string) =>
    t.db.db
      .query(
        "SELECT b.key, e.event_type, e.dedup_id, b.id AS batch FROM events e JOIN batches b ON b.id = e.batch_id " +
          "WHERE e.payload = ? ORDER BY e.id",
      )
      .all(body) as { key: string; event_type: string; dedup_id: string; batch: number }[];

  test("the accepted capture is stored under the charge id, the event type and the event id", async () => {
    const res = await t.post("/hooks/coinbase", BODY, HEADERS);
    expect([res.status, await res.text()]).toEqual([202, '{"status":"queued"}']);
    expect(rowOf(BODY).map(({ batch: _, ...r }) => r)).toEqual([
      {
        key: "2aee9dd1-67b8-43ef-8dfe-977959850f27",
        event_type: "charge:confirmed",
        dedup_id: "9f6c2a1e-3b4d-4e5f-8a7b-6c5d4e3f2a1b",
      },
    ]);
  });

  test("a later attempt of the same event (another attempt_number, signed afresh) is a duplicate", async () => {
    const retry = BODY.replace('"attempt_number":1', '"attempt_number":2').replace(
      '"scheduled_for":"2026-03-10T14:33:41Z"',
      '"scheduled_for":"2026-03-10T14:35:41Z"',
    );
    expect(retry).not.toBe(BODY);
    const res = await t.post("/hooks/coinbase", retry, signed(retry));
    expect([res.status, await res.text()]).toEqual([200, '{"status":"duplicate"}']);
  });

  test("another event of the same charge joins its batch", async () => {
    const failed = BODY.replace('"type":"charge:confirmed"', '"type":"charge:failed"').replace(
      "9f6c2a1e-3b4d-4e5f-8a7b-6c5d4e3f2a1b",
      "0b1c2d3e-4f5a-4b6c-8d7e-9f0a1b2c3d4e",
    );
    const res = await t.post("/hooks/coinbase", failed, signed(failed));
    expect([res.status, await res.text()]).toEqual([202, '{"status":"queued"}']);
    const [row] = rowOf(failed);
    expect(row.event_type).toBe("charge:failed");
    expect(row.batch).toBe(rowOf(BODY)[0].batch);
  });

  test("a signature of another body, or with a sha256= prefix, is 401", async () => {
    const tampered = BODY.replace('"amount":"25.00"', '"amount":"2500.00"');
    const res = await t.post("/hooks/coinbase", tampered, HEADERS);
    expect([res.status, await res.text()]).toEqual([401, ""]);
    const prefixed = await t.post("/hooks/coinbase", BODY, {
      ...HEADERS,
      "X-CC-Webhook-Signature": `sha256=${sign(BODY)}`,
    });
    expect([prefixed.status, await prefixed.text()]).toEqual([401, ""]);
  });
});
