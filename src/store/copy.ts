// Moving a spool: every row of a SQLite spool copied into an empty, migrated PostgreSQL spool
// (`hookspool migrate-store --to postgres`), ids kept, in one PostgreSQL transaction, then
// verified table by table before that transaction commits. A failure anywhere (a refused row, a
// count or checksum that differs, the SQLite file changing underneath) rolls it all back: the
// target is left as migrate left it, and the copy can simply be run again.
//
// The SQLite side is read inside one read transaction, so the copy and its verification see one
// snapshot of the file. Values are converted to the PostgreSQL column's type (BLOB -> BYTEA,
// integers -> BIGINT/INTEGER, JSON text stays text); a value that does not fit its column is
// refused, never rounded. Columns PostgreSQL has and SQLite lacks (the journal's xid) take their
// defaults; tables only PostgreSQL has (dispatchers) stay empty. Identities are set past every id
// the copied rows use or refer to, so a new batch, event or attempt never takes an old one's id
// (an attempt id is part of the delivery id a receiver deduplicates on).
//
// copy-plan.ts holds the tables, their plans and each value's conversion and checksum form.
import { HookspoolError } from "../errors.ts";
import {
  type Column,
  COPY_TABLES,
  Digest,
  ID_REFERENCES,
  KINDS,
  PG_ONLY_TABLES,
  PG_OWN_META,
  pgFailure,
  quote,
  skipRow,
  type TablePlan,
  toPg,
} from "./copy-plan.ts";
import { prepared, requireCurrentSchema, type SqliteSpool } from "./sqlite/db.ts";
import { dataVersion } from "./sqlite/journal.ts";
import type { PgSpool, Tx } from "./pg/db.ts";
import { requirePgSchema } from "./pg/migrate.ts";

export { COPY_TABLES } from "./copy-plan.ts";

export interface CopyOptions {
  /** Rows per INSERT (and per read of the SQLite file); 1,000 unless told. */
  batchSize?: number;
  /** Called after each chunk of a table, and once for an empty table (0 of 0). */
  onProgress?: (table: string, copied: number, total: number) => void;
}

export interface CopyReport {
  /** Every copied table, parents first, with the rows it holds on both sides. */
  tables: { name: string; rows: number }[];
}

/** Bytes of payload read before a chunk is written, whatever its row count (raw bodies may be large). */
const CHUNK_BYTES = 16 * 1024 * 1024;

/** PostgreSQL takes at most 65,535 parameters per statement. */
const MAX_PARAMS = 60_000;

/** Both schemas, table by table: what to copy, and a refusal when they do not line up. */
async function planTables(sqlite: SqliteSpool, tx: Tx): Promise<TablePlan[]> {
  const liteTables = prepared<{ name: string }, []>(
    sqlite.db,
    "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name",
  )
    .all()
    .map((r) => r.name);
  const known = new Set(COPY_TABLES.map((t) => t.name));
  const unknown = liteTables.filter((t) => !known.has(t));
  if (unknown.length)
    throw new HookspoolError(
      "E_SCHEMA",
      `the SQLite spool has tables this build does not copy (${unknown.join(", ")})`,
      { hint: "run the hookspool that wrote it" },
    );
  const plans: TablePlan[] = [];
  for (const t of COPY_TABLES) {
    const liteCols = new Set(
      sqlite.db
        .query(`PRAGMA table_info(${quote(t.name)})`)
        .all()
        .map((c) => (c as { name: string }).name),
    );
    if (liteCols.size === 0)
      throw new HookspoolError("E_SCHEMA", `the SQLite spool has no table ${t.name}`, {
        hint: "run hookspool migrate on it first",
      });
    const pgCols = (await tx`SELECT column_name, udt_name, is_nullable, column_default, is_identity, identity_generation
        FROM information_schema.columns
        WHERE table_schema = current_schema() AND table_name = ${t.name}
        ORDER BY ordinal_position`) as Record<string, string | null>[];
    if (pgCols.length === 0)
      throw new HookspoolError("E_SCHEMA", `the PostgreSQL spool has no table ${t.name}`, {
        hint: "run hookspool migrate",
      });
    const columns: Column[] = [];
    let overriding = false;
    let identity: string | null = null;
    for (const c of pgCols) {
      const name = String(c.column_name);
      if (c.is_identity === "YES") identity = name;
      if (!liteCols.has(name)) {
        // Filled by PostgreSQL itself (the journal's xid) or left null.
        if (c.is_nullable === "NO" && c.column_default === null && c.is_identity !== "YES")
          throw new HookspoolError(
            "E_SCHEMA",
            `${t.name}.${name} exists only on PostgreSQL and has no default; this build cannot copy into it`,
          );
        continue;
      }
      const kind = KINDS[String(c.udt_name)];
      if (!kind)
        throw new HookspoolError(
          "E_SCHEMA",
          `${t.name}.${name} is ${c.udt_name} on PostgreSQL; this build cannot copy into it`,
        );
      columns.push({ name, udt: String(c.udt_name), kind });
      if (c.is_identity === "YES" && c.identity_generation === "ALWAYS") overriding = true;
      liteCols.delete(name);
    }
    if (liteCols.size)
      throw new HookspoolError("E_SCHEMA", `${t.name} has columns PostgreSQL lacks (${[...liteCols].join(", ")})`, {
        hint: "run hookspool migrate",
      });
    plans.push({ name: t.name, key: t.key, columns, overriding, identity });
  }
  return plans;
}

