// The PostgreSQL store does what the SQLite store does: the same operations, given the same
// inputs on both backends, leave the same rows (the breaker, issues, quarantine) and the same
// figures (status counts, dead reasons, oldest pending, leases). Skipped, saying so, without
// PostgreSQL.
import { afterAll, afterEach, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { claimBatch } from "../../../src/store/batches.ts";
import type { Spool } from "../../../src/store/db.ts";
import { type FailureInput, destinationRows, halfOpenIfCooled, pauseDestination, recordSuccessTx, recordTransportFailureTx, resumeDestination, setRetryAfterTx } from "../../../src/store/destinations.ts";
import { enqueue, quarantine } from "../../../src/store/enqueue.ts";
import { listIssues, raiseIssue, resolveIssue } from "../../../src/store/issues.ts";
import { markDead } from "../../../src/store/marks.ts";
import { countBatches, deadByReason, leasedCounts, oldestPending } from "../../../src/store/stats.ts";
import { claimPg, markDeadPg } from "../../../src/store/pg/claims.ts";
import { PgSpool } from "../../../src/store/pg/db.ts";
import { destinationRowsPg, halfOpenIfCooledPg, pauseDestinationPg, recordSuccessPg, recordTransportFailurePg, resumeDestinationPg, setRetryAfterPg } from "../../../src/store/pg/destinations.ts";
import { enqueuePg } from "../../../src/store/pg/enqueue.ts";
import { getIssueByFingerprintPg, openIssueCountPg, raiseIssuePg, resolveIssuePg } from "../../../src/store/pg/issues.ts";
import { migratePg } from "../../../src/store/pg/migrate.ts";
import { quarantinePg } from "../../../src/store/pg/quarantine.ts";
import { countBatchesPg, deadByReasonPg, leasedCountsPg, oldestPendingPg } from "../../../src/store/pg/stats.ts";
import { PG_BIN, PG_SKIP_MESSAGE, type PgServer, startPostgres } from "../../helpers/pg.ts";
import { copy, ev, freshSpool, T0 } from "../../helpers/spool.ts";

if (!PG_BIN) console.log(PG_SKIP_MESSAGE);
setDefaultTimeout(30_000);

describe.skipIf(!PG_BIN)("PostgreSQL and SQLite agree", () => {
  let server: PgServer;
  let pg: PgSpool;
  let lite: Spool;
  let n = 0;

  beforeAll(async () => {
    server = await startPostgres();
  }, 60_000);
  afterAll(async () => {
    await server?.stop();
  });

  /** A fresh pair of spools: SQLite (a WAL file) and PostgreSQL (a new database). */
  async function pair(): Promise<void> {
    const database = `p${++n}`;
    await server.createDatabase(database);
    pg = new PgSpool({ path: server.socket, user: server.user, database });
    await migratePg(pg, "0123456789ab");
    lite = freshSpool().spool;
  }
  afterEach(async () => {
    await pg?.close();
    lite?.close();
  });

  test("the breaker: counted, tripped, a failure in flight ignored, half-open, a probe's failure doubles the cooldown, success closes; pause, resume, Retry-After", async () => {
    await pair();
    const fail = (now: number, startedAt: number): FailureInput => ({ now, startedAt, tripAfter: 2, cooldownInitialS: 10, cooldownMaxS: 25, error: `HTTP 503 at ${now}` });
    const steps: [string, number, number][] = [
      ["fail", T0, T0],
      ["fail", T0 + 1, T0 + 1],
      ["fail", T0 + 2, T0 + 0.5],
      ["half", T0 + 11, 0],
      ["fail", T0 + 12, T0 + 11.5],
      ["half", T0 + 20, 0],
      ["half", T0 + 33, 0],
      ["fail", T0 + 34, T0 + 33.5],
      ["half", T0 + 60, 0],
      ["ok", T0 + 61, 0],
    ];
    const effects: { lite: unknown[]; pg: unknown[] } = { lite: [], pg: [] };
    for (const [what, now, started] of steps) {
      if (what === "fail") {
        effects.lite.push(lite.db.transaction(() => recordTransportFailureTx(lite.db, "http:d", fail(now, started)))());
        effects.pg.push(await pg.sql.begin((tx) => recordTransportFailurePg(tx, "http:d", fail(now, started))));
      } else if (what === "half") {
        effects.lite.push(halfOpenIfCooled(lite, "http:d", now));
        effects.pg.push(await halfOpenIfCooledPg(pg, "http:d", now));
      } else {
        effects.lite.push(lite.db.transaction(() => recordSuccessTx(lite.db, "http:d", now))());
        effects.pg.push(await pg.sql.begin((tx) => recordSuccessPg(tx, "http:d", now)));
      }
      expect({ step: [what, now], row: (await destinationRowsPg(pg))[0] }).toEqual({ step: [what, now], row: destinationRows(lite)[0] });
    }
    expect(effects.pg).toEqual(effects.lite);
    expect(effects.lite).toEqual(["counted", "tripped", "ignored", true, "retripped", false, true, "retripped", true, "half_open"]);
    pauseDestination(lite, "http:d", "ops", T0 + 70);
    await pauseDestinationPg(pg, "http:d", "ops", T0 + 70);
    lite.db.transaction(() => setRetryAfterTx(lite.db, "http:d", T0 + 90))();
    await pg.sql.begin((tx) => setRetryAfterPg(tx, "http:d", T0 + 90));
    expect(await destinationRowsPg(pg)).toEqual(destinationRows(lite));
    expect([resumeDestination(lite, "http:d"), await resumeDestinationPg(pg, "http:d"), resumeDestination(lite, "http:d"), await resumeDestinationPg(pg, "http:d")]).toEqual([true, true, false, false]);
    expect(await destinationRowsPg(pg)).toEqual(destinationRows(lite));
  });

  test("issues: opened, counted, resolved, reopened; the same rows on both", async () => {
    await pair();
    const r = (now: number, error: string) => ({ fingerprint: "delivery:http:d", kind: "delivery" as const, destination: "http:d", batchId: 7, error, now });
    const outs = { lite: [] as unknown[], pg: [] as unknown[] };
    for (const [verb, now] of [["raise", T0], ["raise", T0 + 5], ["resolve", T0 + 6], ["resolve", T0 + 7], ["raise", T0 + 8]] as const) {
      if (verb === "raise") {
        outs.lite.push(raiseIssue(lite, r(now, `e${now}`)).opened);
        outs.pg.push((await pg.sql.begin((tx) => raiseIssuePg(tx, r(now, `e${now}`)))).opened);
      } else {
        outs.lite.push(resolveIssue(lite, "delivery:http:d", now));
        outs.pg.push(await pg.sql.begin((tx) => resolveIssuePg(tx, "delivery:http:d", now)));
      }
    }
    expect(outs.pg).toEqual(outs.lite);
    expect(outs.lite).toEqual([true, false, true, false, true]);
    const { id: _a, ...fromPg } = (await getIssueByFingerprintPg(pg, "delivery:http:d")) as NonNullable<Awaited<ReturnType<typeof getIssueByFingerprintPg>>>;
    const { id: _b, ...fromLite } = listIssues(lite, { state: "all" })[0];
    expect(fromPg).toEqual(fromLite);
    expect(fromPg).toMatchObject({ state: "open", count: 3, first_at: T0, last_at: T0 + 8, last_error: `e${T0 + 8}` });
    expect(await openIssueCountPg(pg)).toBe(1);
  });

  test("two processes raising one issue at once: one issue, counted twice", async () => {
    await pair();
    const other = new PgSpool({ path: server.socket, user: server.user, database: `p${n}` });
    try {
      const r = { fingerprint: "spool:refused", kind: "spool" as const, now: T0 };
      const [a, b] = await Promise.all([pg.sql.begin((tx) => raiseIssuePg(tx, r)), other.sql.begin((tx) => raiseIssuePg(tx, r))]);
      expect([a.opened, b.opened].sort()).toEqual([false, true]);
      expect(a.id).toBe(b.id);
      expect((await getIssueByFingerprintPg(pg, "spool:refused"))?.count).toBe(2);
    } finally {
      await other.close();
    }
  });

  test("quarantine: the same dead batch, event, content hash and issue; credentials never stored", async () => {
    await pair();
    const q = { source: "gh", raw: new TextEncoder().encode("{not json"), headers: { "X-GitHub-Event": "push", Authorization: "Bearer SECRETSENTINEL9c1f", "X-Hub-Signature-256": "sha256=abc" }, authHeaders: ["X-Hub-Signature-256"], url: "/hooks/gh", reason: "not_json" };
    const a = quarantine(lite, q, T0);
    const b = await quarantinePg(pg, q, T0);
    expect(b).toEqual(a);
    const liteBatch = lite.db.query("SELECT state, destination, key, dead_reason, content_hash, last_error, count, bytes FROM batches").get();
    const [pgBatch] = await pg.sql`SELECT state, destination, key, dead_reason, content_hash, last_error, count, bytes::int AS bytes FROM batches`;
    expect({ ...pgBatch }).toEqual(liteBatch as Record<string, unknown>);
    const [pgEvent] = await pg.sql`SELECT headers, url, trace, payload FROM events`;
    expect({ ...pgEvent }).toEqual(lite.db.query("SELECT headers, url, trace, payload FROM events").get() as Record<string, unknown>);
    expect(pgEvent.headers).toBe('{"X-GitHub-Event":"push"}');
    const { id: _x, ...issuePg } = (await getIssueByFingerprintPg(pg, "source:quarantine:gh")) as NonNullable<Awaited<ReturnType<typeof getIssueByFingerprintPg>>>;
    const { id: _y, ...issueLite } = listIssues(lite)[0];
    expect(issuePg).toEqual(issueLite);
  });

  test("status figures: per state, dead by reason, oldest pending, leased", async () => {
    await pair();
    const events = [
      ev({ key: "a", copies: [copy("r", "http:d", { max_events: 1 })] }),
      ev({ key: "b", copies: [copy("r", "http:d", { max_events: 1 })] }),
      ev({ key: "c", copies: [copy("r", "http:e")] }),
    ];
    for (const [i, e] of events.entries()) {
      enqueue(lite, e, T0 + i);
      await enqueuePg(pg, e, T0 + i);
    }
    // Batch 1 leased and then dead (rejected) on both; batch 2 leased and left so.
    const ok = { klass: "permanent", status: 422, error: "no", durationMs: 2, counted: true };
    const l1 = claimBatch(lite, { batchId: 1, destination: "http:d", now: T0 + 5, leaseUntil: T0 + 65, host: "h", pid: 1 });
    const [p1] = await claimPg(pg, [{ batchId: 1, route: "r", key: "a", destination: "http:d", now: T0 + 5, leaseUntil: T0 + 65, host: "h", pid: 1 }]);
    markDead(lite, { batchId: 1, attemptId: l1!.attemptId, owner: l1!.owner, now: T0 + 6, attempt: ok });
    expect(await markDeadPg(pg, { batchId: 1, attemptId: p1!.attemptId, owner: p1!.owner, now: T0 + 6, attempt: ok })).toBe(true);
    claimBatch(lite, { batchId: 2, destination: "http:d", now: T0 + 7, leaseUntil: T0 + 67, host: "h", pid: 1 });
    await claimPg(pg, [{ batchId: 2, route: "r", key: "b", destination: "http:d", now: T0 + 7, leaseUntil: T0 + 67, host: "h", pid: 1 }]);
    quarantine(lite, { source: "s", raw: new Uint8Array([0xff]), headers: {}, authHeaders: [], url: null, reason: "not_utf8" }, T0 + 8);
    await quarantinePg(pg, { source: "s", raw: new Uint8Array([0xff]), headers: {}, authHeaders: [], url: null, reason: "not_utf8" }, T0 + 8);
    expect(await countBatchesPg(pg)).toEqual(countBatches(lite));
    expect(countBatches(lite)).toMatchObject({ open: 1, leased: 1, dead: 1, quarantined: 1 });
    expect(await deadByReasonPg(pg)).toEqual(deadByReason(lite));
    expect(await oldestPendingPg(pg)).toEqual(oldestPending(lite));
    expect(await leasedCountsPg(pg)).toEqual(leasedCounts(lite));
  });
});
