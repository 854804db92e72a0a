// Child process for the held-lock tests: open the spool at argv[2], take its write lock (BEGIN
// IMMEDIATE), print "held", and keep it until stdin closes or argv[3] seconds pass; then roll
// back, print "released" and exit. Another process holding the lock, as a long `prune --vacuum`
// or a sqlite3 shell would.
import { Database } from "bun:sqlite";

const db = new Database(process.argv[2]);
db.run("PRAGMA busy_timeout = 5000");
db.run("BEGIN IMMEDIATE");
console.log("held");
const seconds = Number(process.argv[3] ?? "30");
const release = () => {
  if (db.inTransaction) db.run("ROLLBACK");
  db.close();
  console.log("released");
  process.exit(0);
};
setTimeout(release, seconds * 1000);
process.stdin.on("end", release);
process.stdin.resume();
