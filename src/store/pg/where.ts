// `--where` on PostgreSQL: store/where.ts's conditions as SQL over events.payload, and the
// payload indexes a bobbin declares, built and dropped at migrate time.
//
// events.payload is TEXT (the sender's JSON byte for byte, LZ4-compressed where the server has it:
// migrations/pg/0005_lz4.sql), not jsonb, so every read of a path decompresses the payload and parses it into jsonb:
// hookspool_payload_json (migrations/pg/0007_payload_json.sql), which gives NULL where jsonb refuses the text (a \u0000
// escape, a lone surrogate, nesting past the server's stack) instead of failing the query, or an insert into an index
// over it. Its exception block costs a subtransaction a call, and keeps a scan over it in one process (PARALLEL
// RESTRICTED). A row its writer read the path of (events.path_values, store/paths.ts: only a value jsonb would read
// alike) gives it from there, and parses nothing: an insert under a payload index then costs the server no parse of the
// payload. A path is `#>` with a text[] built from the checked keys, never from a value, and written into the
// statement: an expression index serves a query only when the query's expression is the same, which a parameter never
// is under the generic plans every connection runs (db.ts). `#>` reads a key of digits as an array's index in an array
// and as the key in an object, as getPath does. Values are bound as JSON texts, cast, and compared as jsonb, whose
// equality is the type's own: the string "42" is not the number 42, 42.0 is 42.
import {
  type Candidate,
  type IndexChanges,
  indexPlan,
  INDEX_PREFIX,
  param,
  type PayloadCondition,
  type PayloadSql,
} from "../where.ts";
import type { PgSpool } from "./db.ts";
import { type ListFilter, listStatement } from "../batches.ts";
import { type DeadFilter, deadWhere, replayIdsSql } from "../replay.ts";

/** The version of the index expression (in each index's name): change it with the expression. */
const EXPRESSION_VERSION = 2;

/**
 * The text[] of a path's keys, each double-quoted, as a U& literal whose $ is written \0024: the
 * shared filter terms' $name parameters are numbered by a scan of the statement's text (db.ts
 * numbered), which must not find one inside the path.
 */
function pathLiteral(keys: readonly string[]): string {
  const array = `{${keys.map((k) => `"${k}"`).join(",")}}`;
  return array.includes("$") ? `U&'${array.replaceAll("$", "\\0024")}'::text[]` : `'${array}'::text[]`;
}

/** A path as a text literal (U& with its $ written \0024, as pathLiteral's). */
function textLiteral(path: string): string {
  return path.includes("$") ? `U&'${path.replaceAll("$", "\\0024")}'` : `'${path}'`;
}

/**
 * The jsonb at `keys` (NULL when the path is missing or the payload unreadable): from the row's
 * path_values when the writer read the path there (store/paths.ts: [value], or [] for a missing
 * path), else parsed from the payload. `column` is the payload column; path_values sits beside it.
 */
const valueSql = (column: string, keys: readonly string[]) => {
  const values = column.replace(/payload$/, "path_values");
  const path = textLiteral(keys.join("."));
  return `(CASE WHEN jsonb_exists(${values}, ${path}) THEN (${values} -> ${path}) -> 0
    ELSE hookspool_payload_json(${column}) #> ${pathLiteral(keys)} END)`;
};

/** The index expression of a path: the query's own valueSql, so a query on the path can use it. */
export const indexExpression = (path: string) => valueSql("payload", path.split("."));

/**
 * The jsonb values a value may equal: the string, and the number or boolean it reads as, each
 * bound as its JSON text and cast (a parameter typed jsonb itself, Bun.sql would encode as JSON
 * once more, a string in a string).
 */
function candidates(values: readonly Candidate[], params: Record<string, string | number>): string[] {
  const out: string[] = [];
  for (const c of values) {
    out.push(`${param(params, JSON.stringify(c.text))}::text::jsonb`);
    if (c.number !== null) out.push(`${param(params, c.number)}::text::jsonb`);
    if (c.boolean !== null) out.push(`'${c.boolean}'::jsonb`);
  }
  return out;
}

const SCALAR = "('string', 'number', 'boolean')";

function conditionSql(column: string, c: PayloadCondition, params: Record<string, string | number>): string {
  const v = valueSql(column, c.keys);
  switch (c.op) {
    case "=":
    case "in":
      return `${v} IN (${candidates(c.values, params).join(", ")})`;
    case "!=":
      return `(jsonb_typeof(${v}) IN ${SCALAR} AND ${v} NOT IN (${candidates(c.values, params).join(", ")}))`;
    case "~":
      return `(jsonb_typeof(${v}) = 'string' AND strpos(${v} #>> '{}', ${param(params, c.values[0].text)}) > 0)`;
    case "exists":
      return `(${v} IS NOT NULL AND ${v} <> 'null'::jsonb)`;
  }
}

