// The record of what an operator changed from the dashboard, on PostgreSQL: one row per action,
// names and ids only. The change runs first, in its own transaction; the row is written only
// once it committed, so a failed change leaves no row.
import type { ActionRow } from "../actions.ts";
import { num, type PgSpool } from "./db.ts";

/** Run `change`, then record it; a change that throws records nothing. */
export async function recordActionPg<T>(
  spool: PgSpool,
  a: Omit<ActionRow, "id">,
  change: () => Promise<T>,
): Promise<T> {
  const out = await change();
  await spool.sql`INSERT INTO actions (at, via, verb, target) VALUES (${a.at}, ${a.via}, ${a.verb}, ${a.target})`;
  return out;
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
