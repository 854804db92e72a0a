// What migrate-store copies, and each value on its way: the spool's tables in order with their
// keys, the identities' references, a table's plan (the columns both sides have), a SQLite value
// converted to its PostgreSQL column, and the checksum's one form of a value on both sides.
// copy.ts runs the copy and its verification with these; nothing here opens a dialect.
import { HookspoolError } from "../errors.ts";

/** The spool's tables, parents before children (events refer to batches), with their keys. */
export const COPY_TABLES: readonly { name: string; key: readonly string[] }[] = [
  { name: "meta", key: ["key"] },
  { name: "batches", key: ["id"] },
  { name: "events", key: ["id"] },
  { name: "dedup", key: ["source", "dedup_id"] },
  { name: "attempts", key: ["id"] },
  { name: "destinations", key: ["name"] },
  { name: "issues", key: ["id"] },
  { name: "alerts", key: ["kind"] },
  { name: "polls", key: ["instance"] },
  { name: "journal", key: ["id"] },
  { name: "actions", key: ["id"] },
  { name: "delivered_versions", key: ["route", "key"] },
];

/** Tables only PostgreSQL has: never copied, but they must be empty too. */
export const PG_ONLY_TABLES = ["dispatchers"];

/** The meta rows migrate writes on PostgreSQL, which an empty target may hold. */
export const PG_OWN_META = ["schema_version", "instance_id"];

/**
 * Each identity's floor: the largest id any copied column holds or refers to. Rows that refer
 * to a deleted batch (attempts, journal rows kept longer than their batch) must not have their
 * id handed out again. The journal's floor also counts ids SQLite already gave (AUTOINCREMENT).
 */
export const ID_REFERENCES: Record<string, readonly string[]> = {
  batches: [
    "batches.id",
    "events.batch_id",
    "attempts.batch_id",
    "journal.batch_id",
    "issues.sample_batch_id",
    "destinations.last_probe_batch_id",
    "polls.last_batch_id",
  ],
  events: ["events.id", "dedup.event_id", "journal.event_id", "attempts.failed_event_id"],
  attempts: ["attempts.id", "journal.attempt_id"],
  issues: ["issues.id"],
  journal: ["journal.id"],
  actions: ["actions.id"],
};

export type Kind = "int" | "float" | "text" | "bytes";

export interface Column {
  name: string;
  udt: string;
  kind: Kind;
}

export interface TablePlan {
  name: string;
  key: readonly string[];
  /** The columns both sides have, in PostgreSQL's order. */
  columns: Column[];
  /** The id column is GENERATED ALWAYS (the journal): an insert with ids says OVERRIDING SYSTEM VALUE. */
  overriding: boolean;
  /** The identity column whose sequence is set after the copy, if any. */
  identity: string | null;
}

export const KINDS: Record<string, Kind> = {
  int2: "int",
  int4: "int",
  int8: "int",
  float4: "float",
  float8: "float",
  numeric: "float",
  text: "text",
  varchar: "text",
  bytea: "bytes",
};

export const quote = (name: string) => `"${name.replace(/"/g, '""')}"`;

/** A PostgreSQL failure in words that hold no value of a row: the SQLSTATE and the constraint at most. */
export function pgFailure(e: unknown, what: string): HookspoolError {
  if (e instanceof HookspoolError) return e;
  const { errno, constraint, column } = e as { errno?: string; constraint?: string; column?: string };
  const parts = [
    errno ? `SQLSTATE ${errno}` : ((e as { code?: string }).code ?? (e as Error).name),
    constraint ? `constraint ${constraint}` : "",
    column ? `column ${column}` : "",
  ].filter(Boolean);
  return new HookspoolError("E_SPOOL", `${what} failed (${parts.join(", ")}); nothing was copied`);
}

/** A SQLite value as its PostgreSQL column takes it; a value that does not fit is refused by name. */
export function toPg(v: unknown, col: Column, table: string, rowid: number): unknown {
  if (v === null || v === undefined) return null;
  const refuse = () =>
    new HookspoolError(
      "E_SPOOL",
      `${table}.${col.name} of row ${rowid} holds a ${typeof v === "object" ? "blob" : typeof v} ` +
        `that does not fit PostgreSQL's ${col.udt}; nothing was copied`,
    );
  switch (col.kind) {
    case "int":
      if (typeof v === "bigint") return v.toString();
      if (typeof v === "number" && Number.isInteger(v)) return v;
      throw refuse();
    case "float":
      if (typeof v === "number") return v;
      if (typeof v === "bigint") return Number(v);
      throw refuse();
    case "text":
      if (typeof v === "string") return v;
      if (typeof v === "number" || typeof v === "bigint") return String(v);
      throw refuse();
    case "bytes":
      if (v instanceof Uint8Array) return v;
      if (typeof v === "string") return new TextEncoder().encode(v);
      throw refuse();
  }
}

/** A value in one form on both sides, for the checksum. */
export function canon(v: unknown, kind: Kind): unknown {
  if (v === null || v === undefined) return null;
  switch (kind) {
    case "int":
      return `i${BigInt(v as number | string | bigint).toString()}`;
    case "float":
      return Number(v);
    case "text":
      return String(v);
    case "bytes":
      return `x${Buffer.from(v as Uint8Array).toString("hex")}`;
  }
}

const MASK64 = (1n << 64n) - 1n;

/**
 * A table's rows and their checksum: the sum (mod 2^64) of a hash of each row, so the order rows are read in does not
 * matter.
 */
export class Digest {
  rows = 0;
  private sum = 0n;
  add(values: unknown[], cols: Column[]): void {
    this.rows++;
    const h = Bun.hash(JSON.stringify(values.map((v, i) => canon(v, cols[i].kind))));
    this.sum = (this.sum + BigInt(h)) & MASK64;
  }
  get checksum(): string {
    return this.sum.toString(16);
  }
}

/** Rows of one table the copy skips: meta's schema_version stays PostgreSQL's own. */
export const skipRow = (plan: TablePlan, values: unknown[]): boolean =>
  plan.name === "meta" && values[plan.columns.findIndex((c) => c.name === "key")] === "schema_version";
