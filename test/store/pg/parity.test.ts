// The PostgreSQL store does what the SQLite store does: the same operations, given the same
// inputs on both backends, leave the same rows (the breaker, issues, quarantine) and the same
// figures (status counts, dead reasons, oldest pending, leases). Skipped, saying so, without
// PostgreSQL.
import { afterAll, afterEach, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { claimBatch } from "../../../src/store/sqlite/queue.ts";
import type { SqliteSpool } from "../../../src/store/sqlite/db.ts";
import type { FailureInput } from "../../../src/store/destinations.ts";
import {
  destinationRows,
  halfOpenIfCooled,
  pauseDestination,
  recordSuccessTx,
  recordTransportFailureTx,
  resumeDestination,
  setRetryAfterTx,
} from "../../../src/store/sqlite/destinations.ts";
import { enqueue, quarantine } from "../../../src/store/sqlite/enqueue.ts";
import {
  alertSlotFree,
  issuesToAlert,
  listIssues,
  markAlerted,
  raiseIssue,
  resolveIssue,
} from "../../../src/store/sqlite/issues.ts";
import { markDead } from "../../../src/store/sqlite/marks.ts";
import { recordOutcomes } from "../../../src/store/sqlite/outcome.ts";
import { recordOutcomesPg } from "../../../src/store/pg/outcome.ts";
import {
  dropBatchesPg,
  excludeEventsPg,
  replayBatchPg,
  resendDeliveredPg,
  retryNowPg,
  splitBatchPg,
} from "../../../src/store/pg/operator.ts";
import { replayBatch, resendDelivered, retryNow } from "../../../src/store/sqlite/operator.ts";
import { dropBatches } from "../../../src/store/sqlite/operator.ts";
import { runRetention } from "../../../src/store/sqlite/retention.ts";
import { runRetentionPg } from "../../../src/store/pg/retention.ts";
import { exportBatches } from "../../../src/store/sqlite/export.ts";
import { exportBatchesPg } from "../../../src/store/pg/export.ts";
import { stepPoll } from "../../../src/store/sqlite/polls.ts";
import { stepPollPg } from "../../../src/store/pg/polls.ts";
import { excludeEvents, splitBatch } from "../../../src/store/sqlite/operator.ts";
import { outcome } from "../../../src/delivery.ts";
import type { NewEvent } from "../../../src/store/enqueue.ts";
import { countBatches, deadByReason, leasedCounts, oldestPending } from "../../../src/store/sqlite/stats.ts";
import { claimPg } from "../../../src/store/pg/queue.ts";
import { markDeadPg } from "../../../src/store/pg/marks.ts";
import { PgSpool } from "../../../src/store/pg/db.ts";
import {
  destinationRowsPg,
  halfOpenIfCooledPg,
  pauseDestinationPg,
  recordSuccessPg,
  recordTransportFailurePg,
  resumeDestinationPg,
  setRetryAfterPg,
} from "../../../src/store/pg/destinations.ts";
import { enqueuePg } from "../../../src/store/pg/enqueue.ts";
import {
  alertSlotFreePg,
  getIssueByFingerprintPg,
  issuesToAlertPg,
  markAlertedPg,
  openIssueCountPg,
  raiseIssuePg,
  resolveIssuePg,
} from "../../../src/store/pg/issues.ts";
import { migratePg } from "../../../src/store/pg/migrate.ts";
import { quarantinePg } from "../../../src/store/pg/enqueue.ts";
import { countBatchesPg, deadByReasonPg, leasedCountsPg, oldestPendingPg } from "../../../src/store/pg/stats.ts";
import { PG_BIN, PG_SKIP_MESSAGE, type PgServer, startPostgres } from "../../helpers/pg.ts";
import { copy, ev, freshSpool, T0 } from "../../helpers/spool.ts";

if (!PG_BIN) console.log(PG_SKIP_MESSAGE);

/** A PostgreSQL row as SQLite would give it: BIGINT ids (strings) as numbers, SMALLINT flags as numbers. */
function normalize(r: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(r))
    out[k] =
      typeof v === "string" &&
      /^(id|batch_id|event_id|attempt_id|last_probe_batch_id|sample_batch_id|failed_event_id|last_batch_id|bytes|max_bytes|size)$/.test(
        k,
      )
        ? Number(v)
        : v;
  return out;
}
setDefaultTimeout(30_000);

/** A claim that must have been made (these claims give no max_inflight, so none is gated). */
function claimed<T>(c: T | null | "gated" | undefined): T {
  if (!c || c === "gated") throw new Error(`not claimed: ${String(c)}`);
  return c;
}

