// `--where` on SQLite: store/where.ts's conditions as SQL over events.payload, and the payload
// indexes a bobbin declares, built and dropped at migrate time.
//
// A path is read with json_extract (json_type for what kind of value is there) from the
// payload, when json_valid says SQLite's reader takes it: json_extract stops with an error on
// JSON nested past 1000 levels, which a sender may send (JavaScript's parser reads it), and an
// index over an expression that fails would fail the insert. The path is SQL text built from
// the checked keys (letters, digits, _, $ and -, each quoted: $."repository"."full_name"), never
// from a value, and written into the statement itself: an expression index serves only a query
// whose expression is the same text, which a bound path never is. A key of digits reads an
// array's element when the value above it is an array and the key itself otherwise, as
// getPath does, so its path is a CASE on that value's json_type. Every value is bound.
//
// Its cost: each condition parses the payload (SQLite caches the parse within a statement, so
// the json_valid, json_type and json_extract of one row parse it once), about 3.5 µs a 5 KB
// payload; without an index a query reads every stored payload. An index costs every insert
// the same parse once per declared path.
import type { Database } from "bun:sqlite";
import { type IndexChanges, indexPlan, INDEX_PREFIX, param, type PayloadCondition, type PayloadSql } from "../where.ts";
import type { SqliteSpool } from "./db.ts";
import { type ListFilter, listStatement } from "../batches.ts";
import { type DeadFilter, deadWhere, replayIdsSql } from "../replay.ts";

/** The version of the index expression (in each index's name): change it with the expression. */
const EXPRESSION_VERSION = 1;

/** The payload column when SQLite's reader takes it, else NULL (json_valid's 2: JSON5, as json_extract reads). */
const readable = (column: string) => `CASE WHEN json_valid(${column}, 2) THEN ${column} END`;

const keyStep = (k: string) => `."${k}"`;

/** The JSON path of `keys` below `prefix` (a path's text so far) as SQL: a literal, or a CASE per key of digits. */
function pathSql(doc: string, prefix: string, keys: readonly string[]): string {
  const at = keys.findIndex((k) => /^\d+$/.test(k));
  if (at === -1) return `'${prefix}${keys.map(keyStep).join("")}'`;
  const above = prefix + keys.slice(0, at).map(keyStep).join("");
  const rest = keys.slice(at + 1);
  const index = Number(keys[at]);
  return (
    `CASE json_type(${doc}, '${above}') WHEN 'array' THEN ${pathSql(doc, `${above}[${index}]`, rest)} ` +
    `ELSE ${pathSql(doc, above + keyStep(keys[at]), rest)} END`
  );
}

/** The value at `keys` (json_extract: text, integer, real, 1/0 for a boolean; NULL for none or null). */
const valueSql = (column: string, keys: readonly string[]) => {
  const doc = readable(column);
  return `json_extract(${doc}, ${pathSql(doc, "$", keys)})`;
};

/** What kind of value is at `keys`: json_type's word (text, integer, real, true, false, null, object, array). */
const typeSql = (column: string, keys: readonly string[]) => {
  const doc = readable(column);
  return `json_type(${doc}, ${pathSql(doc, "$", keys)})`;
};

/** The index expression of a path: the query's own valueSql, so a query on the path can use it. */
export const indexExpression = (path: string) => valueSql("payload", path.split("."));

/** The largest integer SQLite holds exactly (json_extract gives a larger one as a real). */
const INT64_MAX = 9223372036854775807n;

/**
 * A number candidate as SQL: an integer SQLite holds as one is bound as its text and cast, so
 * `id = 9007199254740993` is that integer and not the double nearest it, which also equals
 * 9007199254740992 (PostgreSQL's jsonb compares them exactly too); any other number is bound as
 * a double.
 */
function numberSql(text: string, params: Record<string, string | number>): string {
  if (/^-?\d+$/.test(text)) {
    const n = BigInt(text);
    if (n <= INT64_MAX && n >= -INT64_MAX - 1n) return `CAST(${param(params, text)} AS INTEGER)`;
  }
  return param(params, Number(text));
}

/**
 * `= one of values`: json_extract IN every candidate (the term an index serves), then the kind
 * of value checked, since json_extract gives a boolean as 1 or 0 and an object as its text.
 */
