// mux.video: a Mux environment's webhooks (mux-signature, t=<unix>,v1=<hex HMAC-SHA256 of
// "<t>.<body>">), through a real `hookspool run`, and against an intake on the kit's clock for what
// is Mux's own: one batch per object, the event id as dedup id across a retry whose attempts list
// grew, and the 300 s window either side. @mux/mux-node, Mux's own SDK, which verifies and never
// signs, accepts the signed capture and what this test signs at the kit's time, and refuses the rest.
import Mux from "@mux/mux-node";
import { afterAll, beforeAll, describe, expect, setSystemTime, test } from "bun:test";
import { createHmac } from "node:crypto";
import { capturesOf } from "../../src/bobbin/captures.ts";
import type { TestIntake } from "../helpers/intake.ts";
import { bobbinTest, builtin, capturedRequest, eventsByPayload, kitIntake, kitOf } from "./catalogue.ts";

const bobbin = builtin("mux.video");
const kit = kitOf(bobbin);
const SECRET = kit.secrets.secret;
const NOW = kit.now ?? 0;
const captures = capturesOf(bobbin.files());
const { body: BODY, headers: HEADERS } = capturedRequest(bobbin);
const signed = (body: string, t = NOW) => ({
  ...HEADERS,
  "mux-signature": `t=${t},v1=${createHmac("sha256", SECRET).update(`${t}.${body}`).digest("hex")}`,
});

bobbinTest("mux.video", "an asset event is queued and delivered, a bad signature is 401", {
  answers: {
    "captures/accepted.http": 202,
    "captures/rejected.http": { status: 401, body: "" },
  },
});

/** Mux's webhooks helper; it reads the time from Date.now, so each call runs with it set to `at`. */
const mux = new Mux({ tokenId: "kit-unused", tokenSecret: "kit-unused", webhookSecret: SECRET });
async function muxAt<T>(at: number, call: () => Promise<T>): Promise<T> {
  setSystemTime(new Date(at * 1000));
  try {
    return await call();
  } finally {
    setSystemTime();
  }
}

describe("@mux/mux-node", () => {
  test("unwrap verifies the accepted capture at kit.now; the rejected one and a stale t are refused", async () => {
    const event = await muxAt(NOW, () => mux.webhooks.unwrap(BODY, HEADERS));
    expect(event.id).toBe("3a1f5c2e-7b8d-4e9f-a0b1-c2d3e4f5a6b7");
    const rejected = captures.find((c) => c.file === "captures/rejected.http");
    if (!rejected) throw new Error("no rejected capture");
    const body = new TextDecoder().decode(rejected.request.body);
    const headers = Object.fromEntries(rejected.request.headers);
    await expect(muxAt(NOW, () => mux.webhooks.verifySignature(body, headers))).rejects.toThrow("matching");
    await expect(muxAt(NOW + 301, () => mux.webhooks.verifySignature(BODY, HEADERS))).rejects.toThrow("too old");
  });
});

describe("against an intake on the kit's clock", () => {
  let t: TestIntake;
  beforeAll(async () => {
    t = await kitIntake("mux.video");
  });
  afterAll(() => t.stop());

  const rowOf = (body: string) =>
    eventsByPayload<{ key: string; event_type: string; dedup_id: string }>(t, "b.key, e.event_type, e.dedup_id", body);

  test("the accepted capture is stored under the asset id, its type and the event id", async () => {
    const res = await t.post("/hooks/mux", BODY, HEADERS);
    expect([res.status, await res.text()]).toEqual([202, '{"status":"queued"}']);
    expect(rowOf(BODY)).toEqual([
      {
        key: "Ex4mpleAss3t00aVideoId000000000001",
        event_type: "video.asset.ready",
        dedup_id: "3a1f5c2e-7b8d-4e9f-a0b1-c2d3e4f5a6b7",
      },
    ]);
  });

  test("a retry of the same event, its attempts list grown and signed afresh, is a duplicate", async () => {
    const payload = JSON.parse(BODY);
    const retry = JSON.stringify({
      ...payload,
      attempts: [
        {
          webhook_id: 4711,
          response_status_code: 503,
          response_headers: {},
          response_body: null,
          max_attempts: 30,
          id: "9d8c7b6a-5f4e-4d3c-2b1a-0f9e8d7c6b5a",
          created_at: "2026-08-22T11:59:59.000000Z",
          address: "https://hooks.example.com/mux",
        },
      ],
    });
    const res = await t.post("/hooks/mux", retry, signed(retry, NOW + 30));
    expect([res.status, await res.text()]).toEqual([200, '{"status":"duplicate"}']);
  });

  test("a live stream's event, which @mux/mux-node verifies, is keyed by the stream", async () => {
    const live = JSON.stringify({
      type: "video.live_stream.active",
      object: { type: "live_stream", id: "Ex4mpleL1veStr3am000000000000001" },
      id: "6b7c8d9e-0f1a-4b2c-8d3e-4f5a6b7c8d9e",
      environment: { name: "Production", id: "ex4mpl" },
      data: { id: "Ex4mpleL1veStr3am000000000000001", status: "active" },
      created_at: "2026-08-22T12:00:00.000000Z",
      attempts: [],
    });
    await muxAt(NOW, () => mux.webhooks.verifySignature(live, signed(live)));
    const res = await t.post("/hooks/mux", live, signed(live));
    expect([res.status, await res.text()]).toEqual([202, '{"status":"queued"}']);
    expect(rowOf(live)).toEqual([
      {
        key: "Ex4mpleL1veStr3am000000000000001",
        event_type: "video.live_stream.active",
        dedup_id: "6b7c8d9e-0f1a-4b2c-8d3e-4f5a6b7c8d9e",
      },
    ]);
  });

  test("a t more than 300 s off either way is 401; a v1 of the body alone is 401", async () => {
    const other = BODY.replace("3a1f5c2e-7b8d-4e9f-a0b1-c2d3e4f5a6b7", "4b2a6d3f-8c9e-4fa0-b1c2-d3e4f5a6b7c8");
    for (const at of [NOW - 301, NOW + 301]) {
      const res = await t.post("/hooks/mux", other, signed(other, at));
      expect([res.status, await res.text()]).toEqual([401, ""]);
    }
    const bodyOnly = createHmac("sha256", SECRET).update(other).digest("hex");
    const res = await t.post("/hooks/mux", other, { ...HEADERS, "mux-signature": `t=${NOW},v1=${bodyOnly}` });
    expect([res.status, await res.text()]).toEqual([401, ""]);
  });
});