/** Rows of a SQLite table in rowid order, `limit` at most and about CHUNK_BYTES of values. */
function readChunk(
  sqlite: SqliteSpool,
  plan: TablePlan,
  after: number,
  limit: number,
): { rows: unknown[][]; rowids: number[] } {
  const cols = plan.columns.map((c) => quote(c.name)).join(", ");
  const st = prepared<Record<string, unknown>, [number, number]>(
    sqlite.db,
    `SELECT rowid AS "__rowid", ${cols} FROM ${quote(plan.name)} WHERE rowid > ? ORDER BY rowid LIMIT ?`,
  );
  const rows: unknown[][] = [];
  const rowids: number[] = [];
  let bytes = 0;
  for (const r of st.iterate(after, limit)) {
    rowids.push(Number(r.__rowid));
    const values = plan.columns.map((c) => r[c.name]);
    rows.push(values);
    for (const v of values) bytes += typeof v === "string" ? v.length : v instanceof Uint8Array ? v.length : 8;
    if (bytes >= CHUNK_BYTES) break;
  }
  return { rows, rowids };
}

/** A SQLite table chunk by chunk, in rowid order. */
function* sqliteChunks(
  sqlite: SqliteSpool,
  plan: TablePlan,
  batchSize: number,
): Generator<{ rows: unknown[][]; rowids: number[] }> {
  let after = Number.MIN_SAFE_INTEGER;
  for (;;) {
    const chunk = readChunk(sqlite, plan, after, batchSize);
    if (chunk.rows.length === 0) return;
    yield chunk;
    after = chunk.rowids[chunk.rowids.length - 1];
  }
}

async function insertChunk(tx: Tx, plan: TablePlan, rows: unknown[][]): Promise<void> {
  const per = Math.max(1, Math.floor(MAX_PARAMS / plan.columns.length));
  const names = plan.columns.map((c) => quote(c.name)).join(", ");
  const tail = plan.name === "meta" ? " ON CONFLICT (key) DO UPDATE SET value = excluded.value" : "";
  for (let at = 0; at < rows.length; at += per) {
    const part = rows.slice(at, at + per);
    const params: unknown[] = [];
    const tuples = part.map(
      (r) =>
        `(${r
          .map((v, i) => {
            params.push(v);
            return `$${params.length}::${plan.columns[i].udt}`;
          })
          .join(", ")})`,
    );
    await tx.unsafe(
      `INSERT INTO ${quote(plan.name)} (${names})${plan.overriding ? " OVERRIDING SYSTEM VALUE" : ""} ` +
        `VALUES ${tuples.join(", ")}${tail}`,
      params,
    );
  }
}

