// The template's learning handshakes, offline: which request offers a secret and what answers it
// (Asana echoes X-Hook-Secret; Notion's unsigned verification_token POST), which does not, and
// the check of the `learn` setting.
import { describe, expect, test } from "bun:test";
import { hookRequest } from "../../src/plugin/hook-request.ts";
import { checkTemplate, type TemplateSettings, templateSource } from "../../src/plugin/template.ts";

const req = (method: string, body: string, headers: [string, string][] = []) =>
  hookRequest({ method, url: "/hooks/x", headers, body: new TextEncoder().encode(body), peer: "127.0.0.1", now: 0 });
const asana: TemplateSettings = {
  scheme: "hmac-sha256-hex",
  header: "X-Hook-Signature",
  learn: "header:X-Hook-Secret",
  key: "resource.gid",
  split: "events",
  dedup: "none",
};
const notion: TemplateSettings = {
  scheme: "hmac-sha256-hex",
  header: "X-Notion-Signature",
  prefix: "sha256=",
  learn: "field:verification_token",
  key: "entity.id",
};

describe("learn", () => {
  test("header: a POST carrying the header offers its value and is answered 200 with it echoed", () => {
    const learn = templateSource(asana).learn;
    expect(learn?.(req("POST", "", [["X-Hook-Secret", "abc123"]]))).toEqual({
      secret: "abc123",
      response: { status: 200, body: "", headers: { "X-Hook-Secret": "abc123" } },
    });
    expect(learn?.(req("POST", '{"events":[]}', [["X-Hook-Signature", "00"]]))).toBeNull();
    expect(learn?.(req("GET", "", [["X-Hook-Secret", "abc123"]]))).toBeNull();
  });

  test(
    "field: an unsigned JSON POST holding the field offers it; a signed one, another body or an " +
      "empty value does not",
    () => {
      const learn = templateSource(notion).learn;
      expect(learn?.(req("POST", '{"verification_token":"secret_x"}'))).toEqual({
        secret: "secret_x",
        response: { status: 200, body: "", headers: {} },
      });
      expect(
        learn?.(req("POST", '{"verification_token":"secret_x"}', [["X-Notion-Signature", "sha256=00"]])),
      ).toBeNull();
      expect(learn?.(req("POST", '{"type":"page.created"}'))).toBeNull();
      expect(learn?.(req("POST", '{"verification_token":""}'))).toBeNull();
      expect(learn?.(req("POST", "not json"))).toBeNull();
    },
  );

  test("a template without learn learns nothing", () => {
    expect(templateSource({ scheme: "hmac-sha256-hex", header: "X-Sig", key: "k" }).learn).toBeUndefined();
  });

  test(
    "the check: the two forms only, not with get_verify or head_handshake, a field form needs its " +
      "signature header",
    () => {
      const problems = (t: Record<string, unknown>) =>
        checkTemplate({ scheme: "hmac-sha256-hex", header: "X-Sig", key: "k", ...t }).map(
          (p) => `${p.key}: ${p.message}`,
        );
      expect(problems({ learn: "header:X-Hook-Secret" })).toEqual([]);
      expect(problems({ learn: "field:verification_token" })).toEqual([]);
      expect(problems({ learn: "query:token" })[0]).toStartWith("learn: expected");
      expect(problems({ learn: "header:bad name" })[0]).toStartWith("learn: expected");
      expect(problems({ learn: "header:X-Hook-Secret", head_handshake: true })).toContain(
        "learn: a learning handshake cannot be combined with get_verify or head_handshake",
      );
      expect(
        checkTemplate({ scheme: "static-token", param: "t", key: "k", learn: "field:token" }).map((p) => p.message),
      ).toContain("a field handshake is told apart from events by the missing signature header: set header");
    },
  );
});
