// The states the code knows are exactly the states the schema's CHECK constraints allow: a
// state added on one side only would be a write the database refuses, or a row the code cannot read.
import { expect, test } from "bun:test";
import { BATCH_STATES, LAST_CLASSES } from "../../src/store/batches.ts";
import { DESTINATION_STATES } from "../../src/store/destinations.ts";
import { ISSUE_KINDS, ISSUE_STATES } from "../../src/store/issues.ts";
import { ATTEMPT_OUTCOMES } from "../../src/store/marks.ts";
import type { TestSpool } from "../helpers/spool.ts";
import type { OpenSpool } from "./suite.ts";

/** The values of `CHECK (<column> IN (...))` in a table's definition (SQLite keeps it in sqlite_master). */
function checkList(t: TestSpool, table: string, column: string): string[] {
  const sql = (t.spool.db.query("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?").get(table) as { sql: string }).sql;
  const m = new RegExp(`CHECK\\s*\\(\\s*(?:${column} IS NULL OR\\s+)?${column}\\s+IN\\s*\\(([^)]*)\\)`, "i").exec(sql);
  if (!m) throw new Error(`no CHECK on ${table}.${column}`);
  return [...m[1].matchAll(/'([^']*)'/g)].map((x) => x[1]).sort();
}

export function schemaCases(fresh: OpenSpool): void {
  test.each([
    ["batches", "state", BATCH_STATES],
    ["batches", "last_class", LAST_CLASSES],
    ["attempts", "outcome", ATTEMPT_OUTCOMES],
    ["destinations", "state", DESTINATION_STATES],
    ["issues", "kind", ISSUE_KINDS],
    ["issues", "state", ISSUE_STATES],
  ] as const)("%s.%s: the CHECK list is the code's list", (table, column, values) => {
    const t = fresh();
    expect(checkList(t, table, column)).toEqual([...values].sort());
  });
}
