// The record of what an operator changed from the dashboard, on PostgreSQL: one row per action,
// names and ids only, written in the change's own transaction (the change's operations run in
// savepoints of it), so the change and its record commit together or not at all.
import type { ActionRow } from "../actions.ts";
import { num, type PgSpool } from "./db.ts";

/** Run `change` on the spool within one transaction, and record it there; a change that throws records nothing. */
export async function recordActionPg<T>(
  spool: PgSpool,
  a: Omit<ActionRow, "id">,
  change: (inTx: PgSpool) => Promise<T>,
): Promise<T> {
  return spool.sql.begin(async (tx) => {
    const out = await change(spool.within(tx));
    await tx`INSERT INTO actions (at, via, verb, target) VALUES (${a.at}, ${a.via}, ${a.verb}, ${a.target})`;
    return out;
  }) as Promise<T>;
}

/** The newest actions first, at most `limit`. */
export async function recentActionsPg(spool: PgSpool, limit: number): Promise<ActionRow[]> {
  const rows =
    (await spool.sql`SELECT id, at, via, verb, target FROM actions ORDER BY id DESC LIMIT ${limit}`) as Record<
      string,
      unknown
    >[];
  return rows.map((r) => ({
    id: num(r.id),
    at: Number(r.at),
    via: r.via as ActionRow["via"],
    verb: String(r.verb),
    target: String(r.target),
  }));
}
