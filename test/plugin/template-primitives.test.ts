// Known-answer vectors for the template's verification primitives: the providers' own published
// examples where there is one (Slack's docs, Twilio's docs, SendGrid's SDK test, RFC 8032), else
// signatures made here with node:crypto, independently of src/plugin/verify.ts. Each: good,
// tampered, stale, future, and (where the sender rotates secrets) a second signature.
import { describe, expect, test } from "bun:test";
import { createHmac, generateKeyPairSync, sign } from "node:crypto";
import { hookRequest } from "../../src/plugin/hook-request.ts";
import { checkTemplate, type TemplateSettings, templateSource } from "../../src/plugin/template.ts";

function verdict(
  t: TemplateSettings,
  secret: string,
  o: { body: string | Uint8Array; headers: Record<string, string>; now: number; url?: string },
) {
  const body = typeof o.body === "string" ? new TextEncoder().encode(o.body) : o.body;
  const req = hookRequest({
    method: "POST",
    url: o.url ?? "/hooks/t",
    headers: Object.entries(o.headers),
    body,
    peer: "127.0.0.1",
    now: o.now,
  });
  expect(checkTemplate(t as unknown as Record<string, unknown>)).toEqual([]);
  return templateSource(t).verify(req, { get: () => secret } as never);
}
const mac = (alg: string, key: string, data: string, enc: "hex" | "base64") =>
  createHmac(alg, key).update(data).digest(enc);

describe("hmac: Slack's v0 (the example on api.slack.com/authentication/verifying-requests-from-slack)", () => {
  const SECRET = "8f742231b10e8888abcd99yyyzzz85a5";
  const TS = 1531420618;
  const BODY =
    "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&" +
    "channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&" +
    "response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZ" +
    "RskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c";
  const SIG = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503";
  const t: TemplateSettings = {
    scheme: "hmac",
    header: "X-Slack-Signature",
    prefix: "v0=",
    timestamp_header: "X-Slack-Request-Timestamp",
    message: "v0:{ts}:{body}",
    body: "form",
    key: "team_id",
  };
  const headers = { "X-Slack-Signature": SIG, "X-Slack-Request-Timestamp": String(TS) };
  test("the documented signature verifies", () =>
    expect(verdict(t, SECRET, { body: BODY, headers, now: TS })).toBe(true));
  test("tampered body, wrong secret, or a timestamp that is not the signed one", () => {
    expect(verdict(t, SECRET, { body: `${BODY}x`, headers, now: TS })).toBe("mismatch");
    expect(verdict(t, "another", { body: BODY, headers, now: TS })).toBe("mismatch");
    expect(
      verdict(t, SECRET, { body: BODY, headers: { ...headers, "X-Slack-Request-Timestamp": String(TS + 1) }, now: TS }),
    ).toBe("mismatch");
  });
  test("stale and future beyond 300 s, fine within", () => {
    expect(verdict(t, SECRET, { body: BODY, headers, now: TS + 301 })).toBe("stale");
    expect(verdict(t, SECRET, { body: BODY, headers, now: TS - 301 })).toBe("future");
    expect(verdict(t, SECRET, { body: BODY, headers, now: TS + 300 })).toBe(true);
  });
  test("tolerance_s narrows the window", () => {
    expect(verdict({ ...t, tolerance_s: 60 }, SECRET, { body: BODY, headers, now: TS + 61 })).toBe("stale");
    expect(verdict({ ...t, tolerance_s: 60 }, SECRET, { body: BODY, headers, now: TS + 60 })).toBe(true);
  });
  test("no signature, no timestamp, or no prefix", () => {
    expect(verdict(t, SECRET, { body: BODY, headers: { "X-Slack-Request-Timestamp": String(TS) }, now: TS })).toBe(
      "missing_signature",
    );
    expect(verdict(t, SECRET, { body: BODY, headers: { "X-Slack-Signature": SIG }, now: TS })).toBe(
      "missing_signature",
    );
    expect(
      verdict(t, SECRET, { body: BODY, headers: { ...headers, "X-Slack-Signature": SIG.slice(3) }, now: TS }),
    ).toBe("malformed");
  });
});