async function copyTable(
  sqlite: SqliteSpool,
  tx: Tx,
  plan: TablePlan,
  batchSize: number,
  onProgress?: CopyOptions["onProgress"],
): Promise<void> {
  const countSql =
    plan.name === "meta"
      ? "SELECT COUNT(*) AS n FROM meta WHERE key <> 'schema_version'"
      : `SELECT COUNT(*) AS n FROM ${quote(plan.name)}`;
  const total = prepared<{ n: number }, []>(sqlite.db, countSql).get()?.n ?? 0;
  let copied = 0;
  for (const chunk of sqliteChunks(sqlite, plan, batchSize)) {
    const rows: unknown[][] = [];
    chunk.rows.forEach((values, i) => {
      if (!skipRow(plan, values)) rows.push(values.map((v, j) => toPg(v, plan.columns[j], plan.name, chunk.rowids[i])));
    });
    try {
      if (rows.length) await insertChunk(tx, plan, rows);
    } catch (e) {
      throw pgFailure(e, `copying ${plan.name} into PostgreSQL`);
    }
    copied += rows.length;
    onProgress?.(plan.name, copied, total);
  }
  if (total === 0) onProgress?.(plan.name, 0, 0);
}

/** Set each identity past the largest id the copy holds or refers to. */
async function setIdentities(sqlite: SqliteSpool, tx: Tx, plans: TablePlan[]): Promise<void> {
  for (const plan of plans) {
    if (!plan.identity) continue;
    const refs = ID_REFERENCES[plan.name] ?? [`${plan.name}.${plan.identity}`];
    let floor = 0;
    for (const ref of refs) {
      const [table, col] = ref.split(".");
      const m = prepared<{ m: number | null }, []>(
        sqlite.db,
        `SELECT MAX(${quote(col)}) AS m FROM ${quote(table)}`,
      ).get()?.m;
      floor = Math.max(floor, Number(m ?? 0));
    }
    if (plan.name === "journal") {
      const seq = prepared<{ seq: number }, []>(
        sqlite.db,
        "SELECT seq FROM sqlite_sequence WHERE name = 'journal'",
      ).get()?.seq;
      floor = Math.max(floor, Number(seq ?? 0));
    }
    if (floor < 1) continue;
    await tx`SELECT setval(pg_get_serial_sequence(${plan.name}, ${plan.identity}), ${floor}::bigint, true)`;
  }
}

/** The target holds nothing but what migrate wrote; else E_USAGE, naming the first table with rows. */
async function requireEmpty(tx: Tx): Promise<void> {
  const [meta] = await tx`SELECT COUNT(*)::int AS n FROM meta WHERE key <> ALL(${PG_OWN_META}::text[])`;
  if (meta.n > 0)
    throw new HookspoolError(
      "E_USAGE",
      "the PostgreSQL spool is not empty (meta holds more than migrate wrote); " +
        "migrate-store copies only into an empty database",
      { hint: "point it at a new database" },
    );
  for (const name of [...COPY_TABLES.map((t) => t.name).filter((n) => n !== "meta"), ...PG_ONLY_TABLES]) {
    const [r] = await tx.unsafe(`SELECT EXISTS (SELECT 1 FROM ${quote(name)}) AS any`);
    if (r.any)
      throw new HookspoolError(
        "E_USAGE",
        `the PostgreSQL spool is not empty (${name} holds rows); migrate-store copies only into an empty database`,
        { hint: "point it at a new database" },
      );
  }
}

function digestSqlite(sqlite: SqliteSpool, plan: TablePlan, batchSize: number): Digest {
  const d = new Digest();
  for (const chunk of sqliteChunks(sqlite, plan, batchSize)) {
    chunk.rows.forEach((values, i) => {
      if (!skipRow(plan, values))
        d.add(
          values.map((v, j) => toPg(v, plan.columns[j], plan.name, chunk.rowids[i])),
          plan.columns,
        );
    });
  }
  return d;
}

async function digestPg(tx: Tx, plan: TablePlan, batchSize: number): Promise<Digest> {
  const d = new Digest();
  const cols = plan.columns.map((c) => quote(c.name)).join(", ");
  const key = plan.key.map(quote).join(", ");
  const skip = plan.name === "meta" ? "key <> 'schema_version'" : "TRUE";
  const keyIdx = plan.key.map((k) => plan.columns.findIndex((c) => c.name === k));
  let after: unknown[] | null = null;
  for (;;) {
    const where = after
      ? `(${key}) > (${after.map((_, i) => `$${i + 1}::${plan.columns[keyIdx[i]].udt}`).join(", ")})`
      : "TRUE";
    const rows = (await tx.unsafe(
      `SELECT ${cols} FROM ${quote(plan.name)} WHERE ${skip} AND ${where} ORDER BY ${key} LIMIT ${batchSize}`,
      after ?? [],
    )) as Record<string, unknown>[];
    for (const r of rows)
      d.add(
        plan.columns.map((c) => r[c.name]),
        plan.columns,
      );
    if (rows.length < batchSize) return d;
    const last = rows[rows.length - 1];
    after = plan.key.map((k) => last[k]);
  }
}

