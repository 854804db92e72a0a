// Crash points (spec 18): when HOOKSPOOL_TEST_HOOK names a point, the process SIGKILLs itself there.

const armed = process.env.HOOKSPOOL_TEST_HOOK || "";

/**
 * Mark a crash point. `testHook("enqueue.before_commit")` kills the process when
 * HOOKSPOOL_TEST_HOOK is exactly that name; otherwise it costs one string compare.
 */
export function testHook(point: string): void {
  if (armed !== "" && armed === point) {
    process.kill(process.pid, "SIGKILL");
  }
}
