// Retention's small transactions on SQLite (retention-chunks.ts says why these are not
// conformance cases): sqlite/retention.ts's pass over a view of the spool whose connection
// reports, after each transaction, the rows it changed (SQLite's total_changes()).
import type { SqliteSpool } from "../../src/store/sqlite/db.ts";
import { runRetention } from "../../src/store/sqlite/retention.ts";
import { openSqliteStore } from "../helpers/store-under-test.ts";
import { retentionChunkCases } from "./retention-chunks.ts";

/** A view of the spool whose db reports, after each transaction, the rows it changed. */
function recording(spool: SqliteSpool, onCommit: (rows: number) => void): SqliteSpool {
  const db = spool.db;
  const changes = () => (db.query("SELECT total_changes() AS n").get() as { n: number }).n;
  const wrapped = new Proxy(db, {
    get(target, prop) {
      if (prop === "transaction") {
        return (fn: (...a: unknown[]) => unknown) =>
          target.transaction((...a: unknown[]) => {
            const before = changes();
            const r = fn(...a);
            onCommit(changes() - before);
            return r;
          });
      }
      const v = Reflect.get(target, prop, target);
      return typeof v === "function" ? v.bind(target) : v;
    },
  });
  return { ...spool, db: wrapped };
}

retentionChunkCases(openSqliteStore, async (s, policy, now, opts, onCommit) => {
  if (!s.sqlite) throw new Error("a SQLite store");
  return runRetention(recording(s.sqlite.spool, onCommit), policy, now, opts);
});
