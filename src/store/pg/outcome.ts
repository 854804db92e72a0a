// The end of an attempt on PostgreSQL: the facts read in the transaction (the batches and their
// destinations' rows locked, all at once; the batch's poison run, a previous bad emit, the
// destination's ignored answers when the plan needs them), the plan of store/outcome-plan.ts (the
// same rules as SQLite's), and its mark and effects applied in that transaction. Several
// outcomes share one transaction: delivered ones all together in a few statements, the others
// (or all, in a new transaction, when that fails) each in a savepoint.
import { num, type PgSpool, type Tx } from "./db.ts";
import { nowEffSql } from "./meta.ts";
import { closedRow, type DestinationRow } from "../destinations.ts";
import {
  factsNeeded,
  type OutcomeEnd,
  type OutcomeFacts,
  type OutcomeInput,
  planOutcome,
  type Recorded,
} from "../outcome-plan.ts";
import {
  clearProbePg,
  destinationRowOf,
  liftThrottlePg,
  pauseDestinationPgTx,
  recordSuccessPg,
  recordTransportFailurePg,
  setRetryAfterPg,
  throttlePg,
} from "./destinations.ts";
import { raiseIssuePg, resolveIssuesPg } from "./issues.ts";
import { markDeadPgTx, markDeliveredAllPg, markDeliveredPgTx, markRetryPgTx } from "./marks.ts";
import { enqueueEventsPgTx } from "./enqueue.ts";
import { testHook } from "../../testhook.ts";
import { ignoredRun, PAST_LIMIT, type PastAttempt, previousBadEmit, strikeGaps } from "../attempts-plan.ts";

/** The batch's finished attempts, newest first (the ones the rules of attempts-plan.ts read). */
async function pastAttempts(tx: Tx, batchId: number): Promise<PastAttempt[]> {
  const rows = (await tx`SELECT outcome, klass, error, finished_at FROM attempts
      WHERE batch_id = ${batchId}::bigint AND finished_at IS NOT NULL AND outcome <> 'discarded' ORDER BY id DESC
        LIMIT ${PAST_LIMIT}`) as Record<string, unknown>[];
  return rows.map((r) => ({
    outcome: (r.outcome as string | null) ?? null,
    klass: (r.klass as string | null) ?? null,
    error: (r.error as string | null) ?? null,
    finished_at: Number(r.finished_at),
  }));
}

/** The poison run a strike finishing at `now` completes (strikeGaps says which gaps count). */
export async function transportStrikesPg(tx: Tx, batchId: number, destination: string, now: number): Promise<number> {
  let strikes = 0;
  for (const gap of strikeGaps(await pastAttempts(tx, batchId), now)) {
    // An awaited delivery's 2xx (class "await") is not a success: its run's outcome is.
    const [delivered] =
      await tx`SELECT 1 AS one FROM attempts WHERE destination = ${destination} AND batch_id <> ${batchId}::bigint
        AND outcome = 'ok'
        AND (klass IS NULL OR klass <> 'await') AND finished_at >= ${gap.from} AND finished_at < ${gap.to} LIMIT 1`;
    if (!delivered) break;
    strikes++;
  }
  return strikes;
}

/**
 * What every outcome of one transaction reads, in one statement at its start: the batches, and
 * their destinations' rows locked in name order (the order every outcome transaction takes
 * them, so two dispatchers' never wait on each other in a cycle). A destination's row stays
 * known as the transaction changes it; one an effect changed in SQL is read again when needed.
 */
class TxFacts {
  /** A row this transaction holds locked, null: none at the read (closed), "stale": read it again. */
  private readonly rows = new Map<string, DestinationRow | null | "stale">();

  private constructor(
    readonly batches: ReadonlyMap<number, OutcomeFacts["batch"]>,
    /** now_eff as the facts were read: the time of the outcomes that came without one. */
    readonly now: number,
  ) {}

