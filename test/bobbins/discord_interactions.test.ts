// discord.interactions: Discord interactions at an Interactions Endpoint URL (X-Signature-Ed25519,
// the hex Ed25519 signature of <X-Signature-Timestamp><body> under the app's public key), through
// a real `hookspool run`, and against an intake for what is Discord's own: the PING answered
// {"type":1} and never queued, every other interaction queued and answered with the deferred
// {"type":5}, the bad signatures Discord sends on purpose refused with an empty 401.
//
// The catalogue's proof is made here, on the shared run: catalogue.ts counts a capture as accepted
// only when it is answered 202 {"status":"queued"}, and this bobbin answers a queued interaction
// 200 {"type":5} (the `ack` Discord needs), so the same proof is made with the ack as the accepted
// answer.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { generateKeyPairSync, type KeyObject, sign } from "node:crypto";
import { capturesOf } from "../../src/bobbin/captures.ts";
import type { TestIntake } from "../helpers/intake.ts";
import { waitFor } from "../helpers/proc.ts";
import { builtin, capturedRequest, eventsByPayload, kitIntake, kitOf, sharedRun } from "./catalogue.ts";

const bobbin = builtin("discord.interactions");
const kit = kitOf(bobbin);
const PUBLIC_KEY = kit.secrets.secret;
const NOW = kit.now ?? 0;
const DEFERRED = '{"type":5}';
const PONG = '{"type":1}';
const captures = capturesOf(bobbin.files());
const accepted = capturedRequest(bobbin, "captures/accepted.http");
const ping = capturedRequest(bobbin, "captures/ping.http");

test(
  'the manifest answers the PING with {"type":1} and acks every queued interaction with the ' + 'deferred {"type":5}',
  () => {
    const t = bobbin.manifest.source?.template as Record<string, unknown>;
    expect([t.scheme, t.reply_when, t.reply, t.ack]).toEqual(["ed25519", "type=1", PONG, DEFERRED]);
    expect(bobbin.manifest.source?.span).toBe("immediate");
  },
);

test(
  'a command is queued, acked {"type":5} and delivered; the PING gets {"type":1}; a bad signature ' + "is 401",
  async () => {
    const run = await sharedRun(bobbin);
    const got = await run.results(bobbin);
    for (const g of got)
      expect({ file: g.capture.file, status: g.status }).toEqual({
        file: g.capture.file,
        status: g.capture.expect.status,
      });
    expect(got.map((g) => [g.capture.file, g.status, g.body])).toEqual([
      ["captures/accepted.http", 200, DEFERRED],
      ["captures/ping.http", 200, PONG],
      ["captures/rejected.http", 401, ""],
    ]);
    expect(got.slice(0, 2).map((g) => g.headers?.["content-type"] ?? null)).toEqual([
      "application/json",
      "application/json",
    ]);
    // The acked command is the one event, delivered under the key and type its capture names.
    const row = () => run.events(bobbin).find((e) => e.payload === accepted.body);
    await waitFor("the command delivered", () => row()?.state === "delivered");
    const want = captures.find((c) => c.file === "captures/accepted.http")?.expect;
    expect({ key: row()?.key, event_type: row()?.event_type }).toEqual({ key: want?.key, event_type: want?.eventType });
    expect(run.events(bobbin)).toHaveLength(1);
    const delivered = await run.deliveries(bobbin);
    expect(delivered.accepted.length).toBe(1);
    expect(delivered.unverified).toEqual([]);
    expect(await run.stderr()).not.toContain(PUBLIC_KEY);
  },
);

