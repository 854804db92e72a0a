// What `hookspool check` says of the config's spool, on its backend. SQLite: the file opens,
// passes quick_check and has this build's schema (older: a warning, the dispatcher migrates it;
// newer or corrupt: an error). PostgreSQL: the URL's secret resolves, the server answers, and the
// schema version is this build's. Never the URL itself: it may hold a password.
import { statSync } from "node:fs";
import type { Env } from "../config/load.ts";
import type { Config, ConfigProblem } from "../config/types.ts";
import { isHookspoolError } from "../errors.ts";
import { CorruptSpool } from "./corrupt.ts";
import { openPgPool } from "./open.ts";
import { PG_LATEST_SCHEMA, pgSchemaVersion } from "./pg/migrate.ts";
import { openVerified, requireCurrentSchema, schemaVersion, type SqliteSpool } from "./sqlite/db.ts";
import { LATEST_SCHEMA } from "./sqlite/migrate.ts";

const problem = (level: ConfigProblem["level"], key: string, message: string, hint?: string): ConfigProblem => ({
  level,
  key,
  message,
  hint,
});

function statOrNull(path: string): ReturnType<typeof statSync> | null {
  try {
    return statSync(path);
  } catch {
    return null;
  }
}

/** check's database rules for the config's backend. */
export async function checkStore(config: Config, o: { spoolFile: string; env: Env }): Promise<ConfigProblem[]> {
  return config.spool.backend === "postgres" ? postgresRules(config, o.env) : databaseRules(o.spoolFile);
}

function databaseRules(path: string): ConfigProblem[] {
  const hint = "restore from backup; hookspool export reads what is still readable; never start fresh automatically";
  if (statOrNull(path) === null)
    return [problem("warning", "spool.db", `no spool yet at ${path}; hookspool migrate creates it`)];
  let spool: SqliteSpool | null = null;
  try {
    spool = openVerified(path, { create: false, busyTimeoutS: 10 });
    const version = schemaVersion(spool);
    // check is both units' ExecStartPre: an older schema must not stop the dispatcher, which
    // migrates it at startup; the intake refuses it on its own (exit 2).
    if (version < LATEST_SCHEMA) {
      return [
        problem(
          "warning",
          "spool.db",
          `schema ${version} is older than this hookspool (${LATEST_SCHEMA})`,
          "the dispatcher migrates it at startup, or run hookspool migrate; the intake refuses it until then",
        ),
      ];
    }
    requireCurrentSchema(spool);
    return [];
  } catch (e) {
    if (isHookspoolError(e, "E_SCHEMA")) return [problem("error", "spool.db", e.message, e.hint)];
    if (e instanceof CorruptSpool) {
      const bad = e.findings;
      return [
        problem(
          "error",
          "spool.db",
          `database corrupt: ${bad.slice(0, 3).join("; ")}${bad.length > 3 ? ` (and ${bad.length - 3} more)` : ""}`,
          hint,
        ),
      ];
    }
    if (isHookspoolError(e)) return [problem("error", "spool.db", e.message, e.hint)];
    return [problem("error", "spool.db", `cannot open ${path}: ${e instanceof Error ? e.message : String(e)}`)];
  } finally {
    spool?.close();
  }
}

async function postgresRules(config: Config, env: Env): Promise<ConfigProblem[]> {
  const problem = (level: ConfigProblem["level"], message: string, hint?: string): ConfigProblem => ({
    level,
    key: "spool.url",
    message,
    hint,
  });
  let pg: ReturnType<typeof openPgPool>;
  try {
    pg = openPgPool(config, env);
  } catch (e) {
    return [
      problem("error", isHookspoolError(e) ? e.message : (e as Error).name, isHookspoolError(e) ? e.hint : undefined),
    ];
  }
  try {
    await pg.ping();
    const version = await pgSchemaVersion(pg);
    if (version === 0)
      return [
        problem(
          "warning",
          "the PostgreSQL database has no hookspool schema yet",
          "hookspool migrate creates it (a dispatcher does at its start)",
        ),
      ];
    if (version < PG_LATEST_SCHEMA)
      return [
        problem(
          "warning",
          `the PostgreSQL spool is at schema ${version}, older than this hookspool (${PG_LATEST_SCHEMA})`,
          "the dispatcher migrates it at startup, or run hookspool migrate; the intake refuses it until then",
        ),
      ];
    if (version > PG_LATEST_SCHEMA)
      return [
        problem(
          "error",
          `the PostgreSQL spool is at schema ${version}, newer than this hookspool (${PG_LATEST_SCHEMA})`,
          "run the newer hookspool",
        ),
      ];
    return [];
  } catch (e) {
    if (isHookspoolError(e))
      return [
        problem("error", e.message, e.hint ?? "is the server up, and does spool.url name its database and user?"),
      ];
    const { code, errno } = e as { code?: string; errno?: string };
    return [problem("error", `PostgreSQL refused (${[code ?? (e as Error).name, errno].filter(Boolean).join(" ")})`)];
  } finally {
    await pg.close();
  }
}
