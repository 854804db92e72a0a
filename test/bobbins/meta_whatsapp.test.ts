// meta.whatsapp: WhatsApp Cloud API webhooks (X-Hub-Signature-256, "sha256=" and the hex
// HMAC-SHA256 of the body under the App Secret), with Meta's GET verify handshake, through a real
// `hookspool run`, and against an intake for what is Meta's own: the business number and the
// customer as key, the message id as dedup id (a status has none: it shares its message's id),
// a batched request kept whole, and the handshake answered only to the verify token.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHmac } from "node:crypto";
import type { TestIntake } from "../helpers/intake.ts";
import { bobbinTest, builtin, capturedRequest, eventsByPayload, kitIntake, kitOf } from "./catalogue.ts";

const bobbin = builtin("meta.whatsapp");
const kit = kitOf(bobbin);
const SECRET = kit.secrets.secret;
const VERIFY = kit.secrets.verify_token;
const accepted = capturedRequest(bobbin, "captures/accepted.http");
const delivered = capturedRequest(bobbin, "captures/status.http");
const signed = (body: string, secret = SECRET) => ({
  "Content-Type": "application/json",
  "X-Hub-Signature-256": `sha256=${createHmac("sha256", secret).update(body).digest("hex")}`,
});

bobbinTest(
  "meta.whatsapp",
  "a message and a status are queued and delivered, the GET handshake is answered, a bad signature is 401",
  {
    answers: {
      "captures/accepted.http": 202,
      "captures/rejected.http": { status: 401, body: "" },
      "captures/status.http": 202,
      "captures/verify-wrong-token.http": { method: "GET", status: 403, body: "" },
      "captures/verify.http": { method: "GET", status: 200, body: "1158201444" },
    },
  },
);

