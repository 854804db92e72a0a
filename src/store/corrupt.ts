// A spool the database cannot read soundly: the error every reader raises (exit 2), and the one
// question each asks of a failure (is this the file's corruption?). Neutral, so a caller outside
// the store names neither dialect.
import { HookspoolError } from "../errors.ts";

/**
 * Whether `e` says the file is not a sound SQLite database (SQLITE_CORRUPT*, SQLITE_NOTADB, or
 * SQLite's own words for them). Every reader of a spool asks this one question.
 */
export function isCorruption(e: unknown): boolean {
  const code = String((e as { code?: unknown } | null)?.code ?? "");
  const message = e instanceof Error ? e.message : String(e);
  return /^SQLITE_(CORRUPT|NOTADB)/.test(code) || /malformed|not a database/i.test(message);
}

/** A spool that failed to open or to pass quick_check; `findings` says what SQLite found. */
export class CorruptSpool extends HookspoolError {
  constructor(
    path: string,
    readonly findings: string[],
  ) {
    super("E_CORRUPT", `${path} is corrupt: ${findings[0]?.slice(0, 200) ?? "unreadable"}`, {
      hint: "hookspool export what is readable and restore from backup; nothing is moved aside automatically",
    });
  }
}
