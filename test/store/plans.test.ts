// The dispatcher's per-tick queries never read the delivered history: each finds its rows by the
// state indexes, or scans only the partial index of unfinished batches (batches_queue); a paced
// destination's window searches only the partial index of paced attempts. --where on a path a
// payload index holds searches that index.
import { expect, test } from "bun:test";
import { tickQueryPlans } from "../../src/store/sqlite/queue.ts";
import { overduePlan } from "../../src/store/sqlite/awaiting.ts";
import { enqueuePlans } from "../../src/store/sqlite/enqueue.ts";
import { freshSpool } from "../helpers/spool.ts";
import { syncPayloadIndexes, wherePlan } from "../../src/store/sqlite/where.ts";
import { parseWheres } from "../../src/store/where.ts";

test("an enqueue finds its dedup row and its group's open batch by index, never by a scan", () => {
  const plans = enqueuePlans(freshSpool().spool);
  expect(plans.findDedup.join(" ")).toMatch(
    /^SEARCH dedup USING (PRIMARY KEY|INDEX \w+) \(source=\? AND dedup_id=\?\)/,
  );
  // A fresh dedup id's row names the next event id: the largest rowid, found at the end of the table.
  expect(plans.claimDedup).toEqual(["SCALAR SUBQUERY 1", "SEARCH events"]);
  // The one-statement join updates the one open batch of the group, found by an index on (route, key[, state]).
  for (const steps of [plans.joinOpen, plans.findOpen]) {
    expect(steps).toHaveLength(1);
    expect(steps[0]).toMatch(
      /^SEARCH batches USING (COVERING )?INDEX (batches_one_open|batches_group) \(route=\? AND key=\?/,
    );
  }
});

test("every per-tick query is an index search, or a scan of the unfinished batches only", () => {
  const plans = tickQueryPlans(freshSpool().spool);
  const { rateWindow, ...batchPlans } = plans;
  expect(Object.keys(plans).sort()).toEqual([
    "anyReadyNow",
    "candidates",
    "nextOpenReady",
    "nextRetryDue",
    "rateWindow",
    "ready",
    "readyDestinations",
  ]);
  // A paced destination's window: two searches of the partial index of paced attempts, never the attempt history.
  expect(rateWindow.filter((s) => /attempts/.test(s))).toEqual([
    "SEARCH attempts USING INDEX attempts_window (destination=? AND finished_at=?)",
    "SEARCH attempts USING INDEX attempts_window (destination=? AND finished_at>?)",
  ]);
  for (const [name, steps] of Object.entries(batchPlans)) {
    const scans = steps.filter((s) => /^SCAN batches\b/.test(s));
    // A bare "SCAN batches" would read every row of history; batches_queue holds only open, sealed, retry and leased.
    expect({ name, scans: scans.filter((s) => !s.includes("USING INDEX batches_queue")) }).toEqual({ name, scans: [] });
    expect(steps.some((s) => s.includes("batches"))).toBe(true);
  }
});

test(
  "the candidates walk batches_ready in order (no sort) and bound each head check to the group's earlier " + "rows",
  () => {
    const { candidates, readyDestinations } = tickQueryPlans(freshSpool().spool);
    // With a sort, LIMIT would stop nothing: every deliverable row of the destination would be read first.
    expect(candidates.filter((s) => s.includes("TEMP B-TREE"))).toEqual([]);
    expect(candidates[0]).toContain("USING INDEX batches_ready (destination=?)");
    expect(candidates.some((s) => s.includes("USING INDEX batches_queue (route=? AND key=? AND first_at<?)"))).toBe(
      true,
    );
    expect(
      readyDestinations.filter((s) => /SEARCH batches/.test(s)).every((s) => s.includes("USING INDEX batches_ready")),
    ).toBe(true);
  },
);

test("the overdue outcomes read searches batches_awaiting, never the history", () => {
  const plan = overduePlan(freshSpool().spool);
  expect(plan.some((s) => /SEARCH b USING INDEX batches_awaiting/.test(s))).toBe(true);
  expect(plan.filter((s) => /^SCAN/.test(s))).toEqual([]);
});

test("--where on a payload index searches it; on another path, or != and ~, it reads every event", () => {
  const { spool } = freshSpool();
  syncPayloadIndexes(spool, ["repository.full_name", "items.0.id"]);
  const plan = (...conds: string[]) => wherePlan(spool, { list: { where: parseWheres(conds) } }).join(" | ");
  const search = /SEARCH events USING INDEX events_where_repository_full_name_\w+ \(<expr>=\?\)/;
  expect(plan("repository.full_name = acme/api")).toMatch(search);
  expect(plan("repository.full_name in (acme/api, acme/web)")).toMatch(search);
  // One indexed condition is enough: the others are checked on the rows it finds.
  expect(plan("action = opened", "repository.full_name = acme/api")).toMatch(search);
  expect(plan("items.0.id = 7")).toMatch(/SEARCH events USING INDEX events_where_items_0_id_\w+ \(<expr>=\?\)/);
  // The batches are then found by id, not scanned.
  expect(plan("repository.full_name = acme/api")).toContain("SEARCH batches USING INTEGER PRIMARY KEY (rowid=?)");
  for (const other of ["action = opened", "repository.full_name != acme/api", "repository.full_name ~ acme"])
    expect(plan(other)).toContain("SCAN events");
});

test("--where with the other filters: list's read and replay --dead's selection still search the index", () => {
  const { spool } = freshSpool();
  syncPayloadIndexes(spool, ["repository.full_name"]);
  const where = parseWheres(["repository.full_name = acme/api", "action = opened"]);
  const search = /SEARCH events USING INDEX events_where_repository_full_name_\w+ \(<expr>=\?\)/;
  const plans = [
    wherePlan(spool, { list: { where, source: "github", since: 1, until: 2 } }),
    wherePlan(spool, { list: { where, state: "dead", reason: "rejected", limit: 10 } }),
    wherePlan(spool, { list: { where, destination: "http:d", state: "delivered", before: 99 } }),
    wherePlan(spool, { list: { where, key: "acme/api:push", status: 500 } }),
    wherePlan(spool, { dead: { where, source: "github", since: 1 } }),
    wherePlan(spool, { dead: { where, destination: "http:d", reason: "rejected" } }),
  ];
  for (const p of plans) {
    const text = p.join(" | ");
    expect(text).toMatch(search);
    expect(p.filter((s) => /^SCAN (events|batches)\b/.test(s))).toEqual([]);
  }
});
