// An event's version: a template's `version` selector (a field or a header, like key and
// dedup), and the one number the spool stores for it: numbers and numeric text as they are, an
// RFC 3339 or ISO 8601 time as epoch seconds with its fraction and offset, anything else none.
import { describe, expect, test } from "bun:test";
import { rfc3339Seconds, versionNumber } from "../../src/plugin/event-version.ts";
import { hookRequest } from "../../src/plugin/hook-request.ts";
import { checkTemplate, templateHeaders, templateSource } from "../../src/plugin/template.ts";

const req = (o: { headers?: Record<string, string> } = {}) =>
  hookRequest({
    method: "POST",
    url: "/hooks/t",
    headers: Object.entries(o.headers ?? {}),
    body: new Uint8Array(),
    peer: "127.0.0.1",
    now: 1_800_000_000,
  });

describe("versionNumber", () => {
  test("numbers and numeric text as they are (epoch seconds, milliseconds, a counter)", () => {
    expect(versionNumber(1_700_000_000)).toBe(1_700_000_000);
    expect(versionNumber("1700000000123")).toBe(1_700_000_000_123);
    expect(versionNumber(" 42 ")).toBe(42);
    expect(versionNumber("-3.5")).toBe(-3.5);
    expect(versionNumber("1e3")).toBe(1000);
  });

  test("an RFC 3339 time is epoch seconds: its fraction kept, its offset applied", () => {
    expect(versionNumber("2024-01-01T00:00:00Z")).toBe(1_704_067_200);
    expect(versionNumber("2024-01-01T01:30:00+01:30")).toBe(1_704_067_200);
    expect(versionNumber("2023-12-31T23:00:00-01:00")).toBe(1_704_067_200);
    // Shopify's X-Shopify-Triggered-At has nanoseconds: a double keeps them to about a microsecond.
    expect(versionNumber("2024-01-01T00:00:00.123456789Z")).toBeCloseTo(1_704_067_200.123457, 5);
    expect(rfc3339Seconds("2024-01-01t00:00:00.5z")).toBe(1_704_067_200.5);
    expect(versionNumber("2024-01-01 00:00:00Z")).toBe(1_704_067_200);
    // ISO 8601 as senders also write it: an offset without its colon or minutes, a comma before
    // the fraction, no zone at all (UTC).
    expect(versionNumber("2024-01-01T01:30:00+0130")).toBe(1_704_067_200);
    expect(versionNumber("2024-01-01T02:00:00+02")).toBe(1_704_067_200);
    expect(versionNumber("2024-01-01T00:00:00,25Z")).toBe(1_704_067_200.25);
    expect(versionNumber("2024-01-01T00:00:00")).toBe(1_704_067_200);
    expect(versionNumber("2024-01-01T00:00:00.750")).toBe(1_704_067_200.75);
    // Ordered as the times are, across offsets.
    expect(versionNumber("2024-01-01T00:59:59+01:00") as number).toBeLessThan(
      versionNumber("2024-01-01T00:00:00.001Z") as number,
    );
  });

  test("anything else is no version", () => {
    for (const v of [null, undefined, true, {}, [], "", "  ", "abc", "12abc", NaN, Infinity, "1e999"])
      expect(versionNumber(v)).toBeNull();
    for (const t of ["2024-02-30T00:00:00Z", "2024-13-01T00:00:00Z", "2024-01-01T24:00:00Z", "2024-01-01"])
      expect(versionNumber(t)).toBeNull();
    for (const t of ["2024-01-01T00:00:00+1:00", "2024-01-01T00:00:00 Z", "2024-01-01T00:00:00+01:0"])
      expect(versionNumber(t)).toBeNull();
  });
});

describe("the template's version selector", () => {
  test("a field or a header, alternatives as every selector takes them; checked like one", () => {
    const s = templateSource({
      scheme: "static-token",
      header: "X-Token",
      key: "k",
      version: "header:X-Shopify-Triggered-At|field:created",
    });
    const r = req({ headers: { "X-Shopify-Triggered-At": "2024-01-01T00:00:00Z" } });
    expect(s.version?.({ created: 5 }, r)).toBe("2024-01-01T00:00:00Z");
    expect(s.version?.({ created: 5 }, req())).toBe("5");
    expect(s.version?.({}, req())).toBeNull();
    expect(templateSource({ scheme: "static-token", header: "X-Token", key: "k" }).version).toBeUndefined();
    // A quarantined request keeps the header a replay needs to read the version again.
    expect(
      templateHeaders({
        scheme: "static-token",
        header: "X-Token",
        key: "k",
        version: "header:X-Shopify-Triggered-At",
      }),
    ).toContain("X-Shopify-Triggered-At");
    expect(checkTemplate({ scheme: "static-token", header: "X-Token", key: "k", version: "a..b" })).toEqual([
      { key: "version", message: 'bad selector "a..b"' },
    ]);
    expect(checkTemplate({ scheme: "static-token", header: "X-Token", key: "k", version: 5 })).toEqual([
      { key: "version", message: "expected a non-empty string" },
    ]);
  });
});
