// The PostgreSQL schema: its own migrations (migrations/pg/NNNN_name.sql, embedded), applied
// under an advisory lock so two processes starting together never both migrate, with the same
// version contract as SQLite: a newer schema than this build knows is refused, an older one is
// migrated only by `hookspool migrate` (or the dispatcher at its start), never silently read.
import pg0001 from "../../../migrations/pg/0001_schema.sql" with { type: "text" };
import pg0002 from "../../../migrations/pg/0002_pacing.sql" with { type: "text" };
import pg0003 from "../../../migrations/pg/0003_outcomes.sql" with { type: "text" };
import pg0004 from "../../../migrations/pg/0004_raw_once.sql" with { type: "text" };
import pg0005 from "../../../migrations/pg/0005_lz4.sql" with { type: "text" };
import pg0006 from "../../../migrations/pg/0006_lean_batches.sql" with { type: "text" };
import pg0007 from "../../../migrations/pg/0007_payload_json.sql" with { type: "text" };
import pg0008 from "../../../migrations/pg/0008_versions.sql" with { type: "text" };
import pg0009 from "../../../migrations/pg/0009_body_files.sql" with { type: "text" };
import pg0010 from "../../../migrations/pg/0010_queue_statistics.sql" with { type: "text" };
import pg0011 from "../../../migrations/pg/0011_path_values.sql" with { type: "text" };
import type { ReservedSQL, SQL } from "bun";
import { HookspoolError } from "../../errors.ts";
import type { PgSpool } from "./db.ts";

export interface PgMigration {
  version: number;
  name: string;
  sql: string;
}

export const PG_MIGRATIONS: readonly PgMigration[] = [
  { version: 1, name: "0001_schema", sql: pg0001 },
  { version: 2, name: "0002_pacing", sql: pg0002 },
  { version: 3, name: "0003_outcomes", sql: pg0003 },
  { version: 4, name: "0004_raw_once", sql: pg0004 },
  { version: 5, name: "0005_lz4", sql: pg0005 },
  { version: 6, name: "0006_lean_batches", sql: pg0006 },
  { version: 7, name: "0007_payload_json", sql: pg0007 },
  { version: 8, name: "0008_versions", sql: pg0008 },
  { version: 9, name: "0009_body_files", sql: pg0009 },
  { version: 10, name: "0010_queue_statistics", sql: pg0010 },
  { version: 11, name: "0011_path_values", sql: pg0011 },
];

export const PG_LATEST_SCHEMA = PG_MIGRATIONS[PG_MIGRATIONS.length - 1].version;

/**
 * The advisory lock key every migrate takes: an arbitrary constant, "hookmig" in ASCII rounded
 * to the nearest double (the key every build has taken), written exactly.
 */
const MIGRATE_LOCK = 0x686f6f6b6d6968;

/** The schema version the database holds (0: an empty database). */
export async function pgSchemaVersion(spool: PgSpool): Promise<number> {
  return schemaVersionOn(spool.sql);
}

async function schemaVersionOn(sql: SQL | ReservedSQL): Promise<number> {
  const [t] = await sql`SELECT to_regclass('meta') IS NOT NULL AS present`;
  if (!t.present) return 0;
  const [r] = await sql`SELECT value FROM meta WHERE key = 'schema_version'`;
  return r ? Number(r.value) : 0;
}

/** Refuse a schema this build cannot read: older (migrate first) or newer (a newer build wrote it). */
export async function requirePgSchema(spool: PgSpool): Promise<void> {
  const v = await pgSchemaVersion(spool);
  if (v > PG_LATEST_SCHEMA)
    throw new HookspoolError(
      "E_SCHEMA",
      `the PostgreSQL spool is at schema ${v}, newer than this build (${PG_LATEST_SCHEMA}); run the newer hookspool`,
    );
  if (v < PG_LATEST_SCHEMA)
    throw new HookspoolError(
      "E_SCHEMA",
      `the PostgreSQL spool is at schema ${v}; this build needs ${PG_LATEST_SCHEMA}`,
      { hint: "run hookspool migrate" },
    );
}

/** Apply what is missing, each migration in its own transaction, all under the migrate lock. */
export async function migratePg(
  spool: PgSpool,
  instanceId: string,
): Promise<{ from: number; to: number; applied: string[] }> {
  const conn = await spool.sql.reserve();
  try {
    await conn`SELECT pg_advisory_lock(${MIGRATE_LOCK}::bigint)`;
    try {
      // On the locked connection: a pool of one has no other to lend.
      const from = await schemaVersionOn(conn);
      if (from > PG_LATEST_SCHEMA)
        throw new HookspoolError(
          "E_SCHEMA",
          `the PostgreSQL spool is at schema ${from}, newer than this build (${PG_LATEST_SCHEMA}); run the newer ` +
            `hookspool`,
        );
      const applied: string[] = [];
      for (const m of PG_MIGRATIONS.filter((x) => x.version > from)) {
        await conn.begin(async (tx) => {
          await tx.unsafe(m.sql);
          await tx`INSERT INTO meta (key, value) VALUES ('schema_version', ${String(m.version)}) ON CONFLICT (key)
            DO UPDATE SET value = excluded.value`;
          await tx`INSERT INTO meta (key, value) VALUES ('instance_id', ${instanceId}) ON CONFLICT (key) DO NOTHING`;
        });
        applied.push(m.name);
      }
      return { from, to: PG_LATEST_SCHEMA, applied };
    } finally {
      await conn`SELECT pg_advisory_unlock(${MIGRATE_LOCK}::bigint)`;
    }
  } finally {
    conn.release();
  }
}
