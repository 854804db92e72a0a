// The template's unsigned echo, offline: a verification request that carries no signature
// (Dropbox's GET ?challenge=, Okta's X-Okta-Verification-Challenge, Microsoft Graph's POST
// ?validationToken=) answered before verify with its value and nothing else; a request without
// the value, or of another method, is not one; a value that is not printable ASCII, or too long,
// is 400; and the check of the three settings.
import { describe, expect, test } from "bun:test";
import { hookRequest } from "../../src/plugin/hook-request.ts";
import { checkTemplate, type TemplateSettings, templateSource } from "../../src/plugin/template.ts";

const req = (method: string, url: string, headers: [string, string][] = [], body = "") =>
  hookRequest({ method, url, headers, body: new TextEncoder().encode(body), peer: "127.0.0.1", now: 0 });
const base: TemplateSettings = { scheme: "hmac-sha256-hex", header: "X-Sig", key: "const:k" };
const echoOf = (t: Partial<TemplateSettings>) => {
  const p = templateSource({ ...base, ...t });
  expect(p.challengeUnauthenticated).toBe(true);
  return (r: ReturnType<typeof req>) => p.challenge?.(r, { get: () => "unused" }) ?? null;
};

describe("echo_unsigned", () => {
  test("query, GET, text: the value alone, text/plain, nosniff", async () => {
    const echo = echoOf({ echo_unsigned: "query:challenge" });
    expect(await echo(req("GET", "/hooks/x?challenge=abc123"))).toEqual({
      status: 200,
      body: "abc123",
      headers: {
        "Cache-Control": "no-store",
        "X-Content-Type-Options": "nosniff",
        "Content-Type": "text/plain; charset=utf-8",
      },
    });
    expect(await echo(req("GET", "/hooks/x"))).toBeNull();
    expect(await echo(req("POST", "/hooks/x?challenge=abc123"))).toBeNull();
  });

  test("header, GET, json: {field: value}", async () => {
    const echo = echoOf({ echo_unsigned: "header:X-Okta-Verification-Challenge", echo_reply: "json:verification" });
    const r = await echo(req("GET", "/hooks/x", [["X-Okta-Verification-Challenge", "Me_rShK8"]]));
    expect(r?.status).toBe(200);
    expect(r?.body).toBe('{"verification":"Me_rShK8"}');
    expect(r?.headers?.["Content-Type"]).toBe("application/json");
  });

  test("query, POST: Microsoft Graph's validationToken, spaces and colons kept", async () => {
    const echo = echoOf({ echo_unsigned: "query:validationToken", echo_method: "POST" });
    const token = "Validation: Testing client application reachability for subscription Request-Id: 3b3f9821";
    const r = await echo(req("POST", `/hooks/x?validationToken=${encodeURIComponent(token)}`));
    expect(r?.body).toBe(token);
    // A notification (no validationToken) goes on to verify.
    expect(await echo(req("POST", "/hooks/x", [], '{"value":[]}'))).toBeNull();
  });

  test("a value that is not printable ASCII, empty or over 1,024 characters is 400, echoing nothing", async () => {
    const echo = echoOf({ echo_unsigned: "query:challenge" });
    for (const v of ["a%01b", "%3Cscript%3E%0A", "%C3%A9", "x".repeat(1025), ""]) {
      const r = await echo(req("GET", `/hooks/x?challenge=${v}`));
      expect({ v, status: r?.status, body: r?.body ?? "" }).toEqual({ v, status: 400, body: "" });
    }
    expect((await echo(req("GET", `/hooks/x?challenge=${"x".repeat(1024)}`)))?.status).toBe(200);
  });
});

describe("the check", () => {
  const problems = (t: Record<string, unknown>) =>
    checkTemplate({ ...base, ...t }).map((p) => `${p.key}: ${p.message}`);
  test("the forms, and one handshake per template", () => {
    expect(problems({ echo_unsigned: "query:challenge" })).toEqual([]);
    expect(
      problems({ echo_unsigned: "header:X-Okta-Verification-Challenge", echo_reply: "json:verification" }),
    ).toEqual([]);
    expect(problems({ echo_unsigned: "body:x" })[0]).toStartWith("echo_unsigned: expected");
    expect(problems({ echo_unsigned: "query:challenge", head_handshake: true })[0]).toStartWith(
      "echo_unsigned: one handshake per template",
    );
    expect(problems({ echo_unsigned: "query:challenge", echo_method: "PUT" })).toEqual([
      "echo_method: expected GET or POST",
    ]);
    expect(problems({ echo_unsigned: "query:challenge", echo_reply: "xml" })).toEqual([
      'echo_reply: expected "text" or "json:<field>"',
    ]);
    expect(problems({ echo_reply: "text" })).toEqual(["echo_reply: needs echo_unsigned"]);
  });
});
