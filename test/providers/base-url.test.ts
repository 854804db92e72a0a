// The api_base_url rule every bobbin shares: the provider's own when empty, https, or plain
// http to this machine only, never with credentials, a query or a fragment.
import { expect, test } from "bun:test";
import { apiBaseUrl } from "../../src/providers/base-url.ts";

test("empty is the provider's own; https and loopback http pass, trailing slashes dropped", () => {
  expect(apiBaseUrl("")).toBeUndefined();
  expect(apiBaseUrl(undefined)).toBeUndefined();
  expect(apiBaseUrl("https://api.example.com/v1/")).toBe("https://api.example.com/v1");
  expect(apiBaseUrl("http://127.0.0.1:8080")).toBe("http://127.0.0.1:8080");
  expect(apiBaseUrl("http://localhost:9/x")).toBe("http://localhost:9/x");
});

test("plain http elsewhere, credentials, a query, a fragment, not a URL: refused", () => {
  for (const bad of [
    "http://api.example.com",
    "https://u:p@api.example.com",
    "https://api.example.com/?k=v",
    "https://api.example.com/#f",
    "not a url",
    3,
  ]) {
    expect(apiBaseUrl(bad)).toBeNull();
  }
});
