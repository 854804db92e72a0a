// Log lines that can repeat many times a second are printed at most once per window, the next
// one carrying how many were held back; distinct reasons never hide each other.
import { expect, test } from "bun:test";
import { FakeClock } from "../../src/clock.ts";
import { createLogger, REPEAT_WINDOW_S, RepeatLimiter } from "../../src/log.ts";
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
