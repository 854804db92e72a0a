// Every crash point of src/testhook.ts and the crash cases that prove the promise there. The
// Record type makes a point without cases a compile error; crash.test.ts checks it at run time.
import {
  afterCommitWithDedupId,
  afterCommitWithoutDedupId,
  killedAfterBodyFile,
  killedBeforeCommit,
  killedInGroup,
  killedInQuarantine,
} from "./cases-intake.ts";
import {
  killedAfterResponse,
  killedBeforeRequest,
  killedInClaim,
  killedInMark,
  killedInSeal,
} from "./cases-dispatch.ts";
import { killedAfterJournal, killedInPollTick } from "./cases-processor.ts";
import { killedInRetention } from "./cases-retention.ts";
import type { CrashCase, CrashPoint } from "./harness.ts";

export const CASES: Record<CrashPoint, CrashCase[]> = {
  "enqueue.after_copy.0": [killedBeforeCommit("enqueue.after_copy.0")],
  "enqueue.after_copy.1": [killedBeforeCommit("enqueue.after_copy.1")],
  "enqueue.after_savepoint": [killedBeforeCommit("enqueue.after_savepoint"), killedInGroup],
  "enqueue.before_commit": [killedBeforeCommit("enqueue.before_commit")],
  "intake.after_commit": [afterCommitWithDedupId, afterCommitWithoutDedupId],
  "intake.after_body_file": [killedAfterBodyFile],
  "quarantine.before_commit": [killedInQuarantine],
  "seal.before_commit": [killedInSeal],
  "claim.before_commit": [killedInClaim],
  "deliver.before_request": [killedBeforeRequest],
  "deliver.after_response": [killedAfterResponse],
  "mark.before_commit": [killedInMark],
  "retention.before_commit": [killedInRetention],
  "processor.after_journal": [killedAfterJournal],
  "poll.after_enqueue": [killedInPollTick],
};

/** Also run with the compiled binary: one intake point and two dispatcher points. */
export const BINARY_POINTS: CrashPoint[] = ["enqueue.before_commit", "deliver.after_response", "mark.before_commit"];