describe("hmac with pairs: Paddle's ts=...;h1=... over {ts}:{body}, 5 s", () => {
  const SECRET = "pdl_ntfset_test_secret";
  const TS = 1700000000;
  const BODY = '{"event_id":"evt_01","event_type":"subscription.created","data":{"customer_id":"ctm_01"}}';
  const t: TemplateSettings = {
    scheme: "hmac",
    header: "Paddle-Signature",
    pairs: ";",
    ts_name: "ts",
    sig_name: "h1",
    message: "{ts}:{body}",
    tolerance_s: 5,
    key: "data.customer_id",
    dedup: "event_id",
  };
  const signed = (secret: string, ts = TS) => `ts=${ts};h1=${mac("sha256", secret, `${ts}:${BODY}`, "hex")}`;
  test("good, tampered, wrong secret", () => {
    expect(verdict(t, SECRET, { body: BODY, headers: { "Paddle-Signature": signed(SECRET) }, now: TS })).toBe(true);
    expect(
      verdict(t, SECRET, { body: BODY.replace("01", "02"), headers: { "Paddle-Signature": signed(SECRET) }, now: TS }),
    ).toBe("mismatch");
    expect(verdict(t, SECRET, { body: BODY, headers: { "Paddle-Signature": signed("another") }, now: TS })).toBe(
      "mismatch",
    );
  });
  test("5 s either side, and only one ts", () => {
    expect(verdict(t, SECRET, { body: BODY, headers: { "Paddle-Signature": signed(SECRET) }, now: TS + 6 })).toBe(
      "stale",
    );
    expect(verdict(t, SECRET, { body: BODY, headers: { "Paddle-Signature": signed(SECRET) }, now: TS - 6 })).toBe(
      "future",
    );
    expect(
      verdict(t, SECRET, { body: BODY, headers: { "Paddle-Signature": `ts=${TS};${signed(SECRET)}` }, now: TS }),
    ).toBe("malformed");
  });
  test("a rotated secret: either h1 may match", () => {
    const two = `${signed("old-secret")};h1=${mac("sha256", SECRET, `${TS}:${BODY}`, "hex")}`;
    expect(verdict(t, SECRET, { body: BODY, headers: { "Paddle-Signature": two }, now: TS })).toBe(true);
    expect(verdict(t, "third", { body: BODY, headers: { "Paddle-Signature": two }, now: TS })).toBe("mismatch");
  });
});

describe("hmac with several signatures: PagerDuty's v1=...,v1=... during a rotation", () => {
  const BODY = '{"event":{"id":"01D","event_type":"incident.triggered","data":{"id":"PABC"}}}';
  const t: TemplateSettings = {
    scheme: "hmac",
    header: "X-PagerDuty-Signature",
    prefix: "v1=",
    signatures: ",",
    key: "event.data.id",
    dedup: "event.id",
  };
  const sig = (s: string) => `v1=${mac("sha256", s, BODY, "hex")}`;
  test("any listed signature under the secret verifies; none under another", () => {
    expect(
      verdict(t, "new", { body: BODY, headers: { "X-PagerDuty-Signature": `${sig("old")},${sig("new")}` }, now: 1 }),
    ).toBe(true);
    expect(verdict(t, "new", { body: BODY, headers: { "X-PagerDuty-Signature": sig("new") }, now: 1 })).toBe(true);
    expect(
      verdict(t, "other", { body: BODY, headers: { "X-PagerDuty-Signature": `${sig("old")},${sig("new")}` }, now: 1 }),
    ).toBe("mismatch");
    expect(verdict(t, "new", { body: `${BODY} `, headers: { "X-PagerDuty-Signature": sig("new") }, now: 1 })).toBe(
      "mismatch",
    );
  });
});

