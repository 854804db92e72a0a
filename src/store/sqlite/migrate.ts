// Applying schema migrations: in order, one BEGIN IMMEDIATE each, mirrored in user_version.
// The schema migrations, embedded in the binary as text, so the one binary can migrate a spool
// with nothing installed beside it.
import m0001 from "../../../migrations/0001_v2.sql" with { type: "text" };
import m0002 from "../../../migrations/0002_unwrap.sql" with { type: "text" };
import m0003 from "../../../migrations/0003_polls.sql" with { type: "text" };
import m0004 from "../../../migrations/0004_quarantine.sql" with { type: "text" };
import m0005 from "../../../migrations/0005_ready_index.sql" with { type: "text" };
import m0006 from "../../../migrations/0006_dead_reason.sql" with { type: "text" };
import m0007 from "../../../migrations/0007_trace.sql" with { type: "text" };
import m0008 from "../../../migrations/0008_journal.sql" with { type: "text" };
import m0009 from "../../../migrations/0009_actions.sql" with { type: "text" };
import m0010 from "../../../migrations/0010_pacing.sql" with { type: "text" };
import m0011 from "../../../migrations/0011_outcomes.sql" with { type: "text" };
import m0012 from "../../../migrations/0012_raw_once.sql" with { type: "text" };
import m0013 from "../../../migrations/0013_versions.sql" with { type: "text" };
import m0014 from "../../../migrations/0014_body_files.sql" with { type: "text" };
import { randomBytes } from "node:crypto";
import { HookspoolError } from "../../errors.ts";
import { type SqliteSpool, schemaVersion } from "./db.ts";
import { getMetaTx, setMetaTx } from "./meta.ts";

export interface MigrateResult {
  from: number;
  to: number;
  applied: string[];
}

/** The migrations a database at `version` still needs. */
export function pendingMigrations(version: number): Migration[] {
  return MIGRATIONS.filter((m) => m.version > version);
}

/**
 * Apply every pending migration. The caller holds dispatch.lock (only the dispatcher at
 * startup and hookspool migrate apply them). With dryRun nothing is written.
 */
export function migrate(spool: SqliteSpool, opts: { dryRun?: boolean } = {}): MigrateResult {
  const from = schemaVersion(spool);
  if (from > LATEST_SCHEMA) {
    throw new HookspoolError(
      "E_SCHEMA",
      `${spool.path} has schema ${from}, newer than this hookspool (${LATEST_SCHEMA})`,
      {
        hint: "downgrade is not supported; run the newer hookspool or restore a backup",
      },
    );
  }
  const pending = pendingMigrations(from);
  if (opts.dryRun) return { from, to: from, applied: pending.map((m) => m.name) };
  for (const m of pending) {
    // Each migration runs in one transaction. One that rebuilds a table others reference
    // (0011 rebuilds batches, which events reference) runs with foreign_keys off, a pragma that
    // cannot change inside a transaction, and checks every reference before it commits.
    if (m.rebuilds) spool.db.run("PRAGMA foreign_keys = OFF");
    try {
      spool.db
        .transaction(() => {
          spool.db.run(m.sql);
          if (m.rebuilds) {
            const broken = spool.db.query("PRAGMA foreign_key_check").all();
            if (broken.length)
              throw new HookspoolError(
                "E_CORRUPT",
                `${spool.path}: migration ${m.name} left ${broken.length} broken reference(s); nothing was changed`,
              );
          }
          setMetaTx(spool.db, "schema_version", m.version);
          if (getMetaTx(spool.db, "instance_id") === null) {
            setMetaTx(spool.db, "instance_id", randomBytes(6).toString("hex"));
          }
          spool.db.run(`PRAGMA user_version = ${m.version}`);
        })
        .immediate();
    } finally {
      if (m.rebuilds) spool.db.run("PRAGMA foreign_keys = ON");
    }
  }
  return { from, to: schemaVersion(spool), applied: pending.map((m) => m.name) };
}

export interface Migration {
  version: number;
  name: string;
  sql: string;
  /** It rebuilds a table other tables reference: foreign_keys is off around it, and checked before it commits. */
  rebuilds?: boolean;
}

/** Every migration, in the order they apply. */
export const MIGRATIONS: readonly Migration[] = [
  { version: 1, name: "0001_v2", sql: m0001 },
  { version: 2, name: "0002_unwrap", sql: m0002 },
  { version: 3, name: "0003_polls", sql: m0003 },
  { version: 4, name: "0004_quarantine", sql: m0004 },
  { version: 5, name: "0005_ready_index", sql: m0005 },
  { version: 6, name: "0006_dead_reason", sql: m0006 },
  { version: 7, name: "0007_trace", sql: m0007 },
  { version: 8, name: "0008_journal", sql: m0008 },
  { version: 9, name: "0009_actions", sql: m0009 },
  { version: 10, name: "0010_pacing", sql: m0010 },
  { version: 11, name: "0011_outcomes", sql: m0011, rebuilds: true },
  { version: 12, name: "0012_raw_once", sql: m0012 },
  { version: 13, name: "0013_versions", sql: m0013 },
  { version: 14, name: "0014_body_files", sql: m0014 },
];

/** The schema version this build writes and expects. */
export const LATEST_SCHEMA = MIGRATIONS[MIGRATIONS.length - 1].version;
