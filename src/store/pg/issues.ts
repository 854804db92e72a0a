// Issues on PostgreSQL: one row per fingerprint, raised, bumped, reopened and resolved with
// SQLite's rules. The fingerprint's unique index and a row lock make a raise from two
// processes at once one open issue counted twice, never two issues.
import { type IssueRow, type RaiseIssue, type IssueState, ISSUE_VERBS } from "../issues.ts";
import { num, numOrNull, type PgSpool, type Tx } from "./db.ts";

export function issueRowOf(r: Record<string, unknown>): IssueRow {
  return {
    id: num(r.id),
    fingerprint: String(r.fingerprint),
    kind: r.kind as IssueRow["kind"],
    destination: (r.destination as string | null) ?? null,
    route: (r.route as string | null) ?? null,
    state: r.state as IssueRow["state"],
    first_at: Number(r.first_at),
    last_at: Number(r.last_at),
    count: Number(r.count),
    sample_batch_id: numOrNull(r.sample_batch_id),
    last_error: (r.last_error as string | null) ?? null,
    alerted_at: numOrNull(r.alerted_at),
  };
}

/** Open an issue, or count one more occurrence (a resolved one reopens; an ignored one only counts). */
export async function raiseIssuePg(tx: Tx, r: RaiseIssue): Promise<{ id: number; opened: boolean }> {
  const batch = r.batchId ?? null;
  const error = r.error ?? null;
  const [inserted] = await tx`INSERT
      INTO issues (fingerprint, kind, destination, route, state, first_at, last_at, count, sample_batch_id, last_error)
      VALUES (${r.fingerprint}, ${r.kind}, ${r.destination ?? null}, ${r.route ?? null}, 'open', ${r.now}, ${r.now}, 1,
        ${batch}::bigint, ${error})
      ON CONFLICT (fingerprint) DO NOTHING RETURNING id`;
  if (inserted) return { id: num(inserted.id), opened: true };
  const [existing] = await tx`SELECT id, state FROM issues WHERE fingerprint = ${r.fingerprint} FOR UPDATE`;
  const id = num(existing.id);
  if (existing.state === "resolved") {
    await tx`UPDATE issues SET state = 'open', count = count + 1, last_at = ${r.now}, alerted_at = NULL,
        sample_batch_id = COALESCE(${batch}::bigint, sample_batch_id), last_error = COALESCE(${error}, last_error)
          WHERE id = ${id}::bigint`;
    return { id, opened: true };
  }
  await tx`UPDATE issues SET count = count + 1, last_at = ${r.now},
      sample_batch_id = COALESCE(${batch}::bigint, sample_batch_id), last_error = COALESCE(${error}, last_error)
        WHERE id = ${id}::bigint`;
  return { id, opened: false };
}

/** Resolve an open or acked issue; true when one was resolved. */
export async function resolveIssuePg(tx: Tx, fingerprint: string, now: number): Promise<boolean> {
  const r = await tx`UPDATE issues SET state = 'resolved', last_at = ${now} WHERE fingerprint = ${fingerprint}
      AND state IN ('open', 'acked')`;
  return r.count > 0;
}

/**
 * Resolve several open or acked issues in one statement, each at its own time (an outcome's
 * success resolves every transient issue of its destination at once).
 */
export async function resolveIssuesPg(tx: Tx, resolve: ReadonlyMap<string, number>): Promise<void> {
  if (resolve.size === 0) return;
  await tx`UPDATE issues SET state = 'resolved', last_at = r.now
      FROM unnest(${[...resolve.keys()]}::text[], ${[...resolve.values()]}::float8[]) AS r(fingerprint, now)
      WHERE issues.fingerprint = r.fingerprint AND issues.state IN ('open', 'acked')`;
}

export async function getIssueByFingerprintPg(spool: PgSpool, fingerprint: string): Promise<IssueRow | null> {
  const [r] = await spool.sql`SELECT * FROM issues WHERE fingerprint = ${fingerprint}`;
  return r ? issueRowOf(r) : null;
}

export async function openIssueCountPg(spool: PgSpool): Promise<number> {
  const [r] = await spool.sql`SELECT COUNT(*)::int AS n FROM issues WHERE state IN ('open', 'acked')`;
  return r.n;
}

/** Open issues not alerted yet, oldest first (only the maintenance holder sends alerts). */
export async function issuesToAlertPg(spool: PgSpool): Promise<IssueRow[]> {
  return (
    (await spool.sql`SELECT * FROM issues WHERE state = 'open' AND alerted_at IS NULL ORDER BY first_at, id`) as Record<
      string,
      unknown
    >[]
  ).map(issueRowOf);
}

/** May an alert of `kind` go out now (one per rate_limit_s per kind)? A refusal is counted. */
export async function alertSlotFreePg(spool: PgSpool, kind: string, now: number, rateLimitS: number): Promise<boolean> {
  return spool.sql.begin(async (tx) => {
    const [row] = await tx`SELECT last_at FROM alerts WHERE kind = ${kind} FOR UPDATE`;
    if (!row || now - Number(row.last_at) >= rateLimitS || now < Number(row.last_at)) return true;
    await tx`UPDATE alerts SET suppressed = suppressed + 1 WHERE kind = ${kind}`;
    return false;
  });
}

/** The alert for this issue went out. */
export async function markAlertedPg(spool: PgSpool, issueId: number, kind: string, now: number): Promise<void> {
  await spool.sql.begin(async (tx) => {
    await tx`UPDATE issues SET alerted_at = ${now} WHERE id = ${issueId}::bigint`;
    await tx`INSERT INTO alerts (kind, last_at) VALUES (${kind}, ${now}) ON CONFLICT (kind) DO UPDATE
      SET last_at = excluded.last_at`;
  });
}

/** Issues, newest activity first; by default the ones still needing attention. */
export async function listIssuesPg(spool: PgSpool, f: { state?: IssueState | "all" } = {}): Promise<IssueRow[]> {
  const rows =
    f.state === "all"
      ? await spool.sql`SELECT * FROM issues ORDER BY last_at DESC, id DESC`
      : f.state
        ? await spool.sql`SELECT * FROM issues WHERE state = ${f.state} ORDER BY last_at DESC, id DESC`
        : await spool.sql`SELECT * FROM issues WHERE state IN ('open', 'acked') ORDER BY last_at DESC, id DESC`;
  return (rows as Record<string, unknown>[]).map(issueRowOf);
}

/** ack, resolve or ignore an issue, with SQLite's allowed transitions. */
export async function setIssueStatePg(
  spool: PgSpool,
  id: number,
  verb: keyof typeof ISSUE_VERBS,
  now: number,
): Promise<IssueRow | "missing" | "nothing"> {
  const t = ISSUE_VERBS[verb];
  return spool.sql.begin(async (tx) => {
    const [row] = await tx`SELECT * FROM issues WHERE id = ${id}::bigint FOR UPDATE`;
    if (!row) return "missing" as const;
    if (!t.from.includes(row.state as IssueState)) return "nothing" as const;
    const [after] =
      await tx`UPDATE issues SET state = ${t.to}, last_at = GREATEST(last_at, ${now}) WHERE id = ${id}::bigint
        RETURNING *`;
    return issueRowOf(after);
  });
}
