// Child process for crash tests: enqueue one event with a primary and two tee copies into the
// spool at argv[2], then print the result. HOOKSPOOL_TEST_HOOK may kill it part-way.
import { openSpool } from "../../../src/store/sqlite/db.ts";
import { enqueue } from "../../../src/store/sqlite/enqueue.ts";

const spool = openSpool(process.argv[2]);
const w = { quiet_s: 0, max_s: 0, max_events: 500, max_bytes: 786432 };
const r = enqueue(spool, {
  source: "s",
  key: "k",
  eventType: "t",
  dedupId: "once",
  payload: '{"hello":"world"}',
  raw: null,
  headers: {},
  copies: [
    { route: "r", destination: "http:main", tee: false, window: w },
    { route: "tee1", destination: "hermes:a", tee: true, window: w },
    { route: "tee2", destination: "script:b", tee: true, window: w },
  ],
  dedupWindowS: 86400,
});
console.log(JSON.stringify(r));
