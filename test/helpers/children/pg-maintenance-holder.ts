// A dispatcher stand-in for the PostgreSQL suite: it takes the maintenance lock on the database
// named by its arguments (socket, user, database), prints "held", and waits to be killed.
import { PgSpool } from "../../../src/store/pg/db.ts";
import { MaintenanceLock } from "../../../src/store/pg/leader.ts";

const [socket, user, database] = process.argv.slice(2);
const spool = new PgSpool({ path: socket, user, database }, { max: 1 });
const lock = new MaintenanceLock(spool, "host-a:1");
if (!(await lock.tryTake(1_700_000_000))) {
  console.error("the lock was not free");
  process.exit(1);
}
console.log("held");
setInterval(() => {}, 60_000);
