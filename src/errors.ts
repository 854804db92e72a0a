// One error family for everything hookspool reports to an operator.

/** What went wrong, as a stable string code; each maps to an exit code (EXIT_CODES). */
export type ErrorCode =
  | "E_CONFIG" // a config file or value is wrong
  | "E_SCHEMA" // the database schema is older or newer than this build
  | "E_CORRUPT" // quick_check failed
  | "E_USAGE" // bad command-line arguments
  | "E_INPUT" // bad input data (a payload, a key, a request file)
  | "E_NOT_FOUND" // a batch, event or file that does not exist
  | "E_NOTHING" // nothing to do (a transition that does not apply)
  | "E_LOCKED" // dispatch.lock is held
  | "E_SPOOL"; // the spool cannot take a write (full, busy)

const EXIT_CODES: Record<ErrorCode, number> = {
  E_CONFIG: 2,
  E_SCHEMA: 2,
  E_CORRUPT: 2,
  E_USAGE: 2,
  E_INPUT: 2,
  E_NOT_FOUND: 1,
  E_NOTHING: 1,
  E_LOCKED: 3,
  E_SPOOL: 1,
};

export interface ErrorDetails {
  /** The file the problem is in (config.toml, a request file). */
  file?: string;
  /** The key path inside the file (routes[2].match). */
  key?: string;
  /** What the operator can do about it. */
  hint?: string;
  /** The problems behind it, each at its key (a config that check refuses). */
  problems?: { level: string; key: string; message: string; hint?: string }[];
}

export class HookspoolError extends Error {
  readonly code: ErrorCode;
  readonly file?: string;
  readonly key?: string;
  readonly hint?: string;
  readonly problems?: ErrorDetails["problems"];

  constructor(code: ErrorCode, message: string, details: ErrorDetails = {}) {
    super(message);
    this.name = "HookspoolError";
    this.code = code;
    this.file = details.file;
    this.key = details.key;
    this.hint = details.hint;
    this.problems = details.problems;
  }

  get exitCode(): number {
    return EXIT_CODES[this.code];
  }

  /** One line for an operator: `file: key: what is wrong (hint)`. */
  describe(): string {
    const where = [this.file, this.key].filter(Boolean).join(": ");
    const hint = this.hint ? ` (${this.hint})` : "";
    return `${where ? `${where}: ` : ""}${this.message}${hint}`;
  }
}

export function isHookspoolError(e: unknown, code?: ErrorCode): e is HookspoolError {
  return e instanceof HookspoolError && (code === undefined || e.code === code);
}
