// secret_encoding = "base64": an HMAC scheme keyed with the bytes the secret's base64 names
// (Airtable's macSecretBase64), in verify and in signing alike; the text itself no longer
// verifies; and the check keeps it to the schemes whose secret is an HMAC key.
import { describe, expect, test } from "bun:test";
import { createHmac } from "node:crypto";
import { hookRequest } from "../../src/plugin/hook-request.ts";
import { signTemplate } from "../../src/plugin/sign.ts";
import { checkTemplate, type TemplateSettings, templateSource } from "../../src/plugin/template.ts";

const SECRET = Buffer.from("kit-test key bytes \u0000\u00ff", "latin1").toString("base64");
const body = new TextEncoder().encode('{"base":{"id":"app1"},"webhook":{"id":"ach1"}}');
const t: TemplateSettings = {
  scheme: "hmac-sha256-hex",
  header: "X-Airtable-Content-MAC",
  prefix: "hmac-sha256=",
  secret_encoding: "base64",
  key: "webhook.id",
};
const verify = (tt: TemplateSettings, sig: string) =>
  templateSource(tt).verify(
    hookRequest({
      method: "POST",
      url: "/hooks/a",
      headers: [["X-Airtable-Content-MAC", sig]],
      body,
      peer: "127.0.0.1",
      now: 0,
    }),
    { get: () => SECRET },
  );

describe("secret_encoding", () => {
  test("base64: the decoded bytes key the MAC; the base64 text does not", async () => {
    const good = `hmac-sha256=${createHmac("sha256", Buffer.from(SECRET, "base64")).update(body).digest("hex")}`;
    const text = `hmac-sha256=${createHmac("sha256", SECRET).update(body).digest("hex")}`;
    expect(await verify(t, good)).toBe(true);
    expect(await verify(t, text)).toBe("mismatch");
    // Without it, the text is the key.
    expect(await verify({ ...t, secret_encoding: undefined }, text)).toBe(true);
  });

  test("signing uses the same key, so the kit's signatures verify", async () => {
    const signed = signTemplate(t, SECRET, body, 0);
    expect(await verify(t, signed.headers[0][1])).toBe(true);
  });

  test("the check: text or base64, and only for an HMAC key", () => {
    const problems = (x: Record<string, unknown>) => checkTemplate({ ...t, ...x }).map((p) => `${p.key}: ${p.message}`);
    expect(problems({})).toEqual([]);
    expect(problems({ secret_encoding: "hex" })).toEqual(['secret_encoding: expected "text" or "base64"']);
    expect(problems({ scheme: "static-token", prefix: undefined })[0]).toStartWith(
      "secret_encoding: only for an HMAC scheme",
    );
    expect(problems({ scheme: "hmac", message: "{body}", prefix: undefined })).toEqual([]);
  });
});
