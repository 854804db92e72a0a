// coinbase.commerce: Coinbase Commerce's webhooks (X-CC-Webhook-Signature, the hex HMAC-SHA256 of
// the body under the shared secret), through a real `hookspool run`, and against an intake for what
// is Commerce's own: one batch per charge, event.id as dedup id across attempts whose envelope
// differs. coinbase-commerce-node, Coinbase's own SDK (unmaintained upstream), accepts the signed
// capture and what this test signs, and refuses the rejected one. The test signs with node:crypto,
// as the SDK's source does, so the SDK judges signatures it did not make.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
// The package's root, as its README imports it: lib/Webhook.js alone is no lighter, since its Event
// resource loads the API client and with it `request` (nothing is sent; only Webhook is used).
import { Webhook } from "coinbase-commerce-node";
import { createHmac } from "node:crypto";
import { capturesOf } from "../../src/bobbin/captures.ts";
import type { TestIntake } from "../helpers/intake.ts";
import { bobbinTest, builtin, capturedRequest, eventsByPayload, kitIntake, kitOf } from "./catalogue.ts";

const bobbin = builtin("coinbase.commerce");
const kit = kitOf(bobbin);
const SECRET = kit.secrets.secret;
const captures = capturesOf(bobbin.files());
const { body: BODY, headers: HEADERS } = capturedRequest(bobbin);
const sign = (body: string, secret = SECRET) => createHmac("sha256", secret).update(body).digest("hex");
const signed = (body: string) => ({ ...HEADERS, "X-CC-Webhook-Signature": sign(body) });
/** The accepted capture's event with another id, type and charge: a new event of a new charge. */
const another = (event: string, type: string, charge: string) =>
  BODY.replace("9f6c2a1e-3b4d-4e5f-8a7b-6c5d4e3f2a1b", event)
    .replace('"type":"charge:confirmed"', `"type":"${type}"`)
    .replaceAll("2aee9dd1-67b8-43ef-8dfe-977959850f27", charge);

bobbinTest("coinbase.commerce", "a charge event is queued and delivered, a bad signature is 401", {
  answers: {
    "captures/accepted.http": 202,
    "captures/rejected.http": { status: 401, body: "" },
  },
});

describe("coinbase-commerce-node", () => {
  test("verifyEventBody returns the accepted capture's event under the kit's secret; the rejected one throws", () => {
    const signature = (file: string) => {
      const c = captures.find((x) => x.file === `captures/${file}`);
      const header = c?.request.headers.find(([k]) => k.toLowerCase() === "x-cc-webhook-signature");
      if (!c || !header) throw new Error(`no signed capture ${file}`);
      return [new TextDecoder().decode(c.request.body), header[1]] as const;
    };
    const [body, good] = signature("accepted.http");
    const event = Webhook.verifyEventBody(body, good, SECRET);
    expect([event.id, event.type, event.data.id]).toEqual([
      "9f6c2a1e-3b4d-4e5f-8a7b-6c5d4e3f2a1b",
      "charge:confirmed",
      "2aee9dd1-67b8-43ef-8dfe-977959850f27",
    ]);
    expect({ ...event }).toEqual(JSON.parse(body).event);
    const [other, bad] = signature("rejected.http");
    expect(() => Webhook.verifySigHeader(other, bad, SECRET)).toThrow("No signatures found matching");
    expect(() => Webhook.verifyEventBody(other, bad, SECRET)).toThrow("No signatures found matching");
  });
});

describe("against an intake", () => {
  let t: TestIntake;
  beforeAll(async () => {
    t = await kitIntake("coinbase.commerce");
  });
  afterAll(() => t.stop());

  const rowOf = (body: string) =>
    eventsByPayload<{ key: string; event_type: string; dedup_id: string; batch: number }>(
      t,
      "b.key, e.event_type, e.dedup_id, b.id AS batch",
      body,
    );

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

  test("a charge:created event that coinbase-commerce-node verifies is queued under its new charge", async () => {
    const created = another(
      "5e6f7a8b-9c0d-4e1f-8a2b-3c4d5e6f7a8b",
      "charge:created",
      "7c8d9e0f-1a2b-4c3d-9e4f-5a6b7c8d9e0f",
    );
    const headers = signed(created);
    expect(Webhook.verifyEventBody(created, headers["X-CC-Webhook-Signature"], SECRET).type).toBe("charge:created");
    const res = await t.post("/hooks/coinbase", created, headers);
    expect([res.status, await res.text()]).toEqual([202, '{"status":"queued"}']);
    expect(rowOf(created).map(({ batch: _, ...r }) => r)).toEqual([
      {
        key: "7c8d9e0f-1a2b-4c3d-9e4f-5a6b7c8d9e0f",
        event_type: "charge:created",
        dedup_id: "5e6f7a8b-9c0d-4e1f-8a2b-3c4d5e6f7a8b",
      },
    ]);
  });

  test("what the SDK refuses is 401: another body's signature, a sha256= prefix, another secret", async () => {
    const tampered = BODY.replace('"amount":"25.00"', '"amount":"2500.00"');
    const refused: [string, string][] = [
      [tampered, sign(BODY)],
      [BODY, `sha256=${sign(BODY)}`],
      [BODY, sign(BODY, "kit-test-secret-other")],
    ];
    for (const [body, signature] of refused) {
      expect(() => Webhook.verifySigHeader(body, signature, SECRET)).toThrow("No signatures found matching");
      const res = await t.post("/hooks/coinbase", body, { ...HEADERS, "X-CC-Webhook-Signature": signature });
      expect([res.status, await res.text()]).toEqual([401, ""]);
    }
  });

  test("a signed body with no event, which verifyEventBody refuses, is quarantined, not queued", async () => {
    const envelope = JSON.stringify({ id: "e4f3a2b1-c0d9-4e8f-9a7b-6c5d4e3f2a10", attempt_number: 1 });
    const signature = sign(envelope);
    expect(Webhook.verifySigHeader(envelope, signature, SECRET)).toBe(true);
    expect(() => Webhook.verifyEventBody(envelope, signature, SECRET)).toThrow("Invalid payload provided.");
    const res = await t.post("/hooks/coinbase", envelope, { ...HEADERS, "X-CC-Webhook-Signature": signature });
    expect([res.status, await res.text()]).toEqual([202, '{"status":"quarantined"}']);
    expect(rowOf(envelope)).toEqual([]);
  });

  test("an uppercase digest, which the SDK compares as text and refuses, is the same MAC and is queued", async () => {
    const pending = another(
      "6f7a8b9c-0d1e-4f2a-9b3c-4d5e6f7a8b9c",
      "charge:pending",
      "8d9e0f1a-2b3c-4d4e-8f5a-6b7c8d9e0f1a",
    );
    const upper = sign(pending).toUpperCase();
    expect(() => Webhook.verifySigHeader(pending, upper, SECRET)).toThrow("No signatures found matching");
    const res = await t.post("/hooks/coinbase", pending, { ...HEADERS, "X-CC-Webhook-Signature": upper });
    expect([res.status, await res.text()]).toEqual([202, '{"status":"queued"}']);
  });
});
