// square.webhooks: a Square webhook subscription (x-square-hmacsha256-signature, the base64
// HMAC-SHA256 under the subscription's signature key of the notification URL, then the body),
// through a real `hookspool run`, and against an intake for what is Square's own: the URL the
// signature covers (public_url and the query string as received), one batch per object, the body's
// event_id as dedup id. square, Square's own SDK, which verifies and never signs, accepts the signed
// capture and what this test signs for the notification URL, and refuses the rest.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHmac } from "node:crypto";
import { WebhooksHelper } from "square";
import { capturesOf } from "../../src/bobbin/captures.ts";
import type { TestIntake } from "../helpers/intake.ts";
import { bobbinTest, builtin, capturedRequest, eventsByPayload, kitIntake, kitOf } from "./catalogue.ts";

const bobbin = builtin("square.webhooks");
const kit = kitOf(bobbin);
const KEY = kit.secrets.secret;
const PUBLIC_URL = String(kit.instance.settings.public_url);
const captures = capturesOf(bobbin.files());
const { body: BODY, headers: HEADERS } = capturedRequest(bobbin);
/** What Square signs, as its docs say: notification URL + body, HMAC-SHA256 under the key, base64. */
const sign = (key: string, url: string, body: string) =>
  createHmac("sha256", key)
    .update(url + body)
    .digest("base64");
const SIGNATURE = "x-square-hmacsha256-signature";
const signed = (body: string, url = PUBLIC_URL, key = KEY) => ({
  "Content-Type": "application/json",
  [SIGNATURE]: sign(key, url, body),
});

/** Square's SDK's judgement of a notification: its body and signature, for the notification URL. */
const squareAccepts = (body: string, signature: string, url = PUBLIC_URL, key = KEY) =>
  WebhooksHelper.verifySignature({
    requestBody: body,
    signatureHeader: signature,
    signatureKey: key,
    notificationUrl: url,
  });

bobbinTest("square.webhooks", "a payment event is queued and delivered, a bad signature is 401", {
  answers: {
    "captures/accepted.http": 202,
    "captures/rejected.http": { status: 401, body: "" },
  },
});

test("the notification URL the signature covers is a setting each instance must give", () => {
  expect(bobbin.manifest.settings.public_url).toMatchObject({ type: "string", required: true });
});

describe("square", () => {
  test("verifySignature accepts the accepted capture for the kit's key and URL, not the rejected one", async () => {
    const signature = (file: string) => {
      const c = captures.find((x) => x.file === `captures/${file}`);
      const header = c?.request.headers.find(([k]) => k.toLowerCase() === SIGNATURE);
      if (!c || !header) throw new Error(`no signed capture ${file}`);
      return [new TextDecoder().decode(c.request.body), header[1]] as const;
    };
    const [body, good] = signature("accepted.http");
    expect(await squareAccepts(body, good)).toBe(true);
    expect(await squareAccepts(body, good, `${PUBLIC_URL}/`)).toBe(false);
    const [other, bad] = signature("rejected.http");
    expect(await squareAccepts(other, bad)).toBe(false);
  });
});