  static async read(tx: Tx, batchIds: readonly number[]): Promise<TxFacts> {
    const [r] = (await tx`WITH b AS (SELECT id, destination, route, attempts FROM batches
          WHERE id = ANY(${batchIds}::bigint[])),
        d AS MATERIALIZED (SELECT * FROM destinations WHERE name IN (SELECT destination FROM b) ORDER BY name
          FOR UPDATE)
      SELECT (SELECT json_agg(json_build_array(id, destination, route, attempts)) FROM b) AS batches,
        (SELECT json_agg(to_json(d)) FROM d) AS rows,
        ${nowEffSql(tx)} AS now`) as Record<string, unknown>[];
    const batches = new Map<number, OutcomeFacts["batch"]>();
    for (const [id, destination, route, attempts] of (parsed(r.batches) ?? []) as [number, string, string, number][])
      batches.set(num(id), { destination: String(destination), route: String(route), attempts: Number(attempts) });
    const facts = new TxFacts(batches, Number(r.now));
    for (const b of batches.values()) facts.rows.set(b.destination, null);
    for (const d of (parsed(r.rows) ?? []) as Record<string, unknown>[])
      facts.rows.set(String(d.name), destinationRowOf(d));
    return facts;
  }

  /** The destination's row as this transaction holds it (a destination never seen is closed). */
  async row(tx: Tx, name: string): Promise<DestinationRow> {
    const known = this.rows.get(name);
    if (known !== "stale" && known !== undefined) return known ?? closedRow(name);
    const [r] = await tx`SELECT * FROM destinations WHERE name = ${name} FOR UPDATE`;
    this.rows.set(name, r ? destinationRowOf(r) : null);
    return r ? destinationRowOf(r) : closedRow(name);
  }

  /** Whether the destination had no row at the read (and none was made since). */
  fresh(name: string): boolean {
    return this.rows.get(name) === null;
  }

  /** The row as an effect this transaction applied left it (it is locked now, made if it was not there). */
  know(name: string, row: DestinationRow): void {
    this.rows.set(name, row);
  }

  /** An effect changed the row in SQL (or a savepoint was undone): read it again before it is used. */
  forget(name?: string): void {
    for (const n of name === undefined ? [...this.rows.keys()] : [name]) this.rows.set(n, "stale");
  }
}

const parsed = (v: unknown): unknown => (typeof v === "string" ? JSON.parse(v) : v);

/** The destination's latest delivered answers (at most `limit`), newest first. */
async function latestAnswersPg(tx: Tx, destination: string, limit: number): Promise<(string | null)[]> {
  const rows = (await tx`SELECT answer FROM attempts WHERE destination = ${destination} AND outcome = 'ok'
      ORDER BY started_at DESC, id DESC LIMIT ${limit}`) as {
    answer: string | null;
  }[];
  return rows.map((a) => a.answer);
}

async function factsPg(tx: Tx, f: OutcomeInput, known: TxFacts): Promise<OutcomeFacts | null> {
  const batch = known.batches.get(f.batchId);
  if (!batch) return null;
  const need = factsNeeded(f);
  const destination = await known.row(tx, batch.destination);
  return {
    batch,
    destination,
    strikes:
      need.strikes && destination.state === "closed"
        ? await transportStrikesPg(tx, f.batchId, batch.destination, f.now)
        : 0,
    previousBadEmit: need.previousBadEmit ? previousBadEmit(await pastAttempts(tx, f.batchId)) : false,
    ignoredRun: need.ignoredRun > 0 ? ignoredRun(await latestAnswersPg(tx, batch.destination, need.ignoredRun)) : 0,
  };
}

/**
 * An outcome whose plan only delivers and closes: a 2xx with no ignored-answers issue to weigh,
 * whose effects are a success's (the breaker closes, a 429 gate lifts, issues resolve).
 */
function deliveredOnly(f: OutcomeEnd): boolean {
  return f.outcome.kind === "ok" && !(f.outcome.answer === "ignored" && (f.ignoredIssueAfter ?? 0) > 0);
}