function equalsSql(column: string, c: PayloadCondition, params: Record<string, string | number>): string {
  const v = valueSql(column, c.keys);
  const t = typeSql(column, c.keys);
  const cands = c.values;
  const texts = cands.map((x) => param(params, x.text));
  const numbers = cands.filter((x) => x.number !== null).map((x) => numberSql(x.number as string, params));
  const trues = cands.some((x) => x.boolean === true);
  const falses = cands.some((x) => x.boolean === false);
  const all = [...texts, ...numbers, ...(trues ? ["1"] : []), ...(falses ? ["0"] : [])];
  const num = numbers.length ? `${v} IN (${numbers.join(", ")})` : "0";
  return (
    `(${v} IN (${all.join(", ")}) AND CASE ${t} WHEN 'text' THEN 1 WHEN 'integer' THEN ${num} ` +
    `WHEN 'real' THEN ${num} WHEN 'true' THEN ${trues ? 1 : 0} WHEN 'false' THEN ${falses ? 1 : 0} ELSE 0 END)`
  );
}

function conditionSql(column: string, c: PayloadCondition, params: Record<string, string | number>): string {
  switch (c.op) {
    case "=":
    case "in":
      return equalsSql(column, c, params);
    case "!=":
      return (
        `(${typeSql(column, c.keys)} IN ('text', 'integer', 'real', 'true', 'false') AND ` +
        `NOT ${equalsSql(column, c, params)})`
      );
    case "~":
      return (
        `(${typeSql(column, c.keys)} = 'text' AND ` +
        `instr(${valueSql(column, c.keys)}, ${param(params, c.values[0].text)}) > 0)`
      );
    case "exists":
      // json_extract is NULL for a missing path and for null, and nothing else.
      return `${valueSql(column, c.keys)} IS NOT NULL`;
  }
}

export const sqlitePayloadSql: PayloadSql = {
  event: (conds, column, params) => conds.map((c) => conditionSql(column, c, params)).join(" AND "),
  batches: (conds, params) =>
    `id IN (SELECT batch_id FROM events WHERE ${conds.map((c) => conditionSql("payload", c, params)).join(" AND ")})`,
};

/** The payload indexes there now (by name). */
function existingIndexes(db: Database): string[] {
  return once<{ name: string }>(
    db,
    "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'events' AND substr(name, 1, $n) = $prefix",
    { n: INDEX_PREFIX.length, prefix: INDEX_PREFIX },
  ).map((r) => r.name);
}

/**
 * A statement run once and finalized: one kept prepared would hold the schema (a DROP INDEX
 * meanwhile is "database table is locked").
 */
function once<R>(db: Database, sql: string, params: Record<string, string | number>): R[] {
  const st = db.prepare<R, Record<string, string | number>>(sql);
  try {
    return st.all(params);
  } finally {
    st.finalize();
  }
}

/**
 * Build the payload index of every path in `paths` that has none, and drop each payload index
 * of a path no longer there, in one transaction (the caller holds dispatch.lock). With dryRun,
 * what it would do.
 */
export function syncPayloadIndexes(
  spool: SqliteSpool,
  paths: readonly string[],
  o: { dryRun?: boolean } = {},
): IndexChanges {
  const db = spool.db;
  const plan = indexPlan(paths, existingIndexes(db), EXPRESSION_VERSION);
  if (!o.dryRun && (plan.create.length || plan.drop.length)) {
    db.transaction(() => {
      // Names are indexName's (letters, digits and _), never a value.
      for (const name of plan.drop) db.run(`DROP INDEX IF EXISTS "${name}"`);
      for (const c of plan.create)
        db.run(`CREATE INDEX IF NOT EXISTS "${c.name}" ON events (${indexExpression(c.path)})`);
    }).immediate();
  }
  return { created: plan.create, dropped: plan.drop };
}

/** The indexes a database with none would get for `paths` (a dry run on a spool not made yet). */
export function plannedIndexes(paths: readonly string[]): { path: string; name: string }[] {
  return indexPlan(paths, [], EXPRESSION_VERSION).create;
}

/**
 * The plan (EXPLAIN QUERY PLAN's details) of list's read, or replay --dead's selection, over a
 * filter: the statement each reads with, for the tests.
 */
export function wherePlan(spool: SqliteSpool, q: { list: ListFilter } | { dead: DeadFilter }): string[] {
  let sql: string;
  let params: Record<string, string | number>;
  if ("list" in q) ({ sql, params } = listStatement(q.list, sqlitePayloadSql));
  else {
    const w = deadWhere(q.dead, sqlitePayloadSql);
    [sql, params] = [replayIdsSql(w.where), w.params];
  }
  return once<{ detail: string }>(spool.db, `EXPLAIN QUERY PLAN ${sql}`, params).map((r) => r.detail);
}
