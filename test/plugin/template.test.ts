// The template source's own rules, on requests built in memory: selectors, and every primitive
// the schemes share (tolerances, signature grammars, challenges, form bodies, splits).
import { describe, expect, test } from "bun:test";
import { hookRequest } from "../../src/plugin/hook-request.ts";
import { checkTemplate, type TemplateSettings, templateSource } from "../../src/plugin/template.ts";

const NOW = 1_800_000_000;

export function req(
  o: { body?: string | Uint8Array; headers?: Record<string, string>; url?: string; method?: string; now?: number } = {},
) {
  const body = typeof o.body === "string" ? new TextEncoder().encode(o.body) : (o.body ?? new Uint8Array());
  return hookRequest({
    method: o.method ?? "POST",
    url: o.url ?? "/hooks/t",
    headers: Object.entries(o.headers ?? {}),
    body,
    peer: "127.0.0.1",
    now: o.now ?? NOW,
  });
}

const plain = (over: Partial<TemplateSettings>): TemplateSettings => ({
  scheme: "static-token",
  header: "X-Token",
  key: "k",
  ...over,
});

describe("selectors", () => {
  test("a|b takes the first alternative with a value; a const: last is a default", () => {
    const s = templateSource(plain({ key: "data.object.customer|data.object.id", event_type: "type|const:unknown" }));
    const r = req();
    expect(s.key({ data: { object: { customer: "cus_1", id: "pi_1" } } }, r)).toBe("cus_1");
    expect(s.key({ data: { object: { id: "pi_1" } } }, r)).toBe("pi_1");
    // An empty string is no value either.
    expect(s.key({ data: { object: { customer: "", id: "pi_1" } } }, r)).toBe("pi_1");
    expect(() => s.key({ data: {} }, r)).toThrow("has no value");
    expect(s.eventType?.({ type: "charge.succeeded" }, r)).toBe("charge.succeeded");
    expect(s.eventType?.({}, r)).toBe("unknown");
  });

  test("alternatives mix headers and fields", () => {
    const s = templateSource(plain({ key: "k", dedup: "header:Idempotency-Key|header:X-Gitlab-Event-UUID" }));
    expect(s.dedupId?.({}, req({ headers: { "X-Gitlab-Event-UUID": "u-1" } }))).toBe("u-1");
    expect(s.dedupId?.({}, req({ headers: { "Idempotency-Key": "i-1", "X-Gitlab-Event-UUID": "u-1" } }))).toBe("i-1");
    expect(s.dedupId?.({}, req())).toBeNull();
  });

  test("keyof: names the first present field (Telegram's update kinds)", () => {
    const s = templateSource(
      plain({
        key: "message.chat.id|callback_query.message.chat.id",
        event_type: "keyof:message|edited_message|callback_query",
      }),
    );
    const cb = { update_id: 1, callback_query: { id: "q", message: { chat: { id: 42 } } } };
    expect(s.eventType?.(cb, req())).toBe("callback_query");
    expect(s.key(cb, req())).toBe("42");
    expect(s.eventType?.({ update_id: 2, message: { chat: { id: 7 } } }, req())).toBe("message");
    // A present null is absent.
    expect(s.eventType?.({ message: null, edited_message: { chat: { id: 7 } } }, req())).toBe("edited_message");
    expect(s.eventType?.({ poll: {} }, req())).toBe("");
  });

  test("check reads every alternative", () => {
    expect(checkTemplate({ scheme: "static-token", header: "X", key: "a.b|header:X-Y|const:z" })).toEqual([]);
    expect(checkTemplate({ scheme: "static-token", header: "X", key: "a.b|bad path" })).toEqual([
      { key: "key", message: 'bad selector "a.b|bad path"' },
    ]);
    expect(checkTemplate({ scheme: "static-token", header: "X", key: "k", event_type: "keyof:message|a b" })).toEqual([
      { key: "event_type", message: 'bad selector "keyof:message|a b"' },
    ]);
  });

  test("an unknown key says the template key it is close to, when one is", () => {
    expect(checkTemplate({ scheme: "static-token", header: "X", key: "k", evnt_type: "type" })).toEqual([
      { key: "evnt_type", message: "unknown template key (did you mean event_type?)" },
    ]);
    expect(checkTemplate({ scheme: "static-token", header: "X", key: "k", colour: "red" })).toEqual([
      { key: "colour", message: "unknown template key" },
    ]);
  });
});
