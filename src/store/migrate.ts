// Applying schema migrations: in order, one BEGIN IMMEDIATE each, mirrored in user_version.
import { randomBytes } from "node:crypto";
import { HookspoolError } from "../errors.ts";
import { type Spool, schemaVersion } from "./db.ts";
import { getMetaTx, setMetaTx } from "./meta.ts";
import { LATEST_SCHEMA, MIGRATIONS, type Migration } from "./migrations.ts";

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
export function migrate(spool: Spool, opts: { dryRun?: boolean } = {}): MigrateResult {
  const from = schemaVersion(spool);
  if (from > LATEST_SCHEMA) {
    throw new HookspoolError("E_SCHEMA", `${spool.path} has schema ${from}, newer than this hookspool (${LATEST_SCHEMA})`, {
      hint: "downgrade is not supported; run the newer hookspool or restore a backup",
    });
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
            if (broken.length) throw new HookspoolError("E_CORRUPT", `${spool.path}: migration ${m.name} left ${broken.length} broken reference(s); nothing was changed`);
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