/**
 * Verify a copy: for every table the same number of rows on both sides, and the same checksum
 * over every copied value. Throws E_SPOOL naming the first table that differs. `tx` may be the
 * copy's own transaction or the pool (a copy already committed).
 */
export async function verifyCopy(sqlite: SqliteSpool, tx: Tx, o: { batchSize?: number } = {}): Promise<CopyReport> {
  const batchSize = o.batchSize ?? 1000;
  const plans = await planTables(sqlite, tx);
  const tables: CopyReport["tables"] = [];
  for (const plan of plans) {
    const lite = digestSqlite(sqlite, plan, batchSize);
    const pg = await digestPg(tx, plan, batchSize);
    if (lite.rows !== pg.rows)
      throw new HookspoolError(
        "E_SPOOL",
        `verify: ${plan.name} holds ${lite.rows} rows in SQLite but ${pg.rows} in PostgreSQL`,
      );
    if (lite.checksum !== pg.checksum)
      throw new HookspoolError(
        "E_SPOOL",
        `verify: ${plan.name} differs between SQLite and PostgreSQL (same ${lite.rows} rows, different values)`,
      );
    tables.push({ name: plan.name, rows: lite.rows });
  }
  return { tables };
}

/**
 * Copy every table of `sqlite` into the empty, migrated PostgreSQL spool `pg`, parents first,
 * ids kept, meta's instance_id the SQLite spool's (webhook-ids stay stable), then verify; all in
 * one PostgreSQL transaction. A target with rows is refused (E_USAGE), nothing changed.
 */
export async function copySqliteToPg(sqlite: SqliteSpool, pg: PgSpool, o: CopyOptions = {}): Promise<CopyReport> {
  const batchSize = Math.max(1, Math.floor(o.batchSize ?? 1000));
  requireCurrentSchema(sqlite);
  await requirePgSchema(pg);
  const versionBefore = dataVersion(sqlite);
  sqlite.db.run("BEGIN");
  try {
    // The first read fixes the snapshot every later read of this transaction sees.
    prepared(sqlite.db, "SELECT COUNT(*) FROM meta").get();
    return await pg.sql.begin(async (tx) => {
      try {
        await tx`SET LOCAL lock_timeout = '10s'`;
        await tx.unsafe(
          `LOCK TABLE ${[...COPY_TABLES.map((t) => t.name), ...PG_ONLY_TABLES].map(quote).join(", ")} ` +
            "IN EXCLUSIVE MODE",
        );
      } catch (e) {
        const errno = (e as { errno?: string }).errno;
        throw new HookspoolError(
          "E_LOCKED",
          `the PostgreSQL spool's tables stayed locked by another session${errno ? ` (SQLSTATE ${errno})` : ""}; ` +
            "nothing was copied",
          { hint: "stop every hookspool process using that database first" },
        );
      }
      await requireEmpty(tx);
      const plans = await planTables(sqlite, tx);
      for (const plan of plans) await copyTable(sqlite, tx, plan, batchSize, o.onProgress);
      try {
        await setIdentities(sqlite, tx, plans);
      } catch (e) {
        throw pgFailure(e, "setting PostgreSQL's identities");
      }
      const report = await verifyCopy(sqlite, tx, { batchSize });
      // What another process committed to the file after the snapshot would be left behind:
      // the read ends, and any commit since the start shows in data_version.
      sqlite.db.run("COMMIT");
      if (dataVersion(sqlite) !== versionBefore) {
        throw new HookspoolError("E_SPOOL", "the SQLite spool changed while it was copied; nothing was copied", {
          hint: "stop every hookspool service using it (intake, dispatch, run) and run migrate-store again",
        });
      }
      return report;
    });
  } finally {
    if (sqlite.db.inTransaction) sqlite.db.run("ROLLBACK");
  }
}