/** A success on the row: closed (a paused destination stays paused), counters reset (as recordSuccessPg). */
function succeeded(r: DestinationRow, now: number): DestinationRow {
  const reset = { ...r, consecutive_failures: 0, last_ok_at: now, last_error: null, probe_until: null };
  return r.state === "paused" ? reset : { ...reset, state: "closed", opened_at: null, cooldown_s: null };
}

/** What delivered outcomes do to one destination's row: its last success, the latest lift of its 429 gate. */
interface Closing {
  name: string;
  ok_at: number;
  lift: number | null;
  fresh: boolean;
}

/**
 * Delivered outcomes (deliveredOnly) in three statements however many they are: every mark
 * (markDeliveredAllPg), the emits of each one marked, then, planned one by one in order on the
 * row as the earlier ones left it, each destination's success and 429 lift and every issue
 * resolved, in one statement. An outcome whose batch is gone or whose lease was lost applies nothing.
 */
async function recordDeliveredPg(tx: Tx, fs: readonly OutcomeInput[], known: TxFacts): Promise<Recorded[]> {
  const facts = (f: OutcomeInput, row: DestinationRow): OutcomeFacts | null => {
    const batch = known.batches.get(f.batchId);
    return batch ? { batch, destination: row, strikes: 0, previousBadEmit: false, ignoredRun: 0 } : null;
  };
  // A delivered mark does not depend on the destination's row; its effects do.
  const marks = fs.flatMap((f) => {
    const x = facts(f, closedRow(""));
    return x ? [{ f, mark: planOutcome(x, f).mark }] : [];
  });
  const base = (f: OutcomeInput) => ({ batchId: f.batchId, attemptId: f.attemptId, owner: f.owner, now: f.now });
  const applied = await markDeliveredAllPg(
    tx,
    marks.map(({ f, mark }) =>
      mark.kind === "delivered"
        ? { ...base(f), attempt: mark.attempt, result: mark.result, awaitUntil: mark.awaitUntil }
        : unexpected(mark.kind),
    ),
  );
  for (const { f, mark } of marks)
    if (applied.has(f.batchId) && mark.kind === "delivered") await enqueueEventsPgTx(tx, mark.emits, f.now);
  const rows = new Map<string, DestinationRow>();
  const closing = new Map<string, Closing>();
  const resolve = new Map<string, number>();
  const out: Recorded[] = [];
  for (const f of fs) {
    const batch = known.batches.get(f.batchId);
    if (!batch || !applied.has(f.batchId)) {
      out.push({ applied: false });
      continue;
    }
    const name = batch.destination;
    let row = rows.get(name) ?? (await known.row(tx, name));
    const plan = planOutcome(facts(f, row) as OutcomeFacts, f);
    const recorded: Recorded = { ...plan.recorded };
    const c = closing.get(name) ?? { name, ok_at: f.now, lift: null, fresh: known.fresh(name) };
    for (const e of plan.effects) {
      if (e.kind === "success") {
        if (row.state === "open" || row.state === "half_open") recorded.breaker = "closed";
        row = succeeded(row, f.now);
        c.ok_at = f.now;
      } else if (e.kind === "lift_throttle") {
        if (row.throttled_at !== null && row.throttled_at < e.startedAt)
          row = { ...row, throttled_at: null, throttle_s: null };
        c.lift = Math.max(c.lift ?? e.startedAt, e.startedAt);
      } else if (e.kind === "resolve") {
        // Resolved by the first outcome that resolves it: the later ones find it resolved already.
        if (!resolve.has(e.fingerprint)) resolve.set(e.fingerprint, f.now);
      } else unexpected(e.kind);
    }
    closing.set(name, c);
    rows.set(name, row);
    out.push(recorded);
  }
  await closeDestinationsPg(tx, [...closing.values()], resolve);
  for (const [name, row] of rows) known.know(name, row);
  return out;
}