describe("hmac over {url}{params}: Twilio's example (twilio.com/docs/usage/webhooks/webhooks-security)", () => {
  const t: TemplateSettings = {
    scheme: "hmac",
    header: "X-Twilio-Signature",
    algorithm: "sha1",
    encoding: "base64",
    public_url: "https://mycompany.com/myapp.php",
    message: "{url}{params}",
    body: "form",
    key: "From",
    dedup: "CallSid",
  };
  // The parameters in another order than sorted, encoded as a form post encodes them.
  const BODY = "To=%2B18005551212&From=%2B12349013030&Digits=1234&Caller=%2B12349013030&CallSid=CA1234567890ABCDE";
  const headers = { "X-Twilio-Signature": "0/KCTR6DLpKmkAf8muzZqo1nDgQ=" };
  test("the documented signature verifies, with the query string as received", () => {
    expect(verdict(t, "12345", { body: BODY, headers, now: 1, url: "/hooks/twilio?foo=1&bar=2" })).toBe(true);
  });
  test("a changed parameter, a reordered query, another URL, another token", () => {
    expect(
      verdict(t, "12345", { body: BODY.replace("1234&", "1235&"), headers, now: 1, url: "/hooks/twilio?foo=1&bar=2" }),
    ).toBe("mismatch");
    expect(verdict(t, "12345", { body: BODY, headers, now: 1, url: "/hooks/twilio?bar=2&foo=1" })).toBe("mismatch");
    expect(
      verdict({ ...t, public_url: "https://mycompany.com/other.php" }, "12345", {
        body: BODY,
        headers,
        now: 1,
        url: "/hooks/twilio?foo=1&bar=2",
      }),
    ).toBe("mismatch");
    expect(verdict(t, "54321", { body: BODY, headers, now: 1, url: "/hooks/twilio?foo=1&bar=2" })).toBe("mismatch");
  });
  test("a field named __proto__ is a field like the others", () => {
    const src = templateSource(t);
    const req = hookRequest({
      method: "POST",
      url: "/hooks/twilio",
      headers: [],
      body: new TextEncoder().encode("__proto__=x&From=%2B1"),
      peer: "127.0.0.1",
      now: 1,
    });
    expect(JSON.stringify(src.payload?.(req))).toBe('{"__proto__":"x","From":"+1"}');
  });
  test("the form body is queued as an object of its fields", () => {
    const src = templateSource(t);
    const req = hookRequest({
      method: "POST",
      url: "/hooks/twilio",
      headers: [],
      body: new TextEncoder().encode(BODY),
      peer: "127.0.0.1",
      now: 1,
    });
    expect(src.payload?.(req)).toEqual({
      To: "+18005551212",
      From: "+12349013030",
      Digits: "1234",
      Caller: "+12349013030",
      CallSid: "CA1234567890ABCDE",
    });
  });
});

describe("hmac with the timestamp in the body: Linear's webhookTimestamp (ms), 60 s", () => {
  const T = 1_760_000_000;
  const BODY = JSON.stringify({ action: "update", type: "Issue", data: { id: "iss_1" }, webhookTimestamp: T * 1000 });
  const t: TemplateSettings = {
    scheme: "hmac",
    header: "Linear-Signature",
    timestamp_field: "webhookTimestamp",
    tolerance_s: 60,
    key: "data.id",
  };
  const headers = { "Linear-Signature": mac("sha256", "lin_wh_test", BODY, "hex") };
  test("fresh, stale, future", () => {
    expect(verdict(t, "lin_wh_test", { body: BODY, headers, now: T + 30 })).toBe(true);
    expect(verdict(t, "lin_wh_test", { body: BODY, headers, now: T + 61 })).toBe("stale");
    expect(verdict(t, "lin_wh_test", { body: BODY, headers, now: T - 61 })).toBe("future");
  });
  test("an unreadable body has no timestamp", () => {
    expect(
      verdict(t, "lin_wh_test", {
        body: "{not json",
        headers: { "Linear-Signature": mac("sha256", "lin_wh_test", "{not json", "hex") },
        now: T,
      }),
    ).toBe("malformed");
  });
});

