// A group commit's join rule in memory: the rules of enqueue-plan.ts applied to a whole group of
// fresh events (no dedup id seen before, none twice), request by request in arrival order, each
// copy in turn, over what the dialect read of the groups it touches (each (route, key)'s open
// batch and latest unfinished first_at) and the new events' ids. The result says every row to
// write, in the order the one-by-one path writes them; the dialect writes it as a set
// (store/pg/enqueue-set.ts). Pure: no statement runs here.
import type { BatchRow } from "./batches.ts";
import type { ContentEvent } from "./content.ts";
import { type EnqueueResult, eventSize, type NewEvent, type Placed, rawIsPayload } from "./enqueue.ts";
import { readyAfterJoin, sealsBeforeJoin, sealsOnSize } from "./enqueue-plan.ts";

/** The columns of a batches row the join rule reads and changes. */
type JoinColumns =
  | "route"
  | "source"
  | "destination"
  | "key"
  | "first_at"
  | "last_at"
  | "quiet_s"
  | "max_s"
  | "max_events"
  | "max_bytes"
  | "count"
  | "bytes";

/** A batch as the group leaves it: one open before the group (`id`), or one the group opens (`ord`, from 1). */
export interface GroupBatch extends Pick<BatchRow, JoinColumns> {
  id: number | null;
  ord: number;
  /** What the group adds to a batch that was open before it. */
  addedCount: number;
  addedBytes: number;
  sealedAt: number | null;
  /** The events the group put in it, for its content_hash when it seals. */
  content: ContentEvent[];
}

/** A batch open before the group, from its row as the dialect read it. */
export function storedBatch(row: Pick<BatchRow, "id" | JoinColumns>): GroupBatch {
  const { id, route, source, destination, key, first_at, last_at, quiet_s, max_s, max_events, max_bytes } = row;
  const fields = { id, route, source, destination, key, first_at, last_at, quiet_s, max_s, max_events, max_bytes };
  return {
    ...fields,
    count: row.count,
    bytes: row.bytes,
    ord: 0,
    addedCount: 0,
    addedBytes: 0,
    sealedAt: null,
    content: [],
  };
}

/** A (route, key) group as the join rule sees it: its open batch, and the latest first_at of its unfinished ones. */
export interface GroupState {
  open: GroupBatch | null;
  maxFirstAt: number;
}

export interface PlannedEvent {
  id: number;
  batch: GroupBatch;
  ev: NewEvent;
  route: string;
  at: number;
  size: number;
  once: boolean;
  trace: string | null;
}

export interface PlannedJournal {
  kind: "event" | "sealed";
  batch: GroupBatch;
  at: number;
  eventId: number | null;
  detail: string | null;
}

/** Everything the group writes, decided in memory. */
export interface GroupPlan {
  batches: GroupBatch[];
  opened: GroupBatch[];
  events: PlannedEvent[];
  journal: PlannedJournal[];
  results: EnqueueResult[][];
  readyAt: number;
  touched: Set<string>;
}

export const groupKey = (route: string, key: string) => `${route}\u0001${key}`;

/** A dedup id twice in one group: the second is a redelivery the one-by-one path decides. */
export function dedupTwice(jobs: readonly (readonly NewEvent[])[]): boolean {
  const seen = new Set<string>();
  for (const evs of jobs)
    for (const ev of evs) {
      if (ev.dedupId === null) continue;
      const k = `${ev.source}\u0001${ev.dedupId}`;
      if (seen.has(k)) return true;
      seen.add(k);
    }
  return false;
}

/** The join rule over the whole group, in memory: the same steps, in the same order, as placeCopy. */
export function planGroup(
  jobs: readonly (readonly NewEvent[])[],
  times: readonly number[],
  groups: Map<string, GroupState>,
  ids: number[],
): GroupPlan {
  const plan: GroupPlan = {
    batches: [],
    opened: [],
    events: [],
    journal: [],
    results: [],
    readyAt: Number.POSITIVE_INFINITY,
    touched: new Set(),
  };
  let next = 0;
  const touched = new Set<GroupBatch>();
  /** A batch open before the group joins plan.batches the first time the group changes it. */
  const touch = (b: GroupBatch) => {
    if (b.id === null || touched.has(b)) return;
    touched.add(b);
    plan.batches.push(b);
  };
  const seal = (b: GroupBatch, at: number) => {
    touch(b);
    b.sealedAt = at;
    plan.journal.push({ kind: "sealed", batch: b, at, eventId: null, detail: null });
  };
  for (const [i, evs] of jobs.entries()) {
    const at = times[i];
    const results: EnqueueResult[] = [];
    for (const ev of evs) {
      plan.touched.add(ev.source);
      const size = eventSize(ev, at);
      const once = rawIsPayload(ev);
      const headers = JSON.stringify(ev.headers);
      const placed: Placed[] = [];
      for (const copy of ev.copies) {
        const g = groups.get(groupKey(copy.route, ev.key)) as GroupState;
        if (g.open && sealsBeforeJoin(g.open, size)) {
          seal(g.open, at);
          g.open = null;
        }
        if (!g.open) {
          const w = copy.window;
          const first = Math.max(at, g.maxFirstAt);
          g.open = {
            id: null,
            ord: plan.opened.length + 1,
            route: copy.route,
            source: ev.source,
            destination: copy.destination,
            key: ev.key,
            first_at: first,
            last_at: first,
            ...w,
            count: 0,
            bytes: 0,
            addedCount: 0,
            addedBytes: 0,
            sealedAt: null,
            content: [],
          };
          g.maxFirstAt = first;
          plan.opened.push(g.open);
          plan.batches.push(g.open);
        }
        const b = g.open;
        touch(b);
        const id = ids[next++];
        const trace = copy.trace === undefined ? null : JSON.stringify(copy.trace);
        plan.events.push({ id, batch: b, ev, route: copy.route, at, size, once, trace });
        b.count++;
        b.bytes += size;
        b.addedCount++;
        b.addedBytes += size;
        b.last_at = Math.max(b.last_at, at);
        b.content.push({
          id,
          event_type: ev.eventType,
          received_at: at,
          dedup_id: ev.dedupId,
          payload: ev.payload,
          headers,
          version: ev.version ?? null,
        });
        plan.journal.push({
          kind: "event",
          batch: b,
          at,
          eventId: id,
          detail: JSON.stringify({ type: ev.eventType, route: copy.route }),
        });
        const sealed = sealsOnSize(b);
        if (sealed) {
          seal(b, at);
          g.open = null;
        }
        plan.readyAt = Math.min(plan.readyAt, readyAfterJoin(b, sealed, at));
        placed.push({
          eventId: id,
          batchId: 0,
          route: copy.route,
          destination: copy.destination,
          tee: copy.tee,
          sealed,
        });
      }
      results.push({ status: "queued", placed });
    }
    plan.results.push(results);
  }
  return plan;
}

/** The dedup rows of the group's events: each names its first copy's event. */
export function dedupColumns(plan: GroupPlan): [string[], string[], number[], number[]] {
  const cols: [string[], string[], number[], number[]] = [[], [], [], []];
  const firsts = new Set<NewEvent>();
  for (const e of plan.events) {
    if (e.ev.dedupId === null || firsts.has(e.ev)) continue;
    firsts.add(e.ev);
    cols[0].push(e.ev.source);
    cols[1].push(e.ev.dedupId);
    cols[2].push(e.id);
    cols[3].push(e.at);
  }
  return cols;
}