export const pgPayloadSql: PayloadSql = {
  event: (conds, column, params) => conds.map((c) => conditionSql(column, c, params)).join(" AND "),
  // OFFSET 0 keeps the events' search a subquery of its own, read once (by a payload index
  // when there is one) and hashed, where the planner would otherwise walk the batches newest
  // first and look into each one's events, a guess that reads the whole history when few match.
  batches: (conds, params) =>
    `id IN (SELECT batch_id FROM events WHERE ${conds.map((c) => conditionSql("payload", c, params)).join(" AND ")} ` +
    "OFFSET 0)",
};

/**
 * The advisory lock key of the payload indexes (not migrate's: see syncPayloadIndexesPg),
 * "hookwh" in ASCII: the process that holds it builds and drops them.
 */
export const INDEX_LOCK = 0x686f6f6b7768;

/** The payload indexes there now: names, and whether each is valid (an interrupted build leaves one that is not). */
async function existingIndexes(spool: PgSpool): Promise<{ name: string; valid: boolean }[]> {
  const rows = (await spool.sql`SELECT c.relname AS name, i.indisvalid AS valid
    FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
    WHERE i.indrelid = 'events'::regclass AND left(c.relname, ${INDEX_PREFIX.length}) = ${INDEX_PREFIX}`) as {
    name: string;
    valid: boolean;
  }[];
  return rows;
}

/**
 * A payload index is a hash index: a B-tree refuses a key over 2704 bytes, so a sender's long
 * value at an indexed path would fail the insert, where a hash index keeps a value's 4-byte
 * hash whatever its size (jsonb's hash agrees with its equality: 42.0 and 42 hash alike). It
 * serves = and in (the planner runs an in list as a bitmap scan of each value), which is all
 * --where asks of an index; it holds no entry for a NULL, so events without the path cost it
 * nothing but the parse.
 *
 * Build the payload index of every path in `paths` that has none, and drop each payload index
 * of a path no longer there (and one a build left invalid, to build it again). CONCURRENTLY,
 * so the intakes and dispatchers on the database go on writing meanwhile; so one statement at
 * a time, outside a transaction, by whichever process takes the index lock first: another one
 * (a second dispatcher starting) leaves them and says so (busy), and never waits for the lock,
 * since a concurrent build waits for every open transaction, a waiting one included.
 */
export async function syncPayloadIndexesPg(
  spool: PgSpool,
  paths: readonly string[],
  o: { dryRun?: boolean } = {},
): Promise<IndexChanges> {
  const there = await existingIndexes(spool);
  const invalid = there.filter((x) => !x.valid).map((x) => x.name);
  const plan = indexPlan(
    paths,
    there.filter((x) => x.valid).map((x) => x.name),
    EXPRESSION_VERSION,
  );
  const drop = [...new Set([...plan.drop, ...invalid])].sort();
  if (o.dryRun || (plan.create.length === 0 && drop.length === 0)) return { created: plan.create, dropped: drop };
  const conn = await spool.sql.reserve();
  try {
    const [got] = await conn`SELECT pg_try_advisory_lock(${INDEX_LOCK}::bigint) AS ok`;
    if (!got.ok) return { created: [], dropped: [], busy: true };
    try {
      // Names are indexName's (letters, digits and _), never a value.
      for (const name of drop) await conn.unsafe(`DROP INDEX CONCURRENTLY IF EXISTS "${name}"`);
      for (const c of plan.create)
        await conn.unsafe(
          `CREATE INDEX CONCURRENTLY IF NOT EXISTS "${c.name}" ON events USING hash (${indexExpression(c.path)})`,
        );
    } finally {
      await conn`SELECT pg_advisory_unlock(${INDEX_LOCK}::bigint)`;
    }
  } finally {
    conn.release();
  }
  return { created: plan.create, dropped: drop };
}

/** The indexes a database with none would get for `paths` (a dry run on a database not migrated yet). */
export function plannedIndexesPg(paths: readonly string[]): { path: string; name: string }[] {
  return indexPlan(paths, [], EXPRESSION_VERSION).create;
}

/**
 * The statement of list's read, or replay --dead's selection, over a filter, for the tests to
 * explain its generic plan (plans.ts).
 */
export function whereStatement(q: { list: ListFilter } | { dead: DeadFilter }): {
  sql: string;
  params: Record<string, string | number>;
} {
  if ("list" in q) return listStatement(q.list, pgPayloadSql);
  const w = deadWhere(q.dead, pgPayloadSql);
  return { sql: replayIdsSql(w.where), params: w.params };
}
