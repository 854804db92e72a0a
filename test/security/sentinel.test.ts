// The suite-wide sentinel check (test/helpers/preload.ts runs assertNoSentinelInNewLogs after
// every test of every file) really catches a planted secret or payload in a log line. Each
// offending line is checked here, inside expect().toThrow(), so the checked counter moves past
// it and the global afterEach of this test sees nothing new.
import { expect, test } from "bun:test";
import { createLogger } from "../../src/log.ts";
import { assertNoSentinelInNewLogs, LOG_LINES, PAYLOAD_SENTINEL, SECRET_SENTINEL } from "../helpers/logs.ts";

const log = createLogger("sentinel-test");

test("a log line carrying the secret sentinel makes the check throw, naming the kind", () => {
  assertNoSentinelInNewLogs(); // start from a clean slate
  log.warn("unverified", { source: "s", reason: `token ${SECRET_SENTINEL}` });
  expect(LOG_LINES.at(-1)).toContain(SECRET_SENTINEL);
  expect(() => assertNoSentinelInNewLogs()).toThrow(/planted sentinel \(secret\)/);
  // Checked once: the same line does not fail the next check (or this test's afterEach).
  expect(() => assertNoSentinelInNewLogs()).not.toThrow();
});

test("a payload sentinel anywhere in a line, and among clean lines, is caught too", () => {
  log.info("queued", { source: "s", batch: 1 });
  log.error("failed", { destination: `d-${PAYLOAD_SENTINEL}` });
  log.info("delivered", { batch: 1 });
  expect(() => assertNoSentinelInNewLogs()).toThrow(/planted sentinel \(payload\)/);
  expect(() => assertNoSentinelInNewLogs()).not.toThrow();
});

test("clean lines pass", () => {
  log.info("queued", { source: "s", batch: 2, bytes: 10 });
  expect(() => assertNoSentinelInNewLogs()).not.toThrow();
});
