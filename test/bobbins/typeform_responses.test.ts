// typeform.responses: a form's webhook (Typeform-Signature "sha256=" and the base64 HMAC-SHA256
// of the body), through a real `hookspool run`, and against an intake for what is Typeform's own:
// one batch per form, event_id as the dedup id, and the exact shape of the signature header.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHmac } from "node:crypto";
import type { TestIntake } from "../helpers/intake.ts";
import { bobbinTest, builtin, eventByPayload, kitIntake, kitOf } from "./catalogue.ts";

const bobbin = builtin("typeform.responses");
const SECRET = kitOf(bobbin).secrets.secret;
const mac = (key: string, body: string, encoding: "base64" | "hex" = "base64") =>
  createHmac("sha256", key).update(body).digest(encoding);

bobbinTest("typeform.responses", "a form response is queued and delivered, a bad signature is 401", {
  answers: {
    "captures/accepted.http": 202,
    "captures/rejected.http": { status: 401, body: "" },
  },
});

describe("against an intake", () => {
  let t: TestIntake;
  beforeAll(async () => {
    t = await kitIntake("typeform.responses");
  });
  afterAll(() => t.stop());

  const post = (body: string, signature = `sha256=${mac(SECRET, body)}`) =>
    t.post("/hooks/typeform", body, { "Content-Type": "application/json", "Typeform-Signature": signature });
  const stored = (body: string) =>
    eventByPayload<{ batch: number; key: string; event_type: string; dedup_id: string }>(
      t,
      "b.id AS batch, b.key, e.event_type, e.dedup_id",
      body,
    );
  const response = (eventId: string, formId: string, token: string) =>
    JSON.stringify({
      event_id: eventId,
      event_type: "form_response",
      form_response: {
        form_id: formId,
        token,
        submitted_at: "2026-08-22T09:50:00Z",
        answers: [{ type: "text", text: "Example", field: { id: "nM4kEx1aAbCd", type: "short_text", ref: "name" } }],
        ending: { id: "DefaultTyScreen", ref: "default_tys" },
      },
    });

  test("responses to one form share a batch under the form's id; another form is another batch", async () => {
    const a = response("01K3B8Q5XWKITEXAMPLE000101", "Kt3xAmPl", "kit0example0token0000000000000a1");
    const b = response("01K3B8Q5XWKITEXAMPLE000102", "Kt3xAmPl", "kit0example0token0000000000000b2");
    const c = response("01K3B8Q5XWKITEXAMPLE000103", "Ot4rF0rm", "kit0example0token0000000000000c3");
    for (const body of [a, b, c]) expect((await post(body)).status).toBe(202);
    expect(stored(a)).toMatchObject({
      key: "Kt3xAmPl",
      event_type: "form_response",
      dedup_id: "01K3B8Q5XWKITEXAMPLE000101",
    });
    expect(stored(b)?.batch).toBe(stored(a)?.batch);
    expect(stored(c)?.key).toBe("Ot4rF0rm");
    expect(stored(c)?.batch).not.toBe(stored(a)?.batch);
  });

  test("Typeform's retry of a delivery (the same event_id) is a duplicate", async () => {
    const body = response("01K3B8Q5XWKITEXAMPLE000201", "Kt3xAmPl", "kit0example0token0000000000000d4");
    const first = await post(body);
    expect([first.status, await first.text()]).toEqual([202, '{"status":"queued"}']);
    const retry = await post(body);
    expect([retry.status, await retry.text()]).toEqual([200, '{"status":"duplicate"}']);
  });

  test("the signature is base64 after sha256=: without the prefix, or as hex, it is refused", async () => {
    const body = response("01K3B8Q5XWKITEXAMPLE000301", "Kt3xAmPl", "kit0example0token0000000000000e5");
    const events = t.count("events");
    for (const signature of [mac(SECRET, body), `sha256=${mac(SECRET, body, "hex")}`, `SHA256=${mac(SECRET, body)}`]) {
      const res = await post(body, signature);
      expect([signature.slice(0, 7), res.status, await res.text()]).toEqual([signature.slice(0, 7), 401, ""]);
    }
    expect(t.count("events")).toBe(events);
  });
});
