// Loaded before every test file (bunfig.toml): hermetic defaults, and the sentinel check that
// runs after every test of the suite: no log line may carry a planted secret or payload.
import { afterEach, setDefaultTimeout } from "bun:test";
import { writeRegistry } from "../../scripts/gen-bobbins.ts";
import { assertNoSentinelInNewLogs } from "./logs.ts";

// The built-in bobbins' registry follows bobbins/ (a file added there is in the next run).
writeRegistry();

process.env.HOOKSPOOL_ALERT_DRY = "1";
process.env.TZ = "UTC";
delete process.env.HOOKSPOOL_HOME;
delete process.env.HOOKSPOOL_CONFIG;
delete process.env.HOOKSPOOL_DB;
delete process.env.HOOKSPOOL_TEST_HOOK;
delete process.env.HOOKSPOOL_TEST_HOOK_ACTION;

// bunfig.toml's [test] timeout does not reach the workers of `bun test --parallel`: said here too
// (and on scripts/run-tests.ts's command line, the one place a --no-isolate worker's later files see).
setDefaultTimeout(20_000);

afterEach(() => assertNoSentinelInNewLogs());
