// shopify.shop: a Shopify app's HTTPS webhook subscriptions (X-Shopify-Hmac-Sha256, the base64
// HMAC-SHA256 of the body under the app's client secret), through a real `hookspool run`, and
// against an intake for what is Shopify's own: the shop-and-resource key and its fallbacks, and
// X-Shopify-Webhook-Id as the dedup id across Shopify's retries.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHmac } from "node:crypto";
import type { TestIntake } from "../helpers/intake.ts";
import { bobbinTest, builtin, eventByPayload, kitIntake, kitOf } from "./catalogue.ts";

const bobbin = builtin("shopify.shop");
const SECRET = kitOf(bobbin).secrets.secret;
const SHOP = "kit-example-shop.myshopify.com";
const hmac = (key: string, body: string) => createHmac("sha256", key).update(body).digest("base64");

bobbinTest("shopify.shop", "an order and a compliance request are queued and delivered, a bad signature is 401", {
  answers: {
    "captures/accepted.http": 202,
    "captures/customers-redact.http": 202,
    "captures/rejected.http": { status: 401, body: "" },
  },
});

describe("against an intake", () => {
  let t: TestIntake;
  beforeAll(async () => {
    t = await kitIntake("shopify.shop");
  });
  afterAll(() => t.stop());

  const post = (topic: string, body: string, webhookId: string, eventId: string, key = SECRET) =>
    t.post("/hooks/shopify", body, {
      "Content-Type": "application/json",
      "X-Shopify-Topic": topic,
      "X-Shopify-Hmac-Sha256": hmac(key, body),
      "X-Shopify-Shop-Domain": SHOP,
      "X-Shopify-API-Version": "2025-07",
      "X-Shopify-Webhook-Id": webhookId,
      "X-Shopify-Event-Id": eventId,
      "X-Shopify-Triggered-At": "2026-08-22T12:05:11.811473302Z",
    });
  const stored = (body: string) =>
    eventByPayload<{ batch: number; key: string; event_type: string; dedup_id: string }>(
      t,
      "b.id AS batch, b.key, e.event_type, e.dedup_id",
      body,
    );
  // Shopify's JSON escapes "/" as "\/"; the key is read from the parsed payload.
  const order = (id: number, status: string) =>
    JSON.stringify({
      id,
      admin_graphql_api_id: `gid://shopify/Order/${id}`,
      financial_status: status,
      name: "#1043",
      test: false,
    }).replaceAll("/", "\\/");

  test("the key is the shop and the order's typed id; the order's next topic joins its batch", async () => {
    const created = order(6100000000202, "pending");
    const paid = order(6100000000202, "paid");
    expect(
      (
        await post(
          "orders/create",
          created,
          "0d2c2a7e-0001-4c8a-9e6f-0b1a2c3d4e51",
          "1a6b5c4d-0001-4a1b-8c9d-0e1f2a3b4c52",
        )
      ).status,
    ).toBe(202);
    expect(
      (await post("orders/paid", paid, "0d2c2a7e-0002-4c8a-9e6f-0b1a2c3d4e51", "1a6b5c4d-0002-4a1b-8c9d-0e1f2a3b4c52"))
        .status,
    ).toBe(202);
    const a = stored(created);
    const b = stored(paid);
    expect(a).toMatchObject({
      key: `${SHOP}:gid://shopify/Order/6100000000202`,
      event_type: "orders/create",
      dedup_id: "0d2c2a7e-0001-4c8a-9e6f-0b1a2c3d4e51",
    });
    expect(b).toMatchObject({ key: a?.key, event_type: "orders/paid" });
    expect(b?.batch).toBe(a?.batch);
  });

  test("Shopify's retry (the original payload, the same X-Shopify-Webhook-Id) is a duplicate", async () => {
    const body = order(6100000000303, "paid");
    const first = await post(
      "orders/create",
      body,
      "0d2c2a7e-0003-4c8a-9e6f-0b1a2c3d4e51",
      "1a6b5c4d-0003-4a1b-8c9d-0e1f2a3b4c52",
    );
    expect([first.status, await first.text()]).toEqual([202, '{"status":"queued"}']);
    const retry = await post(
      "orders/create",
      body,
      "0d2c2a7e-0003-4c8a-9e6f-0b1a2c3d4e51",
      "1a6b5c4d-0003-4a1b-8c9d-0e1f2a3b4c52",
    );
    expect([retry.status, await retry.text()]).toEqual([200, '{"status":"duplicate"}']);
    // A second subscription to the same topic is another delivery of the same event: another webhook id.
    const second = await post(
      "orders/create",
      body,
      "0d2c2a7e-0004-4c8a-9e6f-0b1a2c3d4e51",
      "1a6b5c4d-0003-4a1b-8c9d-0e1f2a3b4c52",
    );
    expect([second.status, await second.text()]).toEqual([202, '{"status":"queued"}']);
  });

  test("without a typed id the key falls back to the numeric id, then to the shop", async () => {
    const uninstalled = JSON.stringify({
      id: 72000000001,
      name: "Kit Example Shop",
      domain: "shop.example.com",
      myshopify_domain: SHOP,
    });
    const dataRequest = JSON.stringify({
      shop_id: 72000000001,
      shop_domain: SHOP,
      orders_requested: [6100000000101],
      customer: { id: 7200000000201, email: "buyer@example.com", phone: null },
      data_request: { id: 9999 },
    });
    expect(
      (
        await post(
          "app/uninstalled",
          uninstalled,
          "0d2c2a7e-0005-4c8a-9e6f-0b1a2c3d4e51",
          "1a6b5c4d-0005-4a1b-8c9d-0e1f2a3b4c52",
        )
      ).status,
    ).toBe(202);
    expect(
      (
        await post(
          "customers/data_request",
          dataRequest,
          "0d2c2a7e-0006-4c8a-9e6f-0b1a2c3d4e51",
          "1a6b5c4d-0006-4a1b-8c9d-0e1f2a3b4c52",
        )
      ).status,
    ).toBe(202);
    expect(stored(uninstalled)?.key).toBe(`${SHOP}:72000000001`);
    expect(stored(dataRequest)?.key).toBe(`${SHOP}:shop`);
  });

  test("a compliance webhook with a bad HMAC gets 401, as Shopify requires of an app", async () => {
    const body = JSON.stringify({ shop_id: 72000000001, shop_domain: SHOP });
    const events = t.count("events");
    const res = await post(
      "shop/redact",
      body,
      "0d2c2a7e-0007-4c8a-9e6f-0b1a2c3d4e51",
      "1a6b5c4d-0007-4a1b-8c9d-0e1f2a3b4c52",
      "kit-test-other-app-secret",
    );
    expect([res.status, await res.text()]).toEqual([401, ""]);
    expect(t.count("events")).toBe(events);
  });
});
