// clickup.webhooks: ClickUp webhooks (X-Signature, the hex HMAC-SHA256 of the body under the
// webhook's secret), through a real `hookspool run`, and against an intake for what is ClickUp's
// own: one batch per task, list and other events keyed by their own id, and a retry (the same
// body again, ClickUp sending no delivery id) answered as a duplicate.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHmac } from "node:crypto";
import type { TestIntake } from "../helpers/intake.ts";
import { bobbinTest, builtin, capturedRequest, eventsByPayload, kitIntake, kitOf } from "./catalogue.ts";

const bobbin = builtin("clickup.webhooks");
const kit = kitOf(bobbin);
const SECRET = kit.secrets.secret;
const { body: BODY, headers: HEADERS } = capturedRequest(bobbin);
const signed = (body: string) => ({
  "Content-Type": "application/json",
  "X-Signature": createHmac("sha256", SECRET).update(body).digest("hex"),
});

bobbinTest("clickup.webhooks", "a task event is queued and delivered, a bad signature is 401", {
  answers: {
    "captures/accepted.http": 202,
    "captures/rejected.http": { status: 401, body: "" },
  },
});

describe("against an intake", () => {
  let t: TestIntake;
  beforeAll(async () => {
    t = await kitIntake("clickup.webhooks");
  });
  afterAll(() => t.stop());

  const rowOf = (body: string) => eventsByPayload<{ key: string; event_type: string }>(t, "b.key, e.event_type", body);

  test("the accepted capture is stored under the task and its event; ClickUp's retry is a duplicate", async () => {
    const first = await t.post("/hooks/clickup", BODY, HEADERS);
    expect([first.status, await first.text()]).toEqual([202, '{"status":"queued"}']);
    expect(rowOf(BODY)).toEqual([{ key: "86b2xq7mc", event_type: "taskStatusUpdated" }]);
    const retry = await t.post("/hooks/clickup", BODY, HEADERS);
    expect([retry.status, await retry.text()]).toEqual([200, '{"status":"duplicate"}']);
    expect(rowOf(BODY)).toHaveLength(1);
  });

  test("a list event is keyed by its list; an event with no known id is quarantined", async () => {
    const list = JSON.stringify({
      event: "listCreated",
      list_id: "162641234",
      webhook_id: "7fa3ec74-69a8-4530-a251-8a13730bd204",
    });
    const res = await t.post("/hooks/clickup", list, signed(list));
    expect([res.status, await res.text()]).toEqual([202, '{"status":"queued"}']);
    expect(rowOf(list)).toEqual([{ key: "162641234", event_type: "listCreated" }]);
    const odd = JSON.stringify({ event: "docCreated", doc_id: "abc", webhook_id: "7fa3ec74" });
    const q = await t.post("/hooks/clickup", odd, signed(odd));
    expect([q.status, await q.text()]).toEqual([202, '{"status":"quarantined"}']);
  });

  test("a signature of another body, or with a sha256= prefix, is 401", async () => {
    const tampered = BODY.replace('"in progress"', '"complete"');
    const res = await t.post("/hooks/clickup", tampered, HEADERS);
    expect([res.status, await res.text()]).toEqual([401, ""]);
    const prefixed = await t.post("/hooks/clickup", BODY, {
      ...HEADERS,
      "X-Signature": `sha256=${HEADERS["X-Signature"]}`,
    });
    expect([prefixed.status, await prefixed.text()]).toEqual([401, ""]);
  });
});