function unexpected(kind: string): never {
  throw new Error(`a delivered outcome planned a ${kind}`);
}

/**
 * Delivered outcomes' effects in one statement: each destination's success (closed, a paused
 * one stays paused; counters reset; SQL from the row it holds, as recordSuccessPg) and its 429
 * gate lifted by an attempt started after it (as liftThrottlePg), the row made when it was
 * never seen; and the issues they resolve.
 */
async function closeDestinationsPg(tx: Tx, closing: readonly Closing[], resolve: ReadonlyMap<string, number>) {
  if (closing.length === 0 && resolve.size === 0) return;
  const success = (d: string) => `consecutive_failures = 0, last_ok_at = x.ok_at, last_error = NULL,
      state = CASE WHEN ${d}.state = 'paused' THEN 'paused' ELSE 'closed' END,
      opened_at = CASE WHEN ${d}.state = 'paused' THEN ${d}.opened_at ELSE NULL END,
      cooldown_s = CASE WHEN ${d}.state = 'paused' THEN ${d}.cooldown_s ELSE NULL END, probe_until = NULL`;
  const lifted = "d.throttled_at IS NOT NULL AND d.throttled_at < x.lift";
  await tx.unsafe(
    `WITH x AS (SELECT * FROM json_to_recordset($1::text::json) AS x(name text, ok_at float8, lift float8, fresh bool)),
      u AS (UPDATE destinations d SET ${success("d")},
          throttled_at = CASE WHEN ${lifted} THEN NULL ELSE d.throttled_at END,
          throttle_s = CASE WHEN ${lifted} THEN NULL ELSE d.throttle_s END
        FROM x WHERE d.name = x.name AND NOT x.fresh),
      i AS (INSERT INTO destinations (name, last_ok_at) SELECT name, ok_at FROM x WHERE x.fresh ORDER BY name
        ON CONFLICT (name) DO UPDATE SET ${success("destinations").replace("x.ok_at", "excluded.last_ok_at")}),
      r AS (UPDATE issues SET state = 'resolved', last_at = r.now
        FROM json_to_recordset($2::text::json) AS r(fingerprint text, now float8)
        WHERE issues.fingerprint = r.fingerprint AND issues.fingerprint = ANY($3::text[])
          AND issues.state IN ('open', 'acked'))
    SELECT 1`,
    // The fingerprints again as an array: the planner knows its length (a JSON document's it guesses).
    [
      JSON.stringify(closing),
      JSON.stringify([...resolve].map(([fingerprint, now]) => ({ fingerprint, now }))),
      [...resolve.keys()],
    ],
  );
}

/** One outcome of any kind, on its own (the rules of outcome-plan.ts, each effect as its own statement). */
async function recordOutcomePgTx(tx: Tx, f: OutcomeInput, known: TxFacts): Promise<Recorded> {
  if (deliveredOnly(f)) return (await recordDeliveredPg(tx, [f], known))[0];
  const facts = await factsPg(tx, f, known);
  if (!facts) return { applied: false };
  const plan = planOutcome(facts, f);
  const dest = facts.batch.destination;
  const base = { batchId: f.batchId, attemptId: f.attemptId, owner: f.owner, now: f.now };
  const m = plan.mark;
  let applied: boolean;
  if (m.kind === "delivered") {
    applied = await markDeliveredPgTx(tx, {
      ...base,
      attempt: m.attempt,
      result: m.result,
      emits: m.emits,
      awaitUntil: m.awaitUntil,
    });
  } else if (m.kind === "retry")
    applied = await markRetryPgTx(tx, { ...base, nextAttemptAt: m.nextAttemptAt, attempt: m.attempt });
  else applied = await markDeadPgTx(tx, { ...base, deadReason: m.deadReason, attempt: m.attempt });
  if (!applied) return { applied: false };
  const recorded: Recorded = { ...plan.recorded };
  // Consecutive resolves go as one statement.
  const resolve = new Map<string, number>();
  for (const e of plan.effects) {
    if (e.kind === "resolve") {
      resolve.set(e.fingerprint, f.now);
      continue;
    }
    await resolveIssuesPg(tx, resolve);
    resolve.clear();
    if (e.kind !== "raise") known.forget(dest);
    switch (e.kind) {
      case "success": {
        const before = await recordSuccessPg(tx, dest, f.now);
        if (before === "open" || before === "half_open") recorded.breaker = "closed";
        break;
      }
      case "transport_failure": {
        const effect = await recordTransportFailurePg(tx, dest, e.failure);
        if (effect === "tripped" || effect === "retripped") {
          await raiseIssuePg(tx, e.onTrip(effect === "retripped"));
          recorded.breaker = effect === "tripped" ? "opened" : "reopened";
        }
        break;
      }
      case "retry_after":
        await setRetryAfterPg(tx, dest, e.until);
        break;
      case "throttle":
        await throttlePg(tx, dest, f.now, e.until, e.throttleS);
        break;
      case "lift_throttle":
        await liftThrottlePg(tx, dest, e.startedAt);
        break;
      case "pause":
        await pauseDestinationPgTx(tx, dest, e.by, f.now);
        break;
      case "clear_probe":
        await clearProbePg(tx, dest);
        break;
      case "raise":
        await raiseIssuePg(tx, e.issue);
        break;
    }
  }
  await resolveIssuesPg(tx, resolve);
  return recorded;
}

