// hookspool.webhook: any signed or tokened JSON POST, described by the instance's settings. The
// kit's instance and one instance per scheme, each served from its own [bobbins.<i>] table.
import { expect } from "bun:test";
import { canSign } from "../../src/plugin/sign.ts";
import { SCHEMES, type Scheme } from "../../src/plugin/template.ts";
import { bobbinTest } from "./catalogue.ts";

bobbinTest("hookspool.webhook", "every scheme's capture is queued and delivered; a bad signature is 401", {
  answers: {
    "captures/accepted.http": 202,
    "captures/rejected.http": 401,
    "captures/schemes/hmac-sha1-base64-url.http": 202,
    "captures/schemes/hmac-sha1-hex.http": 202,
    "captures/schemes/hmac-sha256-base64.http": 202,
    "captures/schemes/hmac-sha256-hex.http": 202,
    "captures/schemes/hmac.http": 202,
    "captures/schemes/standard-webhooks.http": 202,
    "captures/schemes/static-token.http": 202,
    "captures/schemes/timestamped.http": 202,
  },
  afterwards(results) {
    const schemes = results
      .filter((r) => r.capture.file.startsWith("captures/schemes/"))
      .map((r) => r.capture.settings?.scheme);
    // Every scheme a shared secret signs; the public-key ones (ed25519, ecdsa-p256) verify under a
    // public key, not the kit's one secret: test/plugin/template.test.ts and their bobbins cover them.
    expect(schemes.sort()).toEqual((Object.keys(SCHEMES) as Scheme[]).filter((scheme) => canSign({ scheme })).sort());
  },
});