describe("ecdsa-p256: SendGrid's signed event webhook (the sendgrid-nodejs eventwebhook test)", () => {
  const PUBLIC_KEY =
    "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE83T4O/n84iotIvIW4mdBgQ/" +
    "7dAfSmpqIM8kF9mN1flpVKS3GRqe62gw+2fNNRaINXvVpiglSI8eNEc6wEA3F+g==";
  const SIGNATURE = "MEUCIGHQVtGj+Y3LkG9fLcxf3qfI10QysgDWmMOVmxG0u6ZUAiEAyBiXDWzM+uOe5W0JuG+luQAbPIqHh89M15TluLtEZtM=";
  const TS = 1600112502;
  const PAYLOAD = `${JSON.stringify([
    {
      email: "hello@world.com",
      event: "dropped",
      reason: "Bounced Address",
      sg_event_id: "ZHJvcC0xMDk5NDkxOS1MUnpYbF9OSFN0T0doUTRrb2ZTbV9BLTA",
      sg_message_id: "LRzXl_NHStOGhQ4kofSm_A.filterdrecv-p3mdw1-756b745b58-kmzbl-18-5F5FC76C-9.0",
      "smtp-id": "<LRzXl_NHStOGhQ4kofSm_A@ismtpd0039p1iad1.sendgrid.net>",
      timestamp: 1600112492,
    },
  ])}\r\n`;
  const t: TemplateSettings = {
    scheme: "ecdsa-p256",
    header: "X-Twilio-Email-Event-Webhook-Signature",
    timestamp_header: "X-Twilio-Email-Event-Webhook-Timestamp",
    key: "sg_message_id",
    split: "*",
    dedup: "sg_event_id",
  };
  const headers = {
    "X-Twilio-Email-Event-Webhook-Signature": SIGNATURE,
    "X-Twilio-Email-Event-Webhook-Timestamp": String(TS),
  };
  test("the SDK's signature verifies under its public key", () =>
    expect(verdict(t, PUBLIC_KEY, { body: PAYLOAD, headers, now: TS })).toBe(true));
  test("tampered body, another timestamp, another key", () => {
    expect(verdict(t, PUBLIC_KEY, { body: PAYLOAD.replace("dropped", "bounce"), headers, now: TS })).toBe("mismatch");
    expect(
      verdict(t, PUBLIC_KEY, {
        body: PAYLOAD,
        headers: { ...headers, "X-Twilio-Email-Event-Webhook-Timestamp": String(TS + 1) },
        now: TS,
      }),
    ).toBe("mismatch");
    const other = generateKeyPairSync("ec", { namedCurve: "prime256v1" })
      .publicKey.export({ format: "der", type: "spki" })
      .toString("base64");
    expect(verdict(t, other, { body: PAYLOAD, headers, now: TS })).toBe("mismatch");
  });
  test("stale, future, an unreadable signature, a key that is not P-256", () => {
    expect(verdict(t, PUBLIC_KEY, { body: PAYLOAD, headers, now: TS + 301 })).toBe("stale");
    expect(verdict(t, PUBLIC_KEY, { body: PAYLOAD, headers, now: TS - 301 })).toBe("future");
    expect(
      verdict(t, PUBLIC_KEY, {
        body: PAYLOAD,
        headers: { ...headers, "X-Twilio-Email-Event-Webhook-Signature": "%%%" },
        now: TS,
      }),
    ).toBe("malformed");
    expect(verdict(t, "not a key", { body: PAYLOAD, headers, now: TS })).toBe("mismatch");
  });
});