describe("against an intake", () => {
  // The kit key's private half is gone, so new bodies are signed under a key pair made here,
  // served by a second instance of the same bobbin.
  const fresh = generateKeyPairSync("ed25519");
  const freshHex = fresh.publicKey.export({ format: "der", type: "spki" }).subarray(12).toString("hex");
  const kitHex = Buffer.from(PUBLIC_KEY, "base64").toString("hex");
  let t: TestIntake;
  beforeAll(async () => {
    const instance = (name: string, secret: string) => `[bobbins.${name}]
bobbin = "discord.interactions"
secrets.secret = { file = "{{secret:${secret}}}" }
outputs = { "*" = "kit" }
`;
    t = await kitIntake("discord.interactions", {
      config: `${instance("discord-hex", "kit-hex")}\n${instance("fresh", "fresh")}`,
      secrets: { "kit-hex": kitHex, fresh: freshHex },
    });
  });
  afterAll(() => t.stop());

  const rowsOf = (body: string) =>
    eventsByPayload<{ source: string; key: string; event_type: string; dedup_id: string }>(
      t,
      "e.source, b.key, e.event_type, e.dedup_id",
      body,
    );
  const signed = (body: string, key: KeyObject = fresh.privateKey, ts = NOW) => ({
    "Content-Type": "application/json",
    "X-Signature-Timestamp": String(ts),
    "X-Signature-Ed25519": sign(null, Buffer.from(`${ts}${body}`), key).toString("hex"),
  });
  const answer = async (r: Response) => [r.status, r.headers.get("content-type"), await r.text()];

  test(
    "the accepted command is stored under its channel, its command name and its interaction id; " +
      "sent again it is acked and stored once",
    async () => {
      const first = await t.post("/hooks/discord", accepted.body, accepted.headers);
      expect(await answer(first)).toEqual([200, "application/json", DEFERRED]);
      expect(rowsOf(accepted.body)).toEqual([
        { source: "discord", key: "1300000000000000020", event_type: "ask", dedup_id: "1300000000000000100" },
      ]);
      const again = await t.post("/hooks/discord", accepted.body, accepted.headers);
      expect(await answer(again)).toEqual([200, "application/json", DEFERRED]);
      expect(rowsOf(accepted.body)).toHaveLength(1);
      // The interaction token is kept: it is how the agent answers within 15 minutes.
      expect(JSON.parse(accepted.body).token).toStartWith("kit-test-interaction-token-");
    },
  );

  test("the Developer Portal's hex form of the same public key verifies the same capture", async () => {
    const res = await t.post("/hooks/discord-hex", ping.body, ping.headers);
    expect(await answer(res)).toEqual([200, "application/json", PONG]);
  });

  test(
    'the PING is answered {"type":1} only when signed, never stored; Discord\'s deliberately bad ' +
      "signatures get an empty 401",
    async () => {
      const events = t.count("events");
      expect(await answer(await t.post("/hooks/discord", ping.body, ping.headers))).toEqual([
        200,
        "application/json",
        PONG,
      ]);
      const other = generateKeyPairSync("ed25519").privateKey;
      const refused: Record<string, string>[] = [
        signed(ping.body, other),
        { ...ping.headers, "X-Signature-Ed25519": "0".repeat(128) },
        { "Content-Type": "application/json" },
        { ...ping.headers, "X-Signature-Timestamp": String(NOW - 61) },
      ];
      for (const headers of refused) {
        const r = await t.post("/hooks/discord", ping.body, headers);
        expect([r.status, await r.text()]).toEqual([401, ""]);
      }
      expect(t.count("events")).toBe(events);
    },
  );

  test("a PING signed more than 300 s away from the clock is refused, one within it answered", async () => {
    const body =
      '{"application_id":"1300000000000000001","entitlements":[],"id":"1300000000000000098",' +
      '"token":"kit-test-interaction-token-cGluZzI","type":1,"version":1}';
    for (const [ts, status] of [
      [NOW - 301, 401],
      [NOW + 301, 401],
      [NOW - 299, 200],
    ] as const) {
      const r = await t.post("/hooks/fresh", body, signed(body, fresh.privateKey, ts));
      expect({ ts: ts - NOW, status: r.status }).toEqual({ ts: ts - NOW, status });
    }
  });

  test("a button press is acked and typed by its custom_id; a command in a DM is keyed by the DM channel", async () => {
    const press = JSON.stringify({
      application_id: "1300000000000000001",
      channel_id: "1300000000000000020",
      data: { component_type: 2, custom_id: "rerun_build" },
      guild_id: "1300000000000000010",
      id: "1300000000000000110",
      member: { user: { id: "1300000000000000200" } },
      message: { id: "1300000000000000301" },
      token: "kit-test-interaction-token-cHJlc3M",
      type: 3,
      version: 1,
    });
    expect(await answer(await t.post("/hooks/fresh", press, signed(press)))).toEqual([
      200,
      "application/json",
      DEFERRED,
    ]);
    expect(rowsOf(press)).toEqual([
      { source: "fresh", key: "1300000000000000020", event_type: "rerun_build", dedup_id: "1300000000000000110" },
    ]);
    const dm = JSON.stringify({
      application_id: "1300000000000000001",
      channel: { id: "1300000000000000400", type: 1 },
      channel_id: "1300000000000000400",
      context: 1,
      data: { id: "1300000000000000030", name: "ask", type: 1 },
      id: "1300000000000000111",
      token: "kit-test-interaction-token-ZG0",
      type: 2,
      user: { id: "1300000000000000200" },
      version: 1,
    });
    expect(await answer(await t.post("/hooks/fresh", dm, signed(dm)))).toEqual([200, "application/json", DEFERRED]);
    expect(rowsOf(dm)).toEqual([
      { source: "fresh", key: "1300000000000000400", event_type: "ask", dedup_id: "1300000000000000111" },
    ]);
  });

  test("the signature covers the timestamp and the body: either changed is an empty 401", async () => {
    const events = t.count("events");
    const moved = await t.post("/hooks/discord", accepted.body, {
      ...accepted.headers,
      "X-Signature-Timestamp": String(NOW + 1),
    });
    expect([moved.status, await moved.text()]).toEqual([401, ""]);
    const changed = await t.post("/hooks/discord", accepted.body.replace("last night", "tonight"), accepted.headers);
    expect([changed.status, await changed.text()]).toEqual([401, ""]);
    expect(t.count("events")).toBe(events);
  });
});
