// dropbox.files: Dropbox's app webhooks (X-Dropbox-Signature, the hex HMAC-SHA256 of the body
// under the app secret), through a real `hookspool run`: a notification queued and delivered,
// the verification GET's challenge echoed as text/plain with nosniff before any verification and
// never stored, a bad signature 401; and the known answer of a published verifier.
import { expect, test } from "bun:test";
import { createHmac } from "node:crypto";
import { capturesOf } from "../../src/bobbin/captures.ts";
import { bobbinTest, builtin } from "./catalogue.ts";

bobbinTest("dropbox.files", "a notification is queued and delivered, the challenge is echoed, a bad signature is 401", {
  answers: {
    "captures/accepted.http": 202,
    "captures/challenge.http": { method: "GET", status: 200, body: "DvR3SMWbHqV9ZtLk4x" },
    "captures/rejected.http": { status: 401, body: "" },
  },
});

test("the signature is hex HMAC-SHA256 of the raw body: a published verifier's known answer", () => {
  // hapi-dropbox-webhooks 1.1.0's test/index.js: its secret, body and signature.
  const sig = createHmac("sha256", "the_secret").update('{"delta": {"users": [12345]}}').digest("hex");
  expect(sig).toBe("0a8c16b085420b960dc78664279fe09e936a2a01b1f91064869d9e77dfd64529");
  const rejected = capturesOf(builtin("dropbox.files").files()).find((c) => c.file === "captures/rejected.http");
  expect(rejected?.request.headers.find(([k]) => k === "X-Dropbox-Signature")?.[1]).toBe(sig);
});
