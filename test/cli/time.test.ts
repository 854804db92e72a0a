import { expect, test } from "bun:test";
import { parseSince } from "../../src/time.ts";

test("--since takes Unix seconds, ISO dates and ages", () => {
  const now = 1_700_000_000;
  expect(parseSince("1699999000", now)).toBe(1_699_999_000);
  expect(parseSince("30m", now)).toBe(now - 1800);
  expect(parseSince("24h", now)).toBe(now - 86400);
  expect(parseSince("7d", now)).toBe(now - 7 * 86400);
  expect(parseSince("2023-11-14T22:13:20Z", now)).toBe(now);
  expect(() => parseSince("yesterday", now)).toThrow("expected Unix seconds");
  expect(() => parseSince("5y", now)).toThrow();
});
