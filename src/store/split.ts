// split and exclude: the operator's edits of a batch's content, each recomputing content_hash.
import { HookspoolError } from "../errors.ts";
import { type ContentEvent, documentShare } from "./content.ts";

export interface SplitOptions {
  maxEvents?: number;
  maxBytes?: number;
  /** The first event of the second piece. */
  at?: number;
}

export interface SplitEvent {
  id: number;
  size: number;
  received_at: number;
}

/**
 * A batch's events for a split, each sized as the join rule sizes it: its share of the document
 * (payload and event_meta), 0 for an excluded event, which no document carries.
 */
export function splitEvents(
  rows: readonly { id: number; received_at: number }[],
  content: readonly ContentEvent[],
): SplitEvent[] {
  const share = new Map(content.map((e) => [e.id, documentShare(e)]));
  return rows.map((r) => ({ id: r.id, received_at: r.received_at, size: share.get(r.id) ?? 0 }));
}

/** The consecutive pieces a split cuts (shared with the PostgreSQL store). */
export function pieces(events: SplitEvent[], o: SplitOptions): SplitEvent[][] {
  if (o.at !== undefined) {
    const i = events.findIndex((e) => e.id === o.at);
    if (i < 0) throw new HookspoolError("E_NOT_FOUND", `event ${o.at} is not in this batch`);
    return [events.slice(0, i), events.slice(i)].filter((p) => p.length > 0);
  }
  const out: SplitEvent[][] = [];
  let cur: SplitEvent[] = [];
  let bytes = 0;
  for (const e of events) {
    const full =
      o.maxEvents !== undefined ? cur.length >= o.maxEvents : cur.length > 0 && bytes + e.size > (o.maxBytes as number);
    if (full) {
      out.push(cur);
      cur = [];
      bytes = 0;
    }
    cur.push(e);
    bytes += e.size;
  }
  if (cur.length > 0) out.push(cur);
  return out;
}

/**
 * Cut a sealed, retry or dead batch into consecutive pieces in the same group, due now; the
 * original becomes dropped with result 'split' and names its pieces. The pieces are created
 * sealed, not open: the join rule needs at most one open batch per group, and an
 * operator's piece must not take in new events. Returns the new batch ids, in order.
 */
/** A split's options, checked before anything is read (shared with the PostgreSQL store). */
export function checkSplitOptions(o: SplitOptions): void {
  const given = [o.maxEvents, o.maxBytes, o.at].filter((x) => x !== undefined).length;
  if (given !== 1) throw new HookspoolError("E_USAGE", "split needs exactly one of --max-events, --max-bytes, --at");
  if ((o.maxEvents !== undefined && o.maxEvents < 1) || (o.maxBytes !== undefined && o.maxBytes < 1)) {
    throw new HookspoolError("E_USAGE", "--max-events and --max-bytes must be at least 1");
  }
}
