// hookspool.digest's processor: a batch of events becomes one digest for its key, with the
// count of each event type in the batch and the key's running totals across batches, which it
// keeps in state. It reads nothing but the batch and calls no API.
import { defineProcessor } from "../../../src/plugin/processor.ts";

type Counts = Record<string, number>;

/** The event type of each event of the batch, as the document's event_meta lists them. */
function eventTypes(doc: Record<string, unknown>, n: number): string[] {
  const meta = Array.isArray(doc.event_meta) ? (doc.event_meta as { event_type?: unknown }[]) : [];
  return Array.from({ length: n }, (_, i) => {
    const t = meta[i]?.event_type;
    return typeof t === "string" && t !== "" ? t : "untyped";
  });
}

export default defineProcessor({
  process(batch, ctx) {
    const byType: Counts = {};
    for (const t of eventTypes(batch.doc, batch.events.length)) byType[t] = (byType[t] ?? 0) + 1;
    const totals = ctx.loadState<Record<string, Counts>>("totals", {});
    const mine: Counts = { ...(totals[batch.key] ?? {}) };
    for (const [t, n] of Object.entries(byType)) mine[t] = (mine[t] ?? 0) + n;
    ctx.saveState("totals", { ...totals, [batch.key]: mine });
    ctx.log(`batch ${batch.id}: ${batch.events.length} event(s) of ${Object.keys(byType).length} type(s)`);
    return [
      {
        event_type: "digest",
        key: batch.key,
        source: batch.source,
        batch_id: batch.id,
        events: batch.events.length,
        by_type: byType,
        totals: mine,
        first_at: batch.doc.first_at ?? null,
        last_at: batch.doc.last_at ?? null,
      },
    ];
  },
});
