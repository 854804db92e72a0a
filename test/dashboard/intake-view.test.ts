// The dashboard's reading of the intake's /metrics label values: what the intake escapes comes
// back as it was written, text beyond ASCII included (source names are the operator's own words).
import { describe, expect, test } from "bun:test";
import { parseIntakeMetrics, unescapeLabelValue } from "../../src/dashboard/intake-view.ts";
import { IntakeMetrics } from "../../src/intake/metrics.ts";

describe("label values", () => {
  test("the exposition format's escapes are read back: backslash, double quote, line feed", () => {
    expect(unescapeLabelValue(String.raw`a\\b \"c\" d\ne`)).toBe('a\\b "c" d\ne');
  });

  test("text beyond ASCII comes back unchanged, escaped or not, astral code points whole", () => {
    expect(unescapeLabelValue("café ünïcödé 日本語 🦆")).toBe("café ünïcödé 日本語 🦆");
    // Plain strings, not String.raw: Bun's transpiler writes a raw template's non-ASCII as \u escapes.
    expect(unescapeLabelValue('\\é \\🦆 \\"ß\\"')).toBe('é 🦆 "ß"');
  });

  test("a non-ASCII source name goes through the intake's /metrics text and back the same", () => {
    const names = ["café", 'Zürich "Süd"', "日本\\語", "ente 🦆\nzwei"];
    const m = new IntakeMetrics();
    for (const n of names) {
      m.received1(n);
      m.rejected1(n, "unverified");
    }
    const v = parseIntakeMetrics(m.render());
    expect(Object.keys(v.received).sort()).toEqual([...names].sort());
    for (const n of names) expect(v.refused[n]).toEqual({ unverified: 1 });
  });
});
