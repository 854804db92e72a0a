// How PostgreSQL runs this backend's busiest statements: each one's generic plan (the plan
// every connection runs: db.ts), explained on one connection of the pool, so a test can hold
// them to the indexes meant for them (a partial index serves a query only when the query's own
// text implies its predicate; a parameter never does, under a generic plan).
import { CLAIM_READ, CLAIM_WRITE } from "./claim.ts";
import type { PgSpool } from "./db.ts";
import { OVERDUE_OUTCOMES } from "./awaiting.ts";
import {
  ALL_CANDIDATES,
  ANY_READY_NOW,
  CANDIDATES,
  NEXT_READY_AT,
  READY_DESTINATIONS,
  RECOVER_EXPIRED,
} from "./queue.ts";
import { DELIVERY_OF } from "./reads.ts";
import { MARK_DELIVERED } from "./marks.ts";
import { FINISHED_CHUNK } from "./retention.ts";

/** A parameter as EXECUTE takes it: a number, or a string quoted with its quotes doubled (arrays as '{1,2}'). */
type Param = string | number;

/** The statements explained, with the parameters each is explained with. */
export function hotStatements(now: number, destination: string) {
  return {
    destinations: [READY_DESTINATIONS, []],
    walk: [CANDIDATES, [destination, now, 4]],
    candidates: [ALL_CANDIDATES, [now, 4]],
    nextReadyAt: [NEXT_READY_AT, [now]],
    anyReadyNow: [ANY_READY_NOW, [now]],
    overdue: [OVERDUE_OUTCOMES, [now, 100]],
    recovery: [RECOVER_EXPIRED, [now, "{}"]],
    claimRead: [
      CLAIM_READ,
      [JSON.stringify([{ name: destination, rsince: null, bfloor: null, bkey: "budget" }]), "{1}", "[]"],
    ],
    retention: [FINISHED_CHUNK, ["delivered", now, 100]],
    delivery: [DELIVERY_OF, [1]],
    mark: [MARK_DELIVERED, ["[]", "{1}", "{1}"]],
    claimWrite: [CLAIM_WRITE, ["[]", "{1}", "[]"]],
  } satisfies Record<string, [string, Param[]]>;
}

export type HotStatement = keyof ReturnType<typeof hotStatements>;

/** A connection of the pool, reserved (what `sql.reserve()` answers). */
type Conn = Awaited<ReturnType<PgSpool["sql"]["reserve"]>>;

/** `sql`'s generic plan on connection `c`, line by line, as EXPLAIN prints it. */
export async function genericPlanPg(c: Conn, sql: string, params: readonly Param[]): Promise<string[]> {
  await c.unsafe(`PREPARE hookspool_explain AS ${sql}`);
  try {
    const literal = (v: Param) => (typeof v === "number" ? String(v) : `'${v.replaceAll("'", "''")}'`);
    const args = params.length ? `(${params.map(literal).join(", ")})` : "";
    const rows = (await c.unsafe(`EXPLAIN EXECUTE hookspool_explain${args}`)) as { "QUERY PLAN": string }[];
    return rows.map((r) => r["QUERY PLAN"]);
  } finally {
    await c.unsafe("DEALLOCATE hookspool_explain");
  }
}

/** Each hot statement's generic plan, on one connection of the pool. */
export async function hotPlansPg(
  spool: PgSpool,
  now: number,
  destination: string,
): Promise<Record<HotStatement, string[]>> {
  const c = await spool.sql.reserve();
  try {
    const out = {} as Record<HotStatement, string[]>;
    for (const [name, [sql, params]] of Object.entries(hotStatements(now, destination)))
      out[name as HotStatement] = await genericPlanPg(c, sql, params);
    return out;
  } finally {
    c.release();
  }
}
