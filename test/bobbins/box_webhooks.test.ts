// box.webhooks: Box V2 webhooks (box-signature-primary and box-signature-secondary, the base64
// HMAC-SHA256 of the body then box-delivery-timestamp under the app's two keys), through a real
// `hookspool run`, and against an intake for what is Box's own: either key alone verifies, a
// retry (a new box-delivery-id and timestamp, the same body id) is a duplicate, and the RFC 3339
// timestamp is held to 10 minutes. box-node-sdk, Box's own SDK, verifies the signed captures at the
// kit's time and refuses the rejected one; what its computeWebhookSignature signs under one key
// alone is queued; where it is laxer or stricter than the bobbin, the test says on what.
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, setSystemTime, test } from "bun:test";
import { computeWebhookSignature } from "box-node-sdk/internal";
import { WebhooksManager } from "box-node-sdk/managers";
import { createHmac } from "node:crypto";
import type { TestIntake } from "../helpers/intake.ts";
import { bobbinTest, builtin, capturedRequest, eventsByPayload, kitIntake, kitOf } from "./catalogue.ts";

// The preload's default timeout reaches only the first file of a serial `bun test`; this file's
// first test runs a real `hookspool run`, which can take more than bun's own 5 s under load.
setDefaultTimeout(20_000);

const bobbin = builtin("box.webhooks");
const kit = kitOf(bobbin);
const PRIMARY = kit.secrets.secret;
const SECONDARY = kit.secrets.secret2;
const NOW = kit.now ?? 0;
const { body: BODY } = capturedRequest(bobbin);
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

const rowsOf = (t: TestIntake, body: string) =>
  eventsByPayload<{ key: string; event_type: string }>(t, "b.key, e.event_type", body);

describe("against an intake", () => {
  let t: TestIntake;
  beforeAll(async () => {
    t = await kitIntake("box.webhooks");
  });
  afterAll(() => t.stop());

  const rows = (body: string) => rowsOf(t, body);

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

/** A capture's body, and its headers by lowercase name (as box-node-sdk reads them), less the framing. */
function capture(file: string): { body: string; headers: Record<string, string> } {
  const { body, headers } = capturedRequest(bobbin, `captures/${file}`);
  return { body, headers: Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v] as const)) };
}

/** WebhooksManager.validateMessage, which reads the time from Date.now: the call runs with it set to `at`. */
async function validateAt(
  at: number,
  body: string,
  headers: Record<string, string>,
  primary: string,
  secondary?: string,
): Promise<boolean> {
  setSystemTime(new Date(at * 1000));
  try {
    return await WebhooksManager.validateMessage(body, headers, primary, { secondaryKey: secondary });
  } finally {
    setSystemTime();
  }
}

/** A delivery's headers as Box sends them, each signature header made by computeWebhookSignature under its key. */
async function sdkSigned(body: string, ts: string, keys: { primary?: string; secondary?: string }) {
  const base: Record<string, string> = {
    "content-type": "application/json",
    "box-delivery-id": crypto.randomUUID(),
    "box-delivery-timestamp": ts,
    "box-signature-version": "1",
    "box-signature-algorithm": "HmacSHA256",
  };
  const out = { ...base };
  for (const [header, key] of [
    ["box-signature-primary", keys.primary],
    ["box-signature-secondary", keys.secondary],
  ] as const) {
    if (key === undefined) continue;
    const signature = await computeWebhookSignature(body, base, key);
    if (signature === null) throw new Error("computeWebhookSignature signed nothing");
    out[header] = signature;
  }
  return out;
}

const event = (id: string, trigger: string, source: object) =>
  JSON.stringify({
    type: "webhook_event",
    id,
    created_at: "2024-12-31T15:59:58-08:00",
    trigger,
    webhook: { id: "753795", type: "webhook" },
    created_by: { type: "user", id: "20304050" },
    source,
    additional_info: [],
  });