describe.skipIf(!PG_BIN)("PostgreSQL and SQLite agree", () => {
  let server: PgServer;
  let pg: PgSpool;
  let lite: SqliteSpool;
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
    const fail = (now: number, startedAt: number): FailureInput => ({
      now,
      startedAt,
      tripAfter: 2,
      cooldownInitialS: 10,
      cooldownMaxS: 25,
      error: `HTTP 503 at ${now}`,
    });
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
      expect({ step: [what, now], row: (await destinationRowsPg(pg))[0] }).toEqual({
        step: [what, now],
        row: destinationRows(lite)[0],
      });
    }
    expect(effects.pg).toEqual(effects.lite);
    expect(effects.lite).toEqual([
      "counted",
      "tripped",
      "ignored",
      true,
      "retripped",
      false,
      true,
      "retripped",
      true,
      "half_open",
    ]);
    pauseDestination(lite, "http:d", "ops", T0 + 70);
    await pauseDestinationPg(pg, "http:d", "ops", T0 + 70);
    lite.db.transaction(() => setRetryAfterTx(lite.db, "http:d", T0 + 90))();
    await pg.sql.begin((tx) => setRetryAfterPg(tx, "http:d", T0 + 90));
    expect(await destinationRowsPg(pg)).toEqual(destinationRows(lite));
    expect([
      resumeDestination(lite, "http:d", T0 + 95),
      await resumeDestinationPg(pg, "http:d", T0 + 95),
      resumeDestination(lite, "http:d", T0 + 95),
      await resumeDestinationPg(pg, "http:d", T0 + 95),
    ]).toEqual([true, true, false, false]);
    expect(await destinationRowsPg(pg)).toEqual(destinationRows(lite));
  });

  test("issues: opened, counted, resolved, reopened; the same rows on both", async () => {
    await pair();
    const r = (now: number, error: string) => ({
      fingerprint: "delivery:http:d",
      kind: "delivery" as const,
      destination: "http:d",
      batchId: 7,
      error,
      now,
    });
    const outs = { lite: [] as unknown[], pg: [] as unknown[] };
    for (const [verb, now] of [
      ["raise", T0],
      ["raise", T0 + 5],
      ["resolve", T0 + 6],
      ["resolve", T0 + 7],
      ["raise", T0 + 8],
    ] as const) {
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
    const { id: _a, ...fromPg } = (await getIssueByFingerprintPg(pg, "delivery:http:d")) as NonNullable<
      Awaited<ReturnType<typeof getIssueByFingerprintPg>>
    >;
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
      const [a, b] = await Promise.all([
        pg.sql.begin((tx) => raiseIssuePg(tx, r)),
        other.sql.begin((tx) => raiseIssuePg(tx, r)),
      ]);
      expect([a.opened, b.opened].sort()).toEqual([false, true]);
      expect(a.id).toBe(b.id);
      expect((await getIssueByFingerprintPg(pg, "spool:refused"))?.count).toBe(2);
    } finally {
      await other.close();
    }
  });

  test("quarantine: the same dead batch, event, content hash and issue; credentials never stored", async () => {
    await pair();
    const q = {
      source: "gh",
      raw: new TextEncoder().encode("{not json"),
      headers: {
        "X-GitHub-Event": "push",
        Authorization: "Bearer SECRETSENTINEL9c1f",
        "X-Hub-Signature-256": "sha256=abc",
      },
      authHeaders: ["X-Hub-Signature-256"],
      url: "/hooks/gh",
      reason: "not_json",
    };
    const a = quarantine(lite, q, T0);
    const b = await quarantinePg(pg, q, T0);
    expect(b).toEqual(a);
    const liteBatch = lite.db
      .query("SELECT state, destination, key, dead_reason, content_hash, last_error, count, bytes FROM batches")
      .get();
    const [pgBatch] =
      await pg.sql`SELECT state, destination, key, dead_reason, content_hash, last_error, count, bytes::int AS bytes FROM batches`;
    expect({ ...pgBatch }).toEqual(liteBatch as Record<string, unknown>);
    const [pgEvent] = await pg.sql`SELECT headers, url, trace, payload FROM events`;
    expect({ ...pgEvent }).toEqual(
      lite.db.query("SELECT headers, url, trace, payload FROM events").get() as Record<string, unknown>,
    );
    expect(pgEvent.headers).toBe('{"X-GitHub-Event":"push"}');
    const { id: _x, ...issuePg } = (await getIssueByFingerprintPg(pg, "source:quarantine:gh")) as NonNullable<
      Awaited<ReturnType<typeof getIssueByFingerprintPg>>
    >;
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
    const l1 = claimBatch(lite, {
      batchId: 1,
      destination: "http:d",
      now: T0 + 5,
      leaseUntil: T0 + 65,
      host: "h",
      pid: 1,
    });
    const [p1] = await claimPg(pg, [
      { batchId: 1, route: "r", key: "a", destination: "http:d", now: T0 + 5, leaseUntil: T0 + 65, host: "h", pid: 1 },
    ]);
    markDead(lite, { batchId: 1, attemptId: l1!.attemptId, owner: l1!.owner, now: T0 + 6, attempt: ok });
    if (!p1 || p1 === "gated") throw new Error("batch 1 was not claimed");
    expect(
      await markDeadPg(pg, { batchId: 1, attemptId: p1.attemptId, owner: p1.owner, now: T0 + 6, attempt: ok }),
    ).toBe(true);
    claimBatch(lite, { batchId: 2, destination: "http:d", now: T0 + 7, leaseUntil: T0 + 67, host: "h", pid: 1 });
    await claimPg(pg, [
      { batchId: 2, route: "r", key: "b", destination: "http:d", now: T0 + 7, leaseUntil: T0 + 67, host: "h", pid: 1 },
    ]);
    quarantine(
      lite,
      { source: "s", raw: new Uint8Array([0xff]), headers: {}, authHeaders: [], url: null, reason: "not_utf8" },
      T0 + 8,
    );
    await quarantinePg(
      pg,
      { source: "s", raw: new Uint8Array([0xff]), headers: {}, authHeaders: [], url: null, reason: "not_utf8" },
      T0 + 8,
    );
    expect(await countBatchesPg(pg)).toEqual(countBatches(lite));
    expect(countBatches(lite)).toMatchObject({ open: 1, leased: 1, dead: 1, quarantined: 1 });
    expect(await deadByReasonPg(pg)).toEqual(deadByReason(lite));
    expect(await oldestPendingPg(pg)).toEqual(oldestPending(lite));
    expect(await leasedCountsPg(pg)).toEqual(leasedCounts(lite));
  });

  test("outcomes: the breaker trips and closes, throttles gate, counted failures exhaust, refusals and config issues, emits; the same rows on both", async () => {
    await pair();
    const policy = {
      maxAttempts: 3,
      backoffBaseS: 1,
      backoffCapS: 4,
      tripAfter: 2,
      cooldownInitialS: 10,
      cooldownMaxS: 25,
    };
    const one = { max_events: 1 };
    for (const [i, key] of ["a", "b", "c", "d", "e", "f"].entries()) {
      const e = ev({ key, copies: [copy("r", "http:d", one)] });
      enqueue(lite, e, T0 + i);
      await enqueuePg(pg, e, T0 + i);
    }
    const route = (id: number) =>
      (lite.db.query("SELECT key FROM batches WHERE id = ?").get(id) as { key: string }).key;
    /** Claim batch `id` on both at `now` and end the attempt with `o`, on both. */
    const attempt = async (
      id: number,
      now: number,
      o: Parameters<typeof outcome>[0],
      extra: { probe?: boolean; emits?: NewEvent[]; paced?: boolean } = {},
    ) => {
      const pacing = extra.paced ? { rate: { limit: 5, windowS: 60 }, hits: 1 } : {};
      const l = claimBatch(lite, {
        batchId: id,
        destination: "http:d",
        now,
        leaseUntil: now + 60,
        host: "h",
        pid: 1,
        probe: extra.probe,
        ...pacing,
      });
      const [p] = await claimPg(pg, [
        {
          batchId: id,
          route: "r",
          key: route(id),
          destination: "http:d",
          now,
          leaseUntil: now + 60,
          host: "h",
          pid: 1,
          probe: extra.probe,
          ...pacing,
        },
      ]);
      if (!l || !p || p === "gated") throw new Error(`batch ${id} not claimable`);
      const input = (c: { attemptId: number; owner: string }) => ({
        batchId: id,
        attemptId: c.attemptId,
        owner: c.owner,
        startedAt: now,
        probe: extra.probe ?? false,
        script: false,
        outcome: outcome(o),
        emits: extra.emits ?? [],
        durationMs: 7,
        now: now + 1,
        jitter: 0.5,
        policy,
      });
      const a = recordOutcomes(lite, [input(l)]);
      const b = await recordOutcomesPg(pg, [input(p)]);
      expect(b).toEqual(a);
      return a[0];
    };
    const transport = {
      kind: "retry" as const,
      klass: "transport" as const,
      reason: "http 503",
      status: 503,
      detail: "HTTP 503",
    };
    expect(await attempt(1, T0 + 10, transport)).toMatchObject({ applied: true, state: "retry" });
    expect(await attempt(2, T0 + 11, transport)).toMatchObject({ breaker: "opened" });
    expect([halfOpenIfCooled(lite, "http:d", T0 + 30), await halfOpenIfCooledPg(pg, "http:d", T0 + 30)]).toEqual([
      true,
      true,
    ]);
    expect(await attempt(1, T0 + 31, { kind: "ok", reason: "ok", status: 200 }, { probe: true })).toMatchObject({
      state: "delivered",
      breaker: "closed",
    });
    expect(
      await attempt(3, T0 + 40, { kind: "retry", klass: "throttle", reason: "http 429", status: 429, retryAfterS: 30 }),
    ).toMatchObject({ state: "retry", nextAttemptAt: T0 + 71 });
    // A second throttle, without a hint: the destination is gated for 61 s (it has no rate), the batch due then; its
    // hits none.
    expect(
      await attempt(3, T0 + 72, { kind: "retry", klass: "throttle", reason: "http 429", status: 429 }, { paced: true }),
    ).toMatchObject({ state: "retry", nextAttemptAt: T0 + 73 + 61 });
    for (const [k, now] of [
      [0, 50],
      [1, 60],
      [2, 70],
    ] as const) {
      const r = await attempt(2, T0 + now, {
        kind: "retry",
        klass: "batch",
        reason: "http 400",
        status: 400,
        detail: `HTTP 400 #${k}`,
      });
      expect(r).toMatchObject(k < 2 ? { state: "retry" } : { state: "dead", deadReason: "exhausted" });
    }
    expect(
      await attempt(4, T0 + 80, { kind: "dead", klass: "permanent", reason: "http 422", status: 422 }),
    ).toMatchObject({ state: "dead", deadReason: "rejected" });
    expect(
      await attempt(5, T0 + 90, { kind: "retry", klass: "config", reason: "http 401", status: 401 }),
    ).toMatchObject({ state: "retry" });
    // The gate's probe, answered: the 429 gate is lifted.
    expect(
      await attempt(
        3,
        T0 + 140,
        { kind: "ok", reason: "hermes accepted", status: 202, answer: "accepted" },
        { paced: true },
      ),
    ).toMatchObject({ state: "delivered" });
    // A 404 from the gateway: the destination pauses itself, with an issue.
    expect(
      await attempt(
        5,
        T0 + 150,
        {
          kind: "retry",
          klass: "config",
          reason: "unknown route or profile",
          status: 404,
          pause: 'the gateway answered 404 for route "d"',
        },
        { paced: true },
      ),
    ).toMatchObject({ state: "retry" });
    const emit = ev({ source: "s", key: "emitted", copies: [copy("emits", "http:e")] });
    expect(
      await attempt(
        6,
        T0 + 95,
        { kind: "ok", reason: "hermes ignored", status: 200, answer: "ignored", ignoredReason: "filter" },
        { emits: [emit] },
      ),
    ).toMatchObject({ state: "delivered" });

    expect(
      lite.db.query("SELECT state, paused_by, throttled_at FROM destinations WHERE name = 'http:d'").get(),
    ).toEqual({ state: "paused", paused_by: 'hookspool (the gateway answered 404 for route "d")', throttled_at: null });
    expect(lite.db.query("SELECT state FROM issues WHERE fingerprint = 'delivery:http:d:paused'").get()).toEqual({
      state: "open",
    });
    expect(lite.db.query("SELECT hits, answer FROM attempts WHERE hits IS NOT NULL ORDER BY id").all()).toEqual([
      { hits: 0, answer: null },
      { hits: 1, answer: "accepted" },
      { hits: 1, answer: null },
    ]);

    const rowsOf = async (table: string, order: string) => ({
      lite: lite.db.query(`SELECT * FROM ${table} ORDER BY ${order}`).all() as Record<string, unknown>[],
      pg: ((await pg.sql.unsafe(`SELECT * FROM ${table} ORDER BY ${order}`)) as Record<string, unknown>[]).map(
        normalize,
      ),
    });
    for (const [table, order] of [
      ["batches", "id"],
      ["attempts", "id"],
      ["destinations", "name"],
      ["issues", "fingerprint"],
      ["events", "id"],
    ] as const) {
      const { lite: l, pg: p } = await rowsOf(table, order);
      const strip = (r: Record<string, unknown>) =>
        table === "events" ? { ...r, raw: null } : table === "issues" ? { ...r, id: 0 } : r;
      expect({ table, rows: p.map(strip) }).toEqual({ table, rows: l.map(strip) });
    }
    const { lite: lj, pg: pj } = await rowsOf("journal", "id");
    expect(pj.map((r) => [r.kind, r.batch_id, r.detail])).toEqual(lj.map((r) => [r.kind, r.batch_id, r.detail]));
  });

  test("operator verbs: replay a dead batch, retry it now, drop, replay --delivered, a quarantine batch classified again; the same rows and refusals on both", async () => {
    await pair();
    const policy = {
      maxAttempts: 3,
      backoffBaseS: 1,
      backoffCapS: 4,
      tripAfter: 2,
      cooldownInitialS: 10,
      cooldownMaxS: 25,
    };
    for (const [i, key] of ["a", "b", "c"].entries()) {
      const e = ev({ key, copies: [copy("r", "http:d", { max_events: 1 })] });
      enqueue(lite, e, T0 + i);
      await enqueuePg(pg, e, T0 + i);
    }
    const end = async (id: number, key: string, o: Parameters<typeof outcome>[0], now: number) => {
      const l = claimBatch(lite, { batchId: id, destination: "http:d", now, leaseUntil: now + 60, host: "h", pid: 1 });
      const [p] = await claimPg(pg, [
        { batchId: id, route: "r", key, destination: "http:d", now, leaseUntil: now + 60, host: "h", pid: 1 },
      ]);
      const input = (c: { attemptId: number; owner: string }) => ({
        batchId: id,
        attemptId: c.attemptId,
        owner: c.owner,
        startedAt: now,
        probe: false,
        script: false,
        outcome: outcome(o),
        emits: [],
        durationMs: 3,
        now,
        jitter: 0,
        policy,
      });
      expect(await recordOutcomesPg(pg, [input(claimed(p))])).toEqual(recordOutcomes(lite, [input(l!)]));
    };
    await end(1, "a", { kind: "dead", klass: "permanent", reason: "http 422", status: 422 }, T0 + 10);
    await end(3, "c", { kind: "ok", reason: "ok", status: 200 }, T0 + 11);
    const both = async <T>(lite: () => T, pgOp: () => Promise<T>) => {
      let a: unknown;
      let b: unknown;
      try {
        a = lite();
      } catch (e) {
        a = (e as Error).message;
      }
      try {
        b = await pgOp();
      } catch (e) {
        b = (e as Error).message;
      }
      expect(b).toEqual(a);
      return a;
    };
    expect(
      await both(
        () => replayBatch(lite, 1, T0 + 20),
        () => replayBatchPg(pg, 1, T0 + 20),
      ),
    ).toEqual({ batchId: 1, kind: "replayed" });
    expect(
      await both(
        () => replayBatch(lite, 1, T0 + 21),
        () => replayBatchPg(pg, 1, T0 + 21),
      ),
    ).toBe("batch 1 is retry; replay applies to dead batches");
    await both(
      () => retryNow(lite, 1, T0 + 22),
      () => retryNowPg(pg, 1, T0 + 22),
    );
    expect(
      await both(
        () => retryNow(lite, 2, T0 + 22),
        () => retryNowPg(pg, 2, T0 + 22),
      ),
    ).toBe("batch 2 is sealed; retry applies to retry batches");
    await both(
      () => dropBatches(lite, [2], T0 + 23),
      () => dropBatchesPg(pg, [2], T0 + 23),
    );
    expect(
      await both(
        () => dropBatches(lite, [3], T0 + 23),
        () => dropBatchesPg(pg, [3], T0 + 23),
      ),
    ).toBe("batch 3 is delivered; drop applies to open, sealed, retry, awaiting or dead batches");
    await both(
      () => resendDelivered(lite, 3, T0 + 24),
      () => resendDeliveredPg(pg, 3, T0 + 24),
    );
    expect(
      await both(
        () => replayBatch(lite, 99, T0),
        () => replayBatchPg(pg, 99, T0),
      ),
    ).toBe("no batch 99");
    // A quarantined request, classified again by a (fixed) plugin: it becomes an event of its own.
    const q = {
      source: "s",
      raw: new TextEncoder().encode('{"n":1}'),
      headers: {},
      authHeaders: [],
      url: "/hooks/s",
      reason: "bad_payload",
    };
    const a = quarantine(lite, q, T0 + 30);
    await quarantinePg(pg, q, T0 + 30);
    const fixed = () => [ev({ key: "requeued", payload: '{"n":1}', copies: [copy("r", "http:d")] })];
    const r = (await both(
      () => replayBatch(lite, a.batchId, T0 + 31, fixed),
      () => replayBatchPg(pg, a.batchId, T0 + 31, fixed),
    )) as { kind: string };
    expect(r.kind).toBe("reclassified");
    const rows = async (table: string, cols: string, order: string) => ({
      lite: lite.db.query(`SELECT ${cols} FROM ${table} ORDER BY ${order}`).all(),
      pg: ((await pg.sql.unsafe(`SELECT ${cols} FROM ${table} ORDER BY ${order}`)) as Record<string, unknown>[]).map(
        normalize,
      ),
    });
    for (const [table, cols, order] of [
      [
        "batches",
        "id, state, attempts, next_attempt_at, not_before, delivered_at, result, last_error, dead_reason, key",
        "id",
      ],
      ["issues", "fingerprint, state, count, last_at, last_error", "fingerprint"],
      ["journal", "kind, batch_id, detail", "id"],
    ] as const) {
      const { lite: l, pg: p } = await rows(table, cols, order);
      expect({ table, rows: p }).toEqual({ table, rows: l as Record<string, unknown>[] });
    }
  });

  test("retention: the same rows go on both, dead batches never; in transactions of one row as well", async () => {
    for (const batchSize of [1000, 1]) {
      await pair();
      const policy = {
        maxAttempts: 3,
        backoffBaseS: 1,
        backoffCapS: 4,
        tripAfter: 2,
        cooldownInitialS: 10,
        cooldownMaxS: 25,
      };
      const DAY = 86_400;
      // Six single-event batches a day apart, each a copy for one key; two with dedup ids.
      for (let i = 0; i < 6; i++) {
        const e = ev({
          key: `k${i}`,
          source: i % 2 ? "gh" : "zoom",
          dedupId: i < 2 ? `d${i}` : null,
          copies: [copy("r", "http:d", { max_events: 1 })],
        });
        enqueue(lite, e, T0 + i * DAY);
        await enqueuePg(pg, e, T0 + i * DAY);
      }
      const end = async (id: number, o: Parameters<typeof outcome>[0], now: number) => {
        const l = claimBatch(lite, {
          batchId: id,
          destination: "http:d",
          now,
          leaseUntil: now + 60,
          host: "h",
          pid: 1,
        });
        const [p] = await claimPg(pg, [
          {
            batchId: id,
            route: "r",
            key: `k${id - 1}`,
            destination: "http:d",
            now,
            leaseUntil: now + 60,
            host: "h",
            pid: 1,
          },
        ]);
        const input = (c: { attemptId: number; owner: string }) => ({
          batchId: id,
          attemptId: c.attemptId,
          owner: c.owner,
          startedAt: now,
          probe: false,
          script: false,
          outcome: outcome(o),
          emits: [],
          durationMs: 3,
          now,
          jitter: 0,
          policy,
        });
        expect(await recordOutcomesPg(pg, [input(claimed(p))])).toEqual(recordOutcomes(lite, [input(l!)]));
      };
      const ok = { kind: "ok" as const, reason: "ok", status: 200 };
      await end(1, ok, T0 + 1);
      await end(2, { kind: "dead", klass: "permanent", reason: "http 422", status: 422 }, T0 + DAY + 1);
      await end(3, ok, T0 + 2 * DAY + 1);
      await end(6, ok, T0 + 5 * DAY + 1);
      dropBatches(lite, [4], T0 + 3 * DAY);
      await dropBatchesPg(pg, [4], T0 + 3 * DAY);
      resolveIssue(lite, "delivery:http:d:permanent", T0 + DAY + 2);
      await pg.sql.begin((tx) => resolveIssuePg(tx, "delivery:http:d:permanent", T0 + DAY + 2));
      const retention = {
        deliveredDays: 3,
        attemptsDays: 4,
        droppedDays: 1,
        issuesDays: 2,
        dedupWindowS: (s: string) => (s === "gh" ? DAY : 10 * DAY),
      };
      const now = T0 + 6 * DAY;
      const a = await runRetention(lite, retention, now, { batchSize });
      const b = await runRetentionPg(pg, retention, now, { batchSize });
      expect({ batchSize, counts: b }).toEqual({ batchSize, counts: a });
      expect(a.batches).toBeGreaterThan(0);
      for (const [table, key] of [
        ["batches", "id"],
        ["events", "id"],
        ["attempts", "id"],
        ["dedup", "dedup_id"],
        ["issues", "fingerprint"],
        ["journal", "id"],
      ] as const) {
        const l = (lite.db.query(`SELECT ${key} AS k FROM ${table} ORDER BY ${key}`).all() as { k: unknown }[]).map(
          (r) => r.k,
        );
        const p = ((await pg.sql.unsafe(`SELECT ${key} AS k FROM ${table} ORDER BY ${key}`)) as { k: unknown }[]).map(
          (r) => (typeof r.k === "string" && key === "id" ? Number(r.k) : r.k),
        );
        expect({ table, kept: p }).toEqual({ table, kept: l });
      }
      // The dead batch stays, whatever its age.
      expect((await pg.sql`SELECT state FROM batches WHERE id = 2`)[0].state).toBe("dead");
      await pg.close();
      lite.close();
    }
  });

  test("the poll clock: scheduled, ticked, skipped while its tick is unfinished, ticked again once delivered, rescheduled after a shortened interval; the same rows on both", async () => {
    await pair();
    const plan = { instance: "feed", everyS: 60, jitterS: 10 };
    const rng = () => {
      let n = 0;
      return { next: () => [0.5, 0.25, 0.75, 0.1, 0.9, 0.3, 0.6][n++ % 7] };
    };
    const lr = rng();
    const pr = rng();
    const tick = (at: number) =>
      ev({
        source: "feed",
        key: "feed",
        dedupId: `poll:feed:${at}`,
        payload: JSON.stringify({ tick_at: at }),
        copies: [copy("feed", "script:feed", { quiet_s: 0, max_s: 0, max_events: 1 })],
      });
    const both = async (now: number, p = plan) => {
      const a = stepPoll(lite, p, now, lr, tick);
      const b = await stepPollPg(pg, p, now, pr, tick);
      expect({ now, step: b }).toEqual({ now, step: a });
      return a;
    };
    expect(await both(T0)).toBe("scheduled");
    expect(await both(T0 + 1)).toBeNull();
    expect(await both(T0 + 10)).toBe("ticked");
    expect(await both(T0 + 80)).toBe("skipped");
    // The tick's batch is delivered (through the outcome transaction, which records it for the clock).
    const policy = {
      maxAttempts: 3,
      backoffBaseS: 1,
      backoffCapS: 4,
      tripAfter: 2,
      cooldownInitialS: 10,
      cooldownMaxS: 25,
    };
    const id = (lite.db.query("SELECT last_batch_id AS id FROM polls").get() as { id: number }).id;
    const l = claimBatch(lite, {
      batchId: id,
      destination: "script:feed",
      now: T0 + 81,
      leaseUntil: T0 + 141,
      host: "h",
      pid: 1,
    });
    const [c] = await claimPg(pg, [
      {
        batchId: id,
        route: "feed",
        key: "feed",
        destination: "script:feed",
        now: T0 + 81,
        leaseUntil: T0 + 141,
        host: "h",
        pid: 1,
      },
    ]);
    const input = (x: { attemptId: number; owner: string }) => ({
      batchId: id,
      attemptId: x.attemptId,
      owner: x.owner,
      startedAt: T0 + 81,
      probe: false,
      script: true,
      outcome: outcome({ kind: "ok", reason: "ok", status: 0 }),
      emits: [],
      durationMs: 3,
      now: T0 + 82,
      jitter: 0,
      policy,
    });
    expect(await recordOutcomesPg(pg, [input(claimed(c))])).toEqual(recordOutcomes(lite, [input(l!)]));
    expect(await both(T0 + 150)).toBe("ticked");
    expect(await both(T0 + 151, { ...plan, everyS: 5, jitterS: 0 })).toBe("rescheduled");
    const cols = "instance, next_at, last_tick_at, last_batch_id, delivered_at, delivered_tick_at, skipped, created_at";
    const lrows = lite.db.query(`SELECT ${cols} FROM polls`).all();
    const prows = ((await pg.sql.unsafe(`SELECT ${cols} FROM polls`)) as Record<string, unknown>[]).map(normalize);
    expect(prows).toEqual(lrows as Record<string, unknown>[]);
    const lb = lite.db.query("SELECT id, state, key, count FROM batches ORDER BY id").all();
    const pb = ((await pg.sql`SELECT id, state, key, count FROM batches ORDER BY id`) as Record<string, unknown>[]).map(
      normalize,
    );
    expect(pb).toEqual(lb as Record<string, unknown>[]);
  });

  test("split and exclude: the same pieces, moved events, content hashes and refusals on both", async () => {
    await pair();
    for (let i = 0; i < 5; i++) {
      const e = ev({
        key: "k",
        payload: JSON.stringify({ i, pad: "x".repeat(10 * i) }),
        copies: [copy("r", "http:d", { max_events: 5 })],
      });
      enqueue(lite, e, T0 + i);
      await enqueuePg(pg, e, T0 + i);
    }
    for (let i = 0; i < 3; i++) {
      const e = ev({ key: "open", copies: [copy("r", "http:d")] });
      enqueue(lite, e, T0 + 10 + i);
      await enqueuePg(pg, e, T0 + 10 + i);
    }
    const both = async (lite: () => unknown, pgOp: () => Promise<unknown>) => {
      const run = async (f: () => unknown) => {
        try {
          return await f();
        } catch (e) {
          return (e as Error).message;
        }
      };
      const a = await run(lite);
      expect(await run(pgOp)).toEqual(a);
      return a;
    };
    expect(
      await both(
        () => splitBatch(lite, 1, { maxEvents: 2 }, T0 + 20),
        () => splitBatchPg(pg, 1, { maxEvents: 2 }, T0 + 20),
      ),
    ).toEqual([3, 4, 5]);
    expect(
      await both(
        () => splitBatch(lite, 3, { maxEvents: 5 }, T0 + 21),
        () => splitBatchPg(pg, 3, { maxEvents: 5 }, T0 + 21),
      ),
    ).toBe("batch 3 already fits; nothing to split");
    expect(
      await both(
        () => splitBatch(lite, 2, { maxEvents: 1 }, T0 + 21),
        () => splitBatchPg(pg, 2, { maxEvents: 1 }, T0 + 21),
      ),
    ).toBe("batch 2 is open; split applies to sealed, retry or dead batches");
    expect(
      await both(
        () => splitBatch(lite, 3, {}, T0),
        () => splitBatchPg(pg, 3, {}, T0),
      ),
    ).toBe("split needs exactly one of --max-events, --max-bytes, --at");
    await both(
      () => excludeEvents(lite, 3, [1], T0 + 22),
      () => excludeEventsPg(pg, 3, [1], T0 + 22),
    );
    expect(
      await both(
        () => excludeEvents(lite, 3, [2], T0 + 23),
        () => excludeEventsPg(pg, 3, [2], T0 + 23),
      ),
    ).toBe("that would exclude every event of batch 3");
    expect(
      await both(
        () => excludeEvents(lite, 3, [7], T0 + 23),
        () => excludeEventsPg(pg, 3, [7], T0 + 23),
      ),
    ).toBe("event 7 is not in batch 3");
    await both(
      () => excludeEvents(lite, 2, [6], T0 + 24),
      () => excludeEventsPg(pg, 2, [6], T0 + 24),
    );
    const cols = {
      batches: "id, state, first_at, last_at, count, bytes, content_hash, result, last_error, not_before",
      events: "id, batch_id, excluded_at",
    };
    for (const [table, c] of Object.entries(cols)) {
      const l = lite.db.query(`SELECT ${c} FROM ${table} ORDER BY id`).all();
      const p = ((await pg.sql.unsafe(`SELECT ${c} FROM ${table} ORDER BY id`)) as Record<string, unknown>[]).map(
        normalize,
      );
      expect({ table, rows: p }).toEqual({ table, rows: l as Record<string, unknown>[] });
    }
  });

  test("export: the same records (batches, events with payloads, headers and raw bodies, attempts), filters and paging on both", async () => {
    await pair();
    for (let i = 0; i < 7; i++) {
      const e = ev({
        key: `k${i % 3}`,
        source: i % 2 ? "a" : "b",
        payload: JSON.stringify({ i }),
        copies: [copy("r", "http:d", { max_events: 2 })],
      });
      enqueue(lite, e, T0 + i);
      await enqueuePg(pg, e, T0 + i);
    }
    const q = {
      source: "gh",
      raw: new Uint8Array([0, 255, 123, 10]),
      headers: { "X-GitHub-Event": "push" },
      authHeaders: [],
      url: "/hooks/gh",
      reason: "not_json",
    };
    quarantine(lite, q, T0 + 8);
    await quarantinePg(pg, q, T0 + 8);
    const [cl] = [
      claimBatch(lite, {
        batchId: 1,
        destination: "http:d",
        now: T0 + 9,
        leaseUntil: T0 + 99,
        host: "h",
        pid: 1,
        probe: false,
      }),
    ];
    const [cp] = await claimPg(pg, [
      {
        batchId: 1,
        route: "r",
        key: "k0",
        destination: "http:d",
        now: T0 + 9,
        leaseUntil: T0 + 99,
        host: "h",
        pid: 1,
        probe: false,
      },
    ]);
    expect(cp).toEqual(cl);
    const all = async (filter: Parameters<typeof exportBatchesPg>[1], page?: number) => {
      const out: unknown[] = [];
      for await (const r of exportBatchesPg(pg, filter, page)) out.push(r);
      return out;
    };
    for (const [filter, page] of [
      [{}, 2],
      [{ source: "a" }, 500],
      [{ destination: "quarantine" }, 500],
      [{ since: T0 + 3, until: T0 + 6 }, 1],
      [{ state: "leased" }, 500],
    ] as const) {
      const expected = [...exportBatches(lite, filter, page)];
      expect(expected.length).toBeGreaterThan(0);
      expect({ filter, records: await all(filter, page) }).toEqual({ filter, records: expected });
    }
  });

  test("alerts: unalerted open issues oldest first, one alert per kind per rate limit, refusals counted; the same on both", async () => {
    await pair();
    for (const [i, fp] of ["delivery:a:http_5xx", "delivery:b:timeout", "spool:refused"].entries()) {
      const r = {
        fingerprint: fp,
        kind: (fp.startsWith("spool") ? "spool" : "delivery") as "spool" | "delivery",
        now: T0 + i,
      };
      raiseIssue(lite, r);
      await pg.sql.begin((tx) => raiseIssuePg(tx, r));
    }
    const fps = (rows: { fingerprint: string }[]) => rows.map((r) => r.fingerprint);
    expect(fps(await issuesToAlertPg(pg))).toEqual(fps(issuesToAlert(lite)));
    const steps: [string, number][] = [
      ["delivery", T0 + 10],
      ["delivery", T0 + 20],
      ["spool", T0 + 21],
      ["delivery", T0 + 80],
    ];
    for (const [kind, now] of steps) {
      const a = alertSlotFree(lite, kind, now, 60);
      expect(await alertSlotFreePg(pg, kind, now, 60)).toBe(a);
      if (a) {
        const issue = issuesToAlert(lite).find((x) => x.kind === kind);
        if (issue) {
          markAlerted(lite, issue.id, kind, now);
          await markAlertedPg(pg, issue.id, kind, now);
        }
      }
    }
    expect(fps(await issuesToAlertPg(pg))).toEqual(fps(issuesToAlert(lite)));
    expect(
      ((await pg.sql`SELECT kind, last_at, suppressed FROM alerts ORDER BY kind`) as Record<string, unknown>[]).map(
        (r) => ({ ...r }),
      ),
    ).toEqual(
      lite.db.query("SELECT kind, last_at, suppressed FROM alerts ORDER BY kind").all() as Record<string, unknown>[],
    );
  });
});
