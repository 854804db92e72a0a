// Crash points: when HOOKSPOOL_TEST_HOOK names a point, the process SIGKILLs itself there.
// With HOOKSPOOL_TEST_HOOK_ACTION=stop it SIGSTOPs instead, so a test can copy the database files
// mid-transaction (the power-loss simulation) before killing it; with =fail the transaction there
// throws the SQLite error HOOKSPOOL_TEST_HOOK_CODE (default SQLITE_FULL) the first
// HOOKSPOOL_TEST_HOOK_TIMES times (default 1), as a full disk would at that moment.

const armed = process.env.HOOKSPOOL_TEST_HOOK || "";
const action = process.env.HOOKSPOOL_TEST_HOOK_ACTION ?? "kill";
let failures = Number(process.env.HOOKSPOOL_TEST_HOOK_TIMES ?? "1");

/** Every crash point, so tests can check they cover them all. */
export const CRASH_POINTS = [
  "enqueue.after_copy.0",
  "enqueue.after_copy.1",
  "enqueue.after_savepoint",
  "enqueue.before_commit",
  "intake.after_commit",
  "intake.after_body_file",
  "quarantine.before_commit",
  "seal.before_commit",
  "claim.before_commit",
  "deliver.before_request",
  "deliver.after_response",
  "mark.before_commit",
  "retention.before_commit",
  "processor.after_journal",
  "poll.after_enqueue",
] as const;

/**
 * Mark a crash point. `testHook("enqueue.before_commit")` kills the process when
 * HOOKSPOOL_TEST_HOOK is exactly that name; otherwise it costs one string compare.
 */
export function testHook(point: string): void {
  if (armed === "" || armed !== point) return;
  if (action === "fail") {
    if (failures-- <= 0) return;
    const code = process.env.HOOKSPOOL_TEST_HOOK_CODE || "SQLITE_FULL";
    throw Object.assign(new Error(`test hook ${point}: ${code}`), { name: "SQLiteError", code });
  }
  process.kill(process.pid, action === "stop" ? "SIGSTOP" : "SIGKILL");
}