describe("box-node-sdk", () => {
  const TS = capture("accepted.http").headers["box-delivery-timestamp"];
  const RETIRED = "kit-test-secret-box-retired";
  let t: TestIntake;
  beforeAll(async () => {
    t = await kitIntake("box.webhooks");
  });
  afterAll(() => t.stop());

  test("validateMessage verifies the signed captures at kit.now under the kit's keys, not the rejected", async () => {
    expect(Date.parse(TS) / 1000).toBe(NOW);
    const up = capture("accepted.http");
    expect(await validateAt(NOW, up.body, up.headers, PRIMARY, SECONDARY)).toBe(true);
    expect(await validateAt(NOW, up.body, up.headers, PRIMARY)).toBe(true);
    expect(await validateAt(NOW, up.body, up.headers, RETIRED, SECONDARY)).toBe(true);
    const renamed = capture("secondary-only.http");
    expect(await validateAt(NOW, renamed.body, renamed.headers, PRIMARY, SECONDARY)).toBe(true);
    expect(await validateAt(NOW, renamed.body, renamed.headers, PRIMARY)).toBe(false);
    const rejected = capture("rejected.http");
    expect(await validateAt(NOW, rejected.body, rejected.headers, PRIMARY, SECONDARY)).toBe(false);
    // Its window ends where the bobbin's does: 600 s old passes, 601 s does not.
    expect(await validateAt(NOW + 600, up.body, up.headers, PRIMARY, SECONDARY)).toBe(true);
    expect(await validateAt(NOW + 601, up.body, up.headers, PRIMARY, SECONDARY)).toBe(false);
  });

  test("what computeWebhookSignature signs under the primary alone, or the secondary alone, is queued", async () => {
    const moved = event("b7c1d9e3-2a4f-4c6e-8b0d-1f3a5c7e9b21", "FILE.MOVED", {
      id: "1654321989",
      type: "file",
      name: "plan.pdf",
      parent: { type: "folder", id: "240112233" },
    });
    const primaryOnly = await sdkSigned(moved, TS, { primary: PRIMARY });
    expect(await validateAt(NOW, moved, primaryOnly, PRIMARY, SECONDARY)).toBe(true);
    expect(await validateAt(NOW, moved, primaryOnly, RETIRED, SECONDARY)).toBe(false);
    const a = await t.post("/hooks/box", moved, primaryOnly);
    expect([a.status, await a.text()]).toEqual([202, '{"status":"queued"}']);
    expect(rowsOf(t, moved)).toEqual([{ key: "file:1654321989", event_type: "FILE.MOVED" }]);

    const created = event("c8d2e0f4-3b5a-4d7f-9c1e-2a4b6d8f0c32", "FOLDER.CREATED", {
      id: "240112244",
      type: "folder",
      name: "Q1",
      parent: { type: "folder", id: "240112233" },
    });
    const secondaryOnly = await sdkSigned(created, TS, { primary: RETIRED, secondary: SECONDARY });
    expect(await validateAt(NOW, created, secondaryOnly, PRIMARY, SECONDARY)).toBe(true);
    expect(await validateAt(NOW, created, secondaryOnly, PRIMARY)).toBe(false);
    const b = await t.post("/hooks/box", created, secondaryOnly);
    expect([b.status, await b.text()]).toEqual([202, '{"status":"queued"}']);
    expect(rowsOf(t, created)).toEqual([{ key: "folder:240112244", event_type: "FOLDER.CREATED" }]);
  });

  test("escapeBody: one signature for a body as Box writes it; a re-serialized one passes the SDK only", async () => {
    // Box writes JSON as PHP does by default (box-node-sdk's note on jsonStringifyWithEscapedUnicode):
    // non-ASCII as \uXXXX, "/" as "\/". On those bytes the escaped variant changes nothing.
    const wire =
      '{"type":"webhook_event","id":"d9e3f1a5-4c6b-4e8a-8d2f-3b5c7e9a1d43","created_at":"2024-12-31T15:59:58-08:00",' +
      '"trigger":"SHARED_LINK.CREATED","webhook":{"id":"753795","type":"webhook"},"source":{"id":"1654321990",' +
      '"type":"file","name":"\\u30b9\\u30af\\u30ea\\u30fc\\u30f3.png","shared_link":{"url":"https:\\/\\/app.box.com' +
      '\\/s\\/kit0example"}},"additional_info":[]}';
    const headers = await sdkSigned(wire, TS, { primary: PRIMARY, secondary: SECONDARY });
    expect(await computeWebhookSignature(wire, headers, PRIMARY, true)).toBe(headers["box-signature-primary"]);
    const a = await t.post("/hooks/box", wire, headers);
    expect([a.status, await a.text()]).toEqual([202, '{"status":"queued"}']);
    expect(rowsOf(t, wire)).toEqual([{ key: "file:1654321990", event_type: "SHARED_LINK.CREATED" }]);
    // The escaped variant is there for a body parsed and re-serialized before the check (UTF-8,
    // plain "/"): the SDK rebuilds Box's bytes from it. The intake checks the bytes it received,
    // and those bytes are not what Box signed.
    const reserialized = JSON.stringify(JSON.parse(wire));
    expect(reserialized).not.toBe(wire);
    expect(await validateAt(NOW, reserialized, headers, PRIMARY, SECONDARY)).toBe(true);
    const b = await t.post("/hooks/box", reserialized, headers);
    expect([b.status, await b.text()]).toEqual([401, ""]);
  });

  test("a timestamp ahead of the clock the SDK refuses is queued; the version labels are the SDK's check", async () => {
    // Box's docs hold the timestamp to "not older than ten minutes"; the SDK refuses any time
    // ahead of its clock, so Box's clock a minute ahead of the host's fails there, not here.
    const ahead = event("e0f4a2b6-5d7c-4f9b-9e3a-4c6d8f0b2e54", "FILE.TRASHED", { id: "1654321991", type: "file" });
    const aheadHeaders = await sdkSigned(ahead, "2024-12-31T16:01:00-08:00", {
      primary: PRIMARY,
      secondary: SECONDARY,
    });
    expect(await validateAt(NOW, ahead, aheadHeaders, PRIMARY, SECONDARY)).toBe(false);
    expect(await validateAt(NOW + 60, ahead, aheadHeaders, PRIMARY, SECONDARY)).toBe(true);
    const a = await t.post("/hooks/box", ahead, aheadHeaders);
    expect([a.status, await a.text()]).toEqual([202, '{"status":"queued"}']);
    // Box always sends version 1 and HmacSHA256; the SDK signs and verifies nothing labelled
    // otherwise, while the bobbin reads only the signature, so a good one under another label passes.
    const relabelled = event("f1a5b3c7-6e8d-4a0c-8f4b-5d7e9a1c3f65", "FILE.RESTORED", {
      id: "1654321992",
      type: "file",
    });
    const v2 = { ...(await sdkSigned(relabelled, TS, { primary: PRIMARY })), "box-signature-version": "2" };
    expect(await computeWebhookSignature(relabelled, v2, PRIMARY)).toBeNull();
    expect(await validateAt(NOW, relabelled, v2, PRIMARY, SECONDARY)).toBe(false);
    const b = await t.post("/hooks/box", relabelled, v2);
    expect([b.status, await b.text()]).toEqual([202, '{"status":"queued"}']);
  });
});