describe("against an intake", () => {
  let t: TestIntake;
  beforeAll(async () => {
    t = await kitIntake("square.webhooks");
  });
  afterAll(() => t.stop());

  const rowOf = (body: string) =>
    eventsByPayload<{ key: string; event_type: string; dedup_id: string }>(t, "b.key, e.event_type, e.dedup_id", body);
  const batchOf = (body: string) => eventsByPayload<{ batch_id: number }>(t, "e.batch_id", body)[0].batch_id;

  test(
    "the accepted capture is stored under the payment's id, its type and its event_id; the same " +
      "notification again is a duplicate",
    async () => {
      const first = await t.post("/hooks/square", BODY, HEADERS);
      expect([first.status, await first.text()]).toEqual([202, '{"status":"queued"}']);
      expect(rowOf(BODY)).toEqual([
        {
          key: "KkAkhdMsgzn59SM8A89WgKwekxLZY",
          event_type: "payment.updated",
          dedup_id: "6a8f5f28-54a1-4eb0-a98a-3111513fd4fc",
        },
      ]);
      const again = await t.post("/hooks/square", BODY, HEADERS);
      expect([again.status, await again.text()]).toEqual([200, '{"status":"duplicate"}']);
      expect(rowOf(BODY)).toHaveLength(1);
    },
  );

  test(
    "another event of the same payment joins its batch; an event with no object is keyed by its " + "seller",
    async () => {
      const created = BODY.replace(
        '"type":"payment.updated","event_id":"6a8f5f28-54a1-4eb0-a98a-3111513fd4fc"',
        '"type":"payment.created","event_id":"1b7e2c90-3d4f-4a6b-8c9d-0e1f2a3b4c5d"',
      );
      expect(await squareAccepts(created, signed(created)[SIGNATURE])).toBe(true);
      const res = await t.post("/hooks/square", created, signed(created));
      expect([res.status, await res.text()]).toEqual([202, '{"status":"queued"}']);
      expect(batchOf(created)).toBe(batchOf(BODY));
      const bare = JSON.stringify({
        merchant_id: "6SSW7HV8K2ST5",
        type: "oauth.authorization.revoked",
        event_id: "2c8f3d01-4e5a-4b7c-9d0e-1f2a3b4c5d6e",
        created_at: "2026-11-20T16:00:00Z",
        data: { type: "revocation", object: { revocation: { revoker_type: "MERCHANT" } } },
      });
      expect(await squareAccepts(bare, signed(bare)[SIGNATURE])).toBe(true);
      const revoked = await t.post("/hooks/square", bare, signed(bare));
      expect([revoked.status, await revoked.text()]).toEqual([202, '{"status":"queued"}']);
      expect(rowOf(bare)).toEqual([
        {
          key: "6SSW7HV8K2ST5",
          event_type: "oauth.authorization.revoked",
          dedup_id: "2c8f3d01-4e5a-4b7c-9d0e-1f2a3b4c5d6e",
        },
      ]);
    },
  );

  test(
    "the signature covers the query string as received and the notification URL exactly, as Square's SDK " +
      "judges it",
    async () => {
      const body = BODY.replace(
        '"event_id":"6a8f5f28-54a1-4eb0-a98a-3111513fd4fc"',
        '"event_id":"3d9a4e12-5f6b-4c8d-8e1f-2a3b4c5d6e7f"',
      );
      const query = `${PUBLIC_URL}?env=prod`;
      expect(await squareAccepts(body, signed(body, query)[SIGNATURE], query)).toBe(true);
      const withQuery = await t.post("/hooks/square?env=prod", body, signed(body, query));
      expect([withQuery.status, await withQuery.text()]).toEqual([202, '{"status":"queued"}']);
      expect(rowOf(body)).toHaveLength(1);
      // Each signed for another URL than the one called: the SDK, given the called one, refuses it.
      for (const [path, url] of [
        ["/hooks/square", `${PUBLIC_URL}/`],
        ["/hooks/square", PUBLIC_URL.replace("https:", "http:")],
        ["/hooks/square?env=other", query],
      ]) {
        const called = PUBLIC_URL + path.slice("/hooks/square".length);
        const judged = await squareAccepts(body, signed(body, url)[SIGNATURE], called);
        const res = await t.post(path, body, signed(body, url));
        expect([path, url, judged, res.status, await res.text()]).toEqual([path, url, false, 401, ""]);
      }
      const otherKey = signed(body, PUBLIC_URL, "kit-test-other-key-square");
      expect(await squareAccepts(body, otherKey[SIGNATURE])).toBe(false);
      const res = await t.post("/hooks/square", body, otherKey);
      expect([res.status, await res.text()]).toEqual([401, ""]);
    },
  );

  test("the same MAC as unpadded base64url, which the SDK refuses, is queued: the intake compares bytes", async () => {
    const body = BODY.replace(
      '"event_id":"6a8f5f28-54a1-4eb0-a98a-3111513fd4fc"',
      '"event_id":"4e0b5f23-6a7c-4d9e-9f2a-3b4c5d6e7f80"',
    );
    const std = sign(KEY, PUBLIC_URL, body);
    const url = Buffer.from(std, "base64").toString("base64url");
    expect(url).not.toBe(std);
    expect([await squareAccepts(body, std), await squareAccepts(body, url)]).toEqual([true, false]);
    const res = await t.post("/hooks/square", body, { ...signed(body), [SIGNATURE]: url });
    expect([res.status, await res.text()]).toEqual([202, '{"status":"queued"}']);
  });
});
