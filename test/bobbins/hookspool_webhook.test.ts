// hookspool.webhook: any signed or tokened JSON POST, described by the instance's settings. The
// kit's instance and one instance per scheme, each served from its own [bobbins.<i>] table.
import { expect, test } from "bun:test";
import { canSign } from "../../src/plugin/sign.ts";
import { SCHEMES, type Scheme } from "../../src/plugin/template.ts";
import { builtin, expectAsCaptured, runCatalogue } from "./catalogue.ts";

test("every scheme's capture is queued and delivered; a bad signature is 401", async () => {
  const results = await runCatalogue(builtin("hookspool.webhook"));
  expectAsCaptured(results);
  const schemes = results.filter((r) => r.capture.file.startsWith("captures/schemes/")).map((r) => r.capture.settings?.scheme);
  // Every scheme a shared secret signs; the public-key ones (ed25519, ecdsa-p256) verify under a
  // public key, not the kit's one secret: test/plugin/template.test.ts and their bobbins cover them.
  expect(schemes.sort()).toEqual((Object.keys(SCHEMES) as Scheme[]).filter((scheme) => canSign({ scheme })).sort());
  expect(results.find((r) => r.capture.file === "captures/rejected.http")?.status).toBe(401);
});