describe("ed25519: Discord's X-Signature-Ed25519 over timestamp + body", () => {
  test("RFC 8032 test 2 (message 0x72), recipe {body}", () => {
    const t: TemplateSettings = { scheme: "ed25519", header: "X-Signature-Ed25519", message: "{body}", key: "const:k" };
    const PUBLIC = "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c";
    const SIG =
      "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8" +
      "c387b2eaeb4302aeeb00d291612bb0c00";
    expect(verdict(t, PUBLIC, { body: new Uint8Array([0x72]), headers: { "X-Signature-Ed25519": SIG }, now: 1 })).toBe(
      true,
    );
    expect(verdict(t, PUBLIC, { body: new Uint8Array([0x73]), headers: { "X-Signature-Ed25519": SIG }, now: 1 })).toBe(
      "mismatch",
    );
    expect(
      verdict(t, PUBLIC, { body: new Uint8Array([0x72]), headers: { "X-Signature-Ed25519": SIG.slice(2) }, now: 1 }),
    ).toBe("malformed");
  });
  const pair = generateKeyPairSync("ed25519");
  const PUBLIC = pair.publicKey.export({ format: "der", type: "spki" }).subarray(12).toString("hex");
  const t: TemplateSettings = {
    scheme: "ed25519",
    header: "X-Signature-Ed25519",
    timestamp_header: "X-Signature-Timestamp",
    key: "channel_id|guild_id",
    reply_when: "type=1",
    reply: '{"type":1}',
  };
  const TS = 1_760_000_000;
  const BODY = '{"type":2,"id":"1","channel_id":"C1","data":{"name":"ask"}}';
  const signed = (body = BODY, ts = TS) => ({
    "X-Signature-Ed25519": sign(null, Buffer.from(`${ts}${body}`), pair.privateKey).toString("hex"),
    "X-Signature-Timestamp": String(ts),
  });
  test("good; tampered; the timestamp is covered; stale and future", () => {
    expect(verdict(t, PUBLIC, { body: BODY, headers: signed(), now: TS })).toBe(true);
    expect(verdict(t, PUBLIC, { body: `${BODY} `, headers: signed(), now: TS })).toBe("mismatch");
    expect(
      verdict(t, PUBLIC, { body: BODY, headers: { ...signed(), "X-Signature-Timestamp": String(TS + 1) }, now: TS }),
    ).toBe("mismatch");
    expect(verdict(t, PUBLIC, { body: BODY, headers: signed(), now: TS + 301 })).toBe("stale");
    expect(verdict(t, PUBLIC, { body: BODY, headers: signed(), now: TS - 301 })).toBe("future");
  });
  test("the public key may be given as base64 too", () => {
    expect(verdict(t, Buffer.from(PUBLIC, "hex").toString("base64"), { body: BODY, headers: signed(), now: TS })).toBe(
      true,
    );
  });
});

describe("how many signatures a header may carry", () => {
  const BODY = '{"event":{"id":"01D","data":{"id":"P1"}}}';
  const t: TemplateSettings = { scheme: "hmac", header: "X-Sig", prefix: "v1=", signatures: ",", key: "event.data.id" };
  const good = `v1=${mac("sha256", "s", BODY, "hex")}`;
  test("a rotation's two are fine; more than eight is malformed before any MAC is compared", () => {
    expect(verdict(t, "s", { body: BODY, headers: { "X-Sig": `v1=00,${good}` }, now: 1 })).toBe(true);
    const many = Array.from({ length: 9 }, () => "v1=00").join(",");
    expect(verdict(t, "s", { body: BODY, headers: { "X-Sig": `${many},${good}` }, now: 1 })).toBe("malformed");
    // The same cap for Stripe's t=,v1= and for Standard Webhooks' space-separated list.
    const ts: TemplateSettings = { scheme: "timestamped", header: "S", key: "k" };
    const v1 = mac("sha256", "s", `100.${BODY}`, "hex");
    expect(
      verdict(ts, "s", {
        body: BODY,
        headers: { S: `t=100,${Array.from({ length: 8 }, () => "v1=00").join(",")},v1=${v1}` },
        now: 100,
      }),
    ).toBe("malformed");
    expect(verdict(ts, "s", { body: BODY, headers: { S: `t=100,v1=00,v1=${v1}` }, now: 100 })).toBe(true);
  });
  test("thousands of candidates cost no more than one MAC", () => {
    const huge = Array.from({ length: 5000 }, () => "v1=00").join(",");
    const body = "x".repeat(700_000);
    const t0 = performance.now();
    expect(verdict(t, "s", { body, headers: { "X-Sig": huge }, now: 1 })).toBe("malformed");
    // One MAC over 700 KB takes a few ms; five thousand took seconds.
    expect(performance.now() - t0).toBeLessThan(500);
  });
});

