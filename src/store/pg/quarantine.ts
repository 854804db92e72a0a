// Quarantine on PostgreSQL: a verified request whose classification failed is kept as a dead
// batch for the reserved destination quarantine (raw body, allowed headers, URL), with its issue,
// in one transaction, as on SQLite.
import { type ContentEvent, contentHash } from "../content.ts";
import { type QuarantineInput, quarantineIssue, quarantineRecord } from "../enqueue.ts";
import { num, type PgSpool } from "./db.ts";
import { raiseIssuePg } from "./issues.ts";
import { journalPg } from "./journal.ts";
import { testHook } from "../../testhook.ts";
import { advanceMetaTimesPg } from "./meta.ts";

export async function quarantinePg(spool: PgSpool, q: QuarantineInput, now: number): Promise<{ eventId: number; batchId: number; reason: string }> {
  const { reason, headers } = quarantineRecord(q);
  const issue = quarantineIssue(q.source, reason);
  return spool.sql.begin(async (tx) => {
    await advanceMetaTimesPg(tx, ["last_enqueue_at"], now);
    const size = q.raw.length;
    const [b] = await tx`INSERT INTO batches (route, source, destination, key, state, first_at, last_at, quiet_s, max_s,
        max_events, max_bytes, count, bytes, sealed_at, last_class, last_error, dead_reason)
      VALUES (${q.source}, ${q.source}, 'quarantine', 'quarantine', 'dead', ${now}, ${now}, 0, 0, 1, ${Math.max(1, size)}, 1, ${size}, ${now}, 'quarantine', ${reason}, 'quarantined')
      RETURNING id`;
    const batchId = num(b.id);
    const headersText = JSON.stringify(headers);
    const [e] = await tx`INSERT INTO events (source, route, batch_id, event_type, dedup_id, received_at, payload, raw, headers, size, url, trace)
      VALUES (${q.source}, ${q.source}, ${batchId}::bigint, '', NULL, ${now}, NULL, ${q.raw}, ${headersText}, ${size}, ${q.url}, ${JSON.stringify({ stage: "quarantined", reason })})
      RETURNING id`;
    const eventId = num(e.id);
    const content: ContentEvent[] = [{ id: eventId, event_type: "", received_at: now, dedup_id: null, payload: null, headers: headersText }];
    await tx`UPDATE batches SET content_hash = ${contentHash(content)} WHERE id = ${batchId}::bigint`;
    await journalPg(tx, "event", batchId, now, { event: eventId, detail: { quarantined: reason } });
    await journalPg(tx, "dead", batchId, now, { detail: { reason: "quarantined" } });
    await raiseIssuePg(tx, { ...issue, route: q.source, batchId, error: `quarantined: ${reason}`, now });
    testHook("quarantine.before_commit");
    return { eventId, batchId, reason };
  });
}