describe("against an intake", () => {
  let t: TestIntake;
  beforeAll(async () => {
    t = await kitIntake("meta.whatsapp");
  });
  afterAll(() => t.stop());

  const rowOf = (body: string) =>
    eventsByPayload<{ key: string; event_type: string; dedup_id: string | null; payload: string }>(
      t,
      "b.key, e.event_type, e.dedup_id, e.payload",
      body,
    );
  const batchOf = (body: string) => eventsByPayload<{ batch_id: number }>(t, "e.batch_id", body)[0].batch_id;
  const get = (query: string) => fetch(`${t.url}/hooks/whatsapp?${query}`);

  test(
    "the accepted message is stored under phone_number_id:wa_id, as messages, with its wamid; " +
      "Meta's resend is a duplicate",
    async () => {
      const first = await t.post("/hooks/whatsapp", accepted.body, accepted.headers);
      expect([first.status, await first.text()]).toEqual([202, '{"status":"queued"}']);
      const [row] = rowOf(accepted.body);
      expect({ key: row.key, event_type: row.event_type, dedup_id: row.dedup_id }).toEqual({
        key: "105550000000001:15555550142",
        event_type: "messages",
        dedup_id: JSON.parse(accepted.body).entry[0].changes[0].value.messages[0].id,
      });
      const again = await t.post("/hooks/whatsapp", accepted.body, accepted.headers);
      expect([again.status, await again.text()]).toEqual([200, '{"status":"duplicate"}']);
      expect(rowOf(accepted.body)).toHaveLength(1);
    },
  );

  test(
    "a status joins its customer's batch; delivered and then read for the same message are two " +
      "events, not a duplicate",
    async () => {
      const r1 = await t.post("/hooks/whatsapp", delivered.body, delivered.headers);
      expect([r1.status, await r1.text()]).toEqual([202, '{"status":"queued"}']);
      const read = delivered.body.replace(
        '"status":"delivered","timestamp":"1778162460"',
        '"status":"read","timestamp":"1778162520"',
      );
      expect(read).not.toBe(delivered.body);
      const r2 = await t.post("/hooks/whatsapp", read, signed(read));
      expect([r2.status, await r2.text()]).toEqual([202, '{"status":"queued"}']);
      expect([...rowOf(delivered.body), ...rowOf(read)].map((r) => [r.key, r.event_type, r.dedup_id])).toEqual([
        ["105550000000001:15555550142", "messages", null],
        ["105550000000001:15555550142", "messages", null],
      ]);
      expect(batchOf(read)).toBe(batchOf(accepted.body));
    },
  );

  test("a request that batches two entries is one event, kept whole, keyed by the first", async () => {
    const one = JSON.parse(accepted.body);
    const second = structuredClone(one.entry[0]);
    second.changes[0].value.contacts[0].wa_id = "15555550199";
    second.changes[0].value.messages[0].from = "15555550199";
    second.changes[0].value.messages[0].id = "wamid.kit0test0second0customer";
    const body = JSON.stringify({
      object: one.object,
      entry: [
        {
          ...one.entry[0],
          changes: [
            {
              ...one.entry[0].changes[0],
              value: {
                ...one.entry[0].changes[0].value,
                messages: [{ ...one.entry[0].changes[0].value.messages[0], id: "wamid.kit0test0batched0first" }],
              },
            },
          ],
        },
        second,
      ],
    });
    const res = await t.post("/hooks/whatsapp", body, signed(body));
    expect([res.status, await res.text()]).toEqual([202, '{"status":"queued"}']);
    const rows = rowOf(body);
    expect(rows.map((r) => [r.key, r.dedup_id])).toEqual([
      ["105550000000001:15555550142", "wamid.kit0test0batched0first"],
    ]);
    expect(
      JSON.parse(rows[0].payload).entry.map(
        (e: { changes: { value: { messages: { id: string }[] } }[] }) => e.changes[0].value.messages[0].id,
      ),
    ).toEqual(["wamid.kit0test0batched0first", "wamid.kit0test0second0customer"]);
  });

  test("an account field without a phone number is keyed by the business account and the field", async () => {
    const body = JSON.stringify({
      object: "whatsapp_business_account",
      entry: [
        {
          id: "105550000000009",
          time: 1778162600,
          changes: [{ value: { phone_number: "15555550100", event: "VERIFIED_ACCOUNT" }, field: "account_update" }],
        },
      ],
    });
    const res = await t.post("/hooks/whatsapp", body, signed(body));
    expect([res.status, await res.text()]).toEqual([202, '{"status":"queued"}']);
    expect(rowOf(body).map((r) => [r.key, r.event_type, r.dedup_id])).toEqual([
      ["105550000000009:account_update", "account_update", null],
    ]);
  });

  test(
    "the GET handshake: the challenge for the verify token only, 403 with nothing echoed " +
      "otherwise, nothing stored",
    async () => {
      const events = t.count("events");
      const good = await get(`hub.mode=subscribe&hub.challenge=1158201444&hub.verify_token=${VERIFY}`);
      expect([good.status, await good.text()]).toEqual([200, "1158201444"]);
      for (const q of [
        `hub.mode=subscribe&hub.challenge=1158201444&hub.verify_token=${SECRET}`,
        "hub.mode=subscribe&hub.challenge=1158201444",
        `hub.mode=unsubscribe&hub.challenge=1158201444&hub.verify_token=${VERIFY}`,
      ]) {
        const r = await get(q);
        expect({ q, status: r.status, body: await r.text() }).toEqual({ q, status: 403, body: "" });
      }
      expect(t.count("events")).toBe(events);
    },
  );

  test("a POST under the verify token, or unprefixed, or with a changed body is an empty 401", async () => {
    const events = t.count("events");
    const hex = createHmac("sha256", SECRET).update(accepted.body).digest("hex");
    const refused: Record<string, string>[] = [
      signed(accepted.body, VERIFY),
      { ...accepted.headers, "X-Hub-Signature-256": hex },
      { "Content-Type": "application/json" },
    ];
    for (const headers of refused) {
      const r = await t.post("/hooks/whatsapp", accepted.body, headers);
      expect([r.status, await r.text()]).toEqual([401, ""]);
    }
    const changed = accepted.body.replace("order 1042", "order 1043");
    const r = await t.post("/hooks/whatsapp", changed, accepted.headers);
    expect([r.status, await r.text()]).toEqual([401, ""]);
    expect(t.count("events")).toBe(events);
  });
});
