// signTemplate against the template source's own verify: each scheme's signature verifies, and
// fails once the body, the secret or (for timestamped schemes) the clock moves.
import { describe, expect, test } from "bun:test";
import { generateKeyPairSync } from "node:crypto";
import { hookRequest } from "../../src/plugin/hook-request.ts";
import { isTimestamped, signsBody, signTemplate } from "../../src/plugin/sign.ts";
import { SCHEMES, type Scheme, type TemplateSettings, templateSource } from "../../src/plugin/template.ts";

const NOW = 1_714_564_800;
const SECRET = "whsec_c2lnbi10ZXN0LXNlY3JldC1ieXRlcw==";
const settings: Record<Scheme, TemplateSettings> = {
  "hmac-sha256-hex": { scheme: "hmac-sha256-hex", header: "X-Hub-Signature-256", prefix: "sha256=", key: "id" },
  "hmac-sha1-hex": { scheme: "hmac-sha1-hex", header: "X-Signature", key: "id" },
  "hmac-sha256-base64": { scheme: "hmac-sha256-base64", header: "X-Signature", key: "id" },
  "hmac-sha1-base64-url": {
    scheme: "hmac-sha1-base64-url",
    header: "X-Trello-Webhook",
    callback_url: "https://hooks.example.com/t",
    key: "id",
  },
  "standard-webhooks": { scheme: "standard-webhooks", key: "id" },
  timestamped: { scheme: "timestamped", header: "Stripe-Signature", key: "id" },
  "static-token": { scheme: "static-token", param: "token", key: "id" },
  hmac: {
    scheme: "hmac",
    header: "X-Slack-Signature",
    prefix: "v0=",
    timestamp_header: "X-Slack-Request-Timestamp",
    message: "v0:{ts}:{body}",
    key: "id",
  },
  ed25519: { scheme: "ed25519", header: "X-Signature-Ed25519", timestamp_header: "X-Signature-Timestamp", key: "id" },
  "ecdsa-p256": {
    scheme: "ecdsa-p256",
    header: "X-Twilio-Email-Event-Webhook-Signature",
    timestamp_header: "X-Twilio-Email-Event-Webhook-Timestamp",
    key: "id",
  },
};

// The public-key schemes verify under the sender's public key and are signed with its private key.
const pem = (k: { export(o: { format: "pem"; type: "pkcs8" }): string | Buffer }) =>
  k.export({ format: "pem", type: "pkcs8" }).toString();
const ed = generateKeyPairSync("ed25519");
const ec = generateKeyPairSync("ec", { namedCurve: "prime256v1" });
const otherEd = generateKeyPairSync("ed25519");
const otherEc = generateKeyPairSync("ec", { namedCurve: "prime256v1" });
const PUBLIC: Partial<Record<Scheme, string>> = {
  ed25519: ed.publicKey.export({ format: "der", type: "spki" }).subarray(12).toString("hex"),
  "ecdsa-p256": ec.publicKey.export({ format: "der", type: "spki" }).toString("base64"),
};
const PRIVATE: Partial<Record<Scheme, [string, string]>> = {
  ed25519: [pem(ed.privateKey), pem(otherEd.privateKey)],
  "ecdsa-p256": [pem(ec.privateKey), pem(otherEc.privateKey)],
};

const secrets = (s: string) => ({ get: () => s, has: () => true }) as never;
function verdict(t: TemplateSettings, secret: string, body: Uint8Array, signedAt: number, now: number, sent = body) {
  // "Another secret" for a public-key scheme is another key pair's private key.
  const keys = PRIVATE[t.scheme];
  const s = signTemplate(t, secret, body, signedAt, "msg_1", keys ? keys[secret === SECRET ? 0 : 1] : undefined);
  const req = hookRequest({
    method: "POST",
    url: `/hooks/x${s.query ? `?${s.query}` : ""}`,
    headers: s.headers,
    body: sent,
    peer: "127.0.0.1",
    now,
  });
  return templateSource(t).verify(req, secrets(PUBLIC[t.scheme] ?? SECRET));
}

describe("signTemplate", () => {
  test("covers every scheme the template source has", () => {
    expect(Object.keys(settings).sort()).toEqual(Object.keys(SCHEMES).sort());
  });

  const body = new TextEncoder().encode('{"id":"a1"}');
  for (const [scheme, t] of Object.entries(settings)) {
    test(`${scheme}: verifies, and not under another secret`, () => {
      expect(verdict(t, SECRET, body, NOW, NOW)).toBe(true);
      expect(verdict(t, "another-secret", body, NOW, NOW)).not.toBe(true);
    });
    if (signsBody(t)) {
      test(`${scheme}: a changed body does not verify`, () => {
        expect(verdict(t, SECRET, body, NOW, NOW, new TextEncoder().encode('{"id":"a2"}'))).not.toBe(true);
      });
    }
    test(`${scheme}: ${isTimestamped(t) ? "refused" : "still verifies"} 301 s later`, () => {
      expect(verdict(t, SECRET, body, NOW, NOW + 301) === true).toBe(!isTimestamped(t));
    });
  }

  test("a static token in a header carries its prefix", () => {
    expect(
      signTemplate({ scheme: "static-token", header: "Authorization", prefix: "Bearer " }, "tok", new Uint8Array(), NOW)
        .headers,
    ).toEqual([["Authorization", "Bearer tok"]]);
  });
});