/** The set of 2xx outcomes failed in its transaction, not at its commit: they go one by one then. */
class TogetherFailed extends Error {}

/**
 * How several attempts ended, in one transaction: the facts of all read at once, then, when
 * every one only delivers (the common end), all of them together (recordDeliveredPg: a handful
 * of statements for the set, no savepoint); otherwise, or when one of those statements fails
 * (its transaction rolled back), each in its own savepoint of a new transaction, so one that
 * throws is undone alone and its error stands in its place. A failed COMMIT throws for all:
 * whether it committed is unknown, and an outcome is never written twice.
 */
export async function recordOutcomesPg(
  spool: PgSpool,
  ends: readonly (OutcomeEnd & { now?: number })[],
): Promise<(Recorded | Error)[]> {
  if (ends.length === 0) return [];
  // In destination then batch order: the order a set's outcomes apply in.
  const order = ends
    .map((end, i) => ({ end, i }))
    .sort((a, b) => (a.end.destination ?? "").localeCompare(b.end.destination ?? "") || a.end.batchId - b.end.batchId);
  const ids = ends.map((f) => f.batchId);
  // An end without its time takes the transaction's now_eff (read with the facts).
  const at = (known: TxFacts, f: OutcomeEnd & { now?: number }): OutcomeInput => ({ ...f, now: f.now ?? known.now });
  const together = order.every(({ end }) => deliveredOnly(end)) && new Set(ids).size === ends.length;
  if (together) {
    try {
      return await spool.sql.begin(async (tx) => {
        const known = await TxFacts.read(tx, ids);
        const all = await recordDeliveredPg(
          tx,
          order.map((o) => at(known, o.end)),
          known,
        ).catch((e) => {
          throw new TogetherFailed("the set's outcomes failed", { cause: e });
        });
        const out: Recorded[] = new Array(ends.length);
        all.forEach((r, k) => (out[order[k].i] = r));
        testHook("mark.before_commit");
        return out;
      });
    } catch (e) {
      if (!(e instanceof TogetherFailed)) throw e;
    }
  }
  return spool.sql.begin(async (tx) => {
    const known = await TxFacts.read(tx, ids);
    const out: (Recorded | Error)[] = new Array(ends.length);
    for (const { end, i } of order) {
      try {
        out[i] = await tx.savepoint((sp) => recordOutcomePgTx(sp, at(known, end), known));
      } catch (e) {
        known.forget();
        out[i] = e instanceof Error ? e : new Error(String(e));
      }
    }
    testHook("mark.before_commit");
    return out;
  });
}
