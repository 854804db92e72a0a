// The states the code knows are exactly the states the schema's CHECK constraints allow: a
// state added on one side only would be a write the database refuses, or a row the code cannot read.
import { expect, test } from "bun:test";
import { BATCH_STATES, LAST_CLASSES } from "../../src/store/batches.ts";
import { DESTINATION_STATES } from "../../src/store/destinations.ts";
import { ISSUE_KINDS, ISSUE_STATES } from "../../src/store/issues.ts";
import { ATTEMPT_OUTCOMES } from "../../src/store/marks.ts";
import { JOURNAL_KINDS } from "../../src/store/journal.ts";
import { DEAD_REASONS } from "../../src/delivery.ts";
import type { Suite } from "./suite.ts";

export function schemaCases({ fresh }: Suite): void {
  test.each([
    ["batches", "state", BATCH_STATES],
    ["batches", "last_class", LAST_CLASSES],
    ["batches", "dead_reason", DEAD_REASONS],
    ["journal", "kind", JOURNAL_KINDS],
    ["attempts", "outcome", ATTEMPT_OUTCOMES],
    ["destinations", "state", DESTINATION_STATES],
    ["issues", "kind", ISSUE_KINDS],
    ["issues", "state", ISSUE_STATES],
  ] as const)("%s.%s: the CHECK list is the code's list", async (table, column, values) => {
    // The schema's own text: sqlite_master on SQLite, pg_constraint on PostgreSQL.
    const s = await fresh();
    expect(await s.checkValues(table, column)).toEqual([...values].sort());
  });
}