describe("standard-webhooks header names", () => {
  const SECRET = `whsec_${Buffer.from("kit-test-standard").toString("base64")}`;
  const BODY = '{"type":"email.sent","data":{"email_id":"e1"}}';
  const sig = (id: string, ts: number) =>
    `v1,${createHmac("sha256", Buffer.from("kit-test-standard")).update(`${id}.${ts}.${BODY}`).digest("base64")}`;
  const base: TemplateSettings = { scheme: "standard-webhooks", key: "data.email_id" };
  const svix = { "svix-id": "msg_1", "svix-timestamp": "100", "svix-signature": sig("msg_1", 100) };
  const webhook = { "webhook-id": "msg_1", "webhook-timestamp": "100", "webhook-signature": sig("msg_1", 100) };
  test("either (the default) takes whichever set carries a signature", () => {
    expect(verdict(base, SECRET, { body: BODY, headers: svix, now: 100 })).toBe(true);
    expect(verdict(base, SECRET, { body: BODY, headers: webhook, now: 100 })).toBe(true);
  });
  test("svix or webhook reads that set only", () => {
    expect(verdict({ ...base, sw_headers: "svix" }, SECRET, { body: BODY, headers: webhook, now: 100 })).toBe(
      "missing_signature",
    );
    expect(verdict({ ...base, sw_headers: "webhook" }, SECRET, { body: BODY, headers: svix, now: 100 })).toBe(
      "missing_signature",
    );
    expect(verdict({ ...base, sw_headers: "svix" }, SECRET, { body: BODY, headers: svix, now: 100 })).toBe(true);
  });
  test("tolerance_s applies", () => {
    expect(verdict({ ...base, tolerance_s: 10 }, SECRET, { body: BODY, headers: svix, now: 111 })).toBe("stale");
  });
});

describe("timestamped with tolerance_s", () => {
  test("Stripe's t=,v1= within a 5 s window", () => {
    const BODY = '{"id":"evt_1","type":"charge.succeeded","data":{"object":{"id":"ch_1"}}}';
    const h = { "Stripe-Signature": `t=1000,v1=${mac("sha256", "whsec_test", `1000.${BODY}`, "hex")}` };
    const t: TemplateSettings = {
      scheme: "timestamped",
      header: "Stripe-Signature",
      tolerance_s: 5,
      key: "data.object.id",
    };
    expect(verdict(t, "whsec_test", { body: BODY, headers: h, now: 1005 })).toBe(true);
    expect(verdict(t, "whsec_test", { body: BODY, headers: h, now: 1006 })).toBe("stale");
  });
});

