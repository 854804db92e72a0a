// Every log line any in-process logger writes during the test run, and the sentinels that must
// never appear in one: no secret, body or header ever reaches a log.
import { setLogSink } from "../../src/log.ts";

/** Planted in secrets by the tests: never in a log line or a database column. */
export const SECRET_SENTINEL = "SECRETSENTINEL9c1f";
/** Planted in payloads by the tests: stored in events, never in a log line. */
export const PAYLOAD_SENTINEL = "PAYLOADSENTINEL4b7e";
export const SENTINELS = [SECRET_SENTINEL, PAYLOAD_SENTINEL] as const;

export const LOG_LINES: string[] = [];
let checked = 0;

setLogSink((line) => {
  LOG_LINES.push(line);
  if (process.env.HOOKSPOOL_TEST_LOGS) process.stderr.write(`${line}\n`);
});

/** Throw when a line logged since the last call carries a sentinel (run after every test). */
export function assertNoSentinelInNewLogs(): void {
  const fresh = LOG_LINES.slice(checked);
  checked = LOG_LINES.length;
  for (const line of fresh) {
    for (const s of SENTINELS) {
      if (line.includes(s))
        throw new Error(
          `a log line carries a planted sentinel (${s === SECRET_SENTINEL ? "secret" : "payload"}): ` +
            `${line.slice(0, 160)}`,
        );
    }
  }
}
