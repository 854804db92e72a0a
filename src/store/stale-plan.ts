// Stale events by the provider's own clock, as a pure plan both dialects and every reader share.
// An event may carry a version (events.version, from its source's `version` selector); its
// route's stale rule ("mark" or "skip") is kept in its trace when it is routed. When a batch is
// first leased, its (route, key)'s last delivered version is fixed on its row (stale_floor, with
// floor_at saying it was); an event whose version is below that floor is stale. The floor is the
// one input that comes after the seal, and it is fixed once, at the first lease, so every
// attempt of the batch sends the same document (docs/receiving.md says why then and not at the
// seal: only a head of its group is leased, so by then every earlier batch of the key has ended).
// The delivered mark records the highest version its batch delivered, in the outcome's own
// transaction (delivered_versions, each dialect's marks.ts).
import type { ContentEvent } from "./content.ts";

export type StaleRule = "mark" | "skip";

/** The stale rule an event's trace kept when it was routed, or null (off, or no trace). */
export function tracedStale(trace: string | null | undefined): StaleRule | null {
  if (!trace) return null;
  try {
    const s = (JSON.parse(trace) as { stale?: unknown } | null)?.stale;
    return s === "mark" || s === "skip" ? s : null;
  } catch {
    return null;
  }
}

/** Whether a version is older than the floor its batch was judged against (none on either side: never). */
export function isStale(version: number | null | undefined, floor: number | null | undefined): boolean {
  return version !== undefined && version !== null && floor !== undefined && floor !== null && version < floor;
}

/** The batch's judgement: fixed when it was first leased (floor_at), against stale_floor. */
export interface StaleFloor {
  stale_floor: number | null;
  floor_at: number | null;
}

/** One event of a judged batch, and what its route's rule made of it. */
export interface Judged<E> {
  event: E;
  /** "mark": delivered with "stale": true; "skip": left out of the document; null: neither. */
  stale: StaleRule | null;
}

/**
 * What each event (in the order given: document order) is, for a batch judged as `floor` says.
 * A batch not yet leased is not judged: nothing is stale.
 */
export function judge<E extends Pick<ContentEvent, "version" | "trace">>(
  events: readonly E[],
  floor: StaleFloor,
): Judged<E>[] {
  const at = floor.floor_at === null ? null : floor.stale_floor;
  return events.map((event) => ({ event, stale: isStale(event.version, at) ? tracedStale(event.trace) : null }));
}

/** How many of a judged batch's events were marked and how many left out. */
export function staleCounts(judged: readonly Judged<unknown>[]): { marked: number; skipped: number } {
  let marked = 0;
  let skipped = 0;
  for (const j of judged) {
    if (j.stale === "mark") marked++;
    else if (j.stale === "skip") skipped++;
  }
  return { marked, skipped };
}