describe("what check refuses", () => {
  const bad = (t: Record<string, unknown>) => checkTemplate({ key: "k", ...t }).map((p) => `${p.key}: ${p.message}`);
  test("recipe parts need their sources", () => {
    expect(bad({ scheme: "hmac", header: "X", message: "{ts}.{body}" })).toEqual([
      "message: {ts} needs timestamp_header, timestamp_field or pairs",
    ]);
    expect(bad({ scheme: "hmac", header: "X", message: "{url}" })).toEqual(["message: {url} needs public_url"]);
    expect(bad({ scheme: "hmac", header: "X", message: "{params}" })).toEqual([
      'message: {params} needs body = "form"',
    ]);
    expect(bad({ scheme: "hmac", header: "X", message: "{nope}" })[0]).toContain("unknown part {nope}");
    expect(bad({ scheme: "ed25519", header: "X" })).toEqual([
      "timestamp_header: required by scheme ed25519 unless message is set (it signs {ts}{body})",
    ]);
  });
  test("keys of one scheme on another, and keys that need a partner", () => {
    expect(bad({ scheme: "hmac-sha256-hex", header: "X", message: "{body}" })).toEqual([
      "message: only for schemes hmac, ed25519, ecdsa-p256",
    ]);
    expect(bad({ scheme: "hmac", header: "X", sw_headers: "svix" })).toEqual([
      "sw_headers: only for scheme standard-webhooks",
    ]);
    expect(bad({ scheme: "hmac", header: "X", algorithm: "md5" })).toEqual(["algorithm: one of sha256, sha1, sha512"]);
    expect(bad({ scheme: "static-token", header: "X", echo_when: "type=url_verification" })).toEqual([
      "echo_when: needs echo_field (the field whose value answers)",
    ]);
    expect(bad({ scheme: "static-token", header: "X", reply_when: "type", reply: "{}" })).toEqual([
      "reply_when: expected <selector>=<value>, such as type=url_verification",
    ]);
    expect(bad({ scheme: "static-token", header: "X", form_json: "payload" })).toEqual([
      'form_json: needs body = "form"',
    ]);
    expect(bad({ scheme: "hmac", header: "X", pairs: ",", signatures: ",", message: "{ts}.{body}" })).toEqual([
      "signatures: with pairs, every sig_name pair is a signature",
    ]);
  });
  test("a timestamp that is checked must be signed", () => {
    // With the default {body} recipe a replay under a fresh timestamp header would pass.
    expect(bad({ scheme: "hmac", header: "X", timestamp_header: "X-Ts" })).toEqual([
      "message: the timestamp is checked but not signed: put {ts} in the message (Slack: v0:{ts}:{body})",
    ]);
    expect(bad({ scheme: "hmac", header: "X", pairs: ",", message: "{body}" })).toHaveLength(1);
    expect(bad({ scheme: "ed25519", header: "X", timestamp_header: "X-Ts", message: "{body}" })).toHaveLength(1);
    expect(bad({ scheme: "hmac", header: "X", timestamp_field: "ts", message: "{ts}" })).toEqual([
      "message: timestamp_field is in the body: the message must sign {body}",
    ]);
    expect(bad({ scheme: "hmac", header: "X", timestamp_field: "ts" })).toEqual([]);
  });
  test("a split needs each element's own dedup id", () => {
    expect(bad({ scheme: "static-token", header: "X", split: "*" })).toEqual([
      "dedup: with split, the dedup id must be each element's own field (or none), not the request's",
    ]);
    expect(bad({ scheme: "static-token", header: "X", split: "*", dedup: "header:X-Id" })).toHaveLength(1);
    expect(bad({ scheme: "static-token", header: "X", split: "events", dedup: "eventId" })).toEqual([]);
    expect(bad({ scheme: "static-token", header: "X", split: "a b", dedup: "none" })[0]).toContain("split:");
    expect(bad({ scheme: "static-token", header: "X", split: "*", dedup: "const:x" })).toHaveLength(1);
    expect(
      bad({ scheme: "static-token", header: "X", split: "*", dedup: "id", event_type: "type", ignore: "processed" }),
    ).toEqual(["ignore: with split, each element has its own type: route the ones to drop instead"]);
  });
});
