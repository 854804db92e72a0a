// Log lines that can repeat many times a second are printed at most once per window, the next
// one carrying how many were held back; distinct reasons never hide each other.
import { expect, test } from "bun:test";
import { FakeClock } from "../../src/clock.ts";
import { createLogger, logThreshold, REPEAT_WINDOW_S, RepeatLimiter } from "../../src/log.ts";
import { LOG_LINES } from "../helpers/intake.ts";

test("RepeatLimiter: the first goes out, the rest of the window are counted, the next says how many", () => {
  const clock = new FakeClock(0);
  const l = new RepeatLimiter(() => clock.now());
  expect(l.admit("disk full")).toBe(0);
  for (let i = 0; i < 1500; i++) expect(l.admit("disk full")).toBeNull();
  expect(l.admit("busy")).toBe(0); // another line is not held back by the first
  clock.advance(REPEAT_WINDOW_S);
  expect(l.admit("disk full")).toBe(1500);
  expect(l.admit("disk full")).toBeNull();
  // A clock that steps back never silences a line for good.
  clock.set(-100);
  expect(l.admit("disk full")).toBe(1);
});

test("Logger.limited: one line per window per message and reason, with repeated=N", () => {
  const clock = new FakeClock(1_700_000_000);
  const log = createLogger("test", { clock });
  const from = LOG_LINES.length;
  for (let i = 0; i < 50; i++) log.limited("error", "tick failed", { reason: "SQLITE_FULL" });
  log.limited("error", "tick failed", { reason: "SQLITE_BUSY" });
  clock.advance(REPEAT_WINDOW_S + 1);
  log.limited("error", "tick failed", { reason: "SQLITE_FULL" });
  const lines = LOG_LINES.slice(from);
  expect(lines).toHaveLength(3);
  expect(lines[0]).toMatch(/error +test: tick failed reason=SQLITE_FULL$/);
  expect(lines[1]).toMatch(/tick failed reason=SQLITE_BUSY$/);
  expect(lines[2]).toMatch(/tick failed reason=SQLITE_FULL repeated=49$/);
});

test("HOOKSPOOL_LOG_LEVEL: warn drops info lines, error keeps only errors; anything else is info", () => {
  expect(logThreshold({})).toBe("info");
  expect(logThreshold({ HOOKSPOOL_LOG_LEVEL: " WARN " })).toBe("warn");
  expect(logThreshold({ HOOKSPOOL_LOG_LEVEL: "error" })).toBe("error");
  expect(logThreshold({ HOOKSPOOL_LOG_LEVEL: "debug" })).toBe("info");
  const clock = new FakeClock(1_700_000_000);
  const said = (level: "info" | "warn" | "error") => {
    const log = createLogger("lvl", { clock, level }).child("sub");
    const from = LOG_LINES.length;
    log.info("queued", { source: "s" });
    log.warn("rejected", { reason: "too_large" });
    log.limited("warn", "rejected", { reason: "chunked" });
    log.error("tick failed", { reason: "E" });
    return LOG_LINES.slice(from).map((l) => l.replace(/^\S+ +(\w+) +lvl\.sub: (.*?)( \w+=.*)?$/, "$1 $2"));
  };
  expect(said("info")).toEqual(["info queued", "warn rejected", "warn rejected", "error tick failed"]);
  expect(said("warn")).toEqual(["warn rejected", "warn rejected", "error tick failed"]);
  expect(said("error")).toEqual(["error tick failed"]);
});

test("a text line: its second's timestamp, fields in their fixed order, control characters flattened", () => {
  const clock = new FakeClock(1_700_000_000.9);
  const log = createLogger("fmt", { clock, json: false });
  const from = LOG_LINES.length;
  log.info("queued", { bytes: 5, source: "a b", reason: "x\ny".padEnd(300, "z"), batch: 7 });
  clock.advance(0.2);
  log.info("queued", { source: "s" });
  const [a, b] = LOG_LINES.slice(from);
  // The reason, flattened and cut to 200 characters, holds a space now: quoted.
  expect(a).toBe(`2023-11-14T22:13:20Z info  fmt: queued source="a b" batch=7 bytes=5 reason="x y${"z".repeat(197)}"`);
  expect(b).toBe("2023-11-14T22:13:21Z info  fmt: queued source=s");
});
