// Child process for crash tests: one retention pass over the spool at argv[2] at time argv[3]
// with batchSize argv[4] and the default policy, then print the counts.
// HOOKSPOOL_TEST_HOOK=retention.before_commit kills it inside its first transaction.
import { openSpool } from "../../../src/store/sqlite/db.ts";
import { DEFAULT_DEDUP_WINDOW_S } from "../../../src/store/retention.ts";
import { runRetention } from "../../../src/store/sqlite/retention.ts";

const spool = openSpool(process.argv[2]);
const counts = await runRetention(
  spool,
  { deliveredDays: 7, attemptsDays: 30, droppedDays: 7, issuesDays: 90, dedupWindowS: () => DEFAULT_DEDUP_WINDOW_S },
  Number(process.argv[3]),
  { batchSize: Number(process.argv[4] ?? 1000) },
);
spool.close();
console.log(JSON.stringify(counts));
