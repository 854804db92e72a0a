// The crash suite: at every crash point a real hookspool process kills
// itself with SIGKILL, is restarted, and the database and the receiver are checked.
import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { CRASH_POINTS } from "../../src/testhook.ts";
import { scene } from "./harness.ts";
import { BINARY_POINTS, CASES } from "./points.ts";

const SRC = join(import.meta.dir, "..", "..", "src");

describe("coverage", () => {
  test("every point in CRASH_POINTS has a crash test", () => {
    const missing = CRASH_POINTS.filter((p) => !(CASES[p]?.length > 0));
    expect(missing, `crash points with no crash test: ${missing.join(", ")}`).toEqual([]);
    const unknown = Object.keys(CASES).filter((k) => !(CRASH_POINTS as readonly string[]).includes(k));
    expect(unknown, `crash tests for points that do not exist: ${unknown.join(", ")}`).toEqual([]);
  });

  test("every testHook() in src names a point in CRASH_POINTS", () => {
    const named: string[] = [];
    for (const f of readdirSync(SRC, { recursive: true }) as string[]) {
      if (!f.endsWith(".ts") || f === "testhook.ts") continue;
      const text = readFileSync(join(SRC, f), "utf8");
      for (const m of text.matchAll(/testHook\((["'`])([^"'`]+)\1\)/g)) named.push(m[2].replace("${i}", "0"));
    }
    const unknown = named.filter((p) => !(CRASH_POINTS as readonly string[]).includes(p));
    expect(unknown, `testHook() points missing from CRASH_POINTS: ${unknown.join(", ")}`).toEqual([]);
    for (const p of CRASH_POINTS)
      expect(
        named.some((n) => n === p || (p.startsWith("enqueue.after_copy.") && n === "enqueue.after_copy.0")),
        `${p} is not called anywhere in src`,
      ).toBe(true);
  });
});

describe("killed at each point (bun src/main.ts)", () => {
  for (const point of CRASH_POINTS) {
    for (const c of CASES[point]) test(`${point}: ${c.name}`, () => scene("bun", c.run), 20_000);
  }
});

describe("killed at representative points (compiled binary)", () => {
  for (const point of BINARY_POINTS) {
    for (const c of CASES[point]) test(`${point}: ${c.name}`, () => scene("binary", c.run), 30_000);
  }
});
