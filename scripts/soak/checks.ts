// The soak's promises, judged the same on both backends from what the receiver accepted, what the
// senders had acked and what the database holds at the end (read by sqlite.ts or pg.ts, the one
// file per backend that reads it): no acked event lost, each in exactly one batch; no batch
// delivered with two contents; order per key kept; no batch over its bounds; nothing stuck; and
// the leases a killed dispatcher held taken over.
import type { Delivery } from "../../test/helpers/receiver.ts";
import { MAX_EVENT_BYTES, SOURCES } from "./config.ts";
import type { Doc } from "./receiver.ts";

export interface BatchFact {
  id: number;
  source: string;
  state: string;
  count: number;
  bytes: number;
  last_error: string | null;
}

/** An attempt a killed dispatcher held when it died, as it ended. */
export interface HeldLease {
  attempt: number;
  finished: boolean;
  error: string | null;
}

export interface StoreFacts {
  batches: BatchFact[];
  /** The load's ids of the events in dead batches. */
  deadIds: Set<string>;
  /** The load's ids of every event stored, in any batch. */
  storedIds: Set<string>;
  /** Attempts ended 'lease expired': leases taken over from a dispatcher that was gone. */
  leasesRecovered: number;
  held: HeldLease[];
  /** What the database's own check found wrong (none: empty). */
  integrity: string[];
}

/** One backend's reads for the soak. */
export interface SoakStore {
  /** Batches not yet delivered, dead or dropped: the backlog. */
  unfinished(): Promise<number>;
  /** Whether dispatcher `pid` has written its first heartbeat: from then on it delivers. */
  beating(pid: number): Promise<boolean>;
  /** The attempts whose leases dispatcher `pid` holds: read once it is dead, what it died holding. */
  leasesOf(pid: number): Promise<number[]>;
  facts(heldAttempts: readonly number[]): Promise<StoreFacts>;
  /** The oldest unfinished batches, each with its journal rows and attempts: what a stall looks like. */
  stuckSample(): Promise<string[]>;
  close(): Promise<void>;
}

export interface Verdict {
  failures: string[];
  lost: number;
  /** Acked events stored, in batches neither delivered nor dead at the end. */
  undelivered: number;
  twoContents: number;
  orderBreaks: number;
  leasesHeld: number;
  leasesRecovered: number;
}

const FINISHED = ["delivered", "dead", "dropped"];

export function judge(acked: ReadonlySet<string>, got: readonly Delivery<Doc>[], f: StoreFacts): Verdict {
  const failures: string[] = [];
  // Each acked event delivered (or dead, with its batch) in exactly one batch.
  const batchOf = new Map<string, number>();
  for (const { doc } of got)
    for (const e of doc.events) {
      const other = batchOf.get(e.id);
      if (other !== undefined && other !== doc.batch_id)
        failures.push(`event ${e.id} was delivered in batches ${other} and ${doc.batch_id}`);
      batchOf.set(e.id, doc.batch_id);
    }
  for (const id of f.deadIds)
    if (batchOf.has(id)) failures.push(`event ${id} is in a dead batch and was delivered in ${batchOf.get(id)}`);
  // An acked event not stored at all is lost; one stored in a batch still unfinished is stuck.
  let lost = 0;
  let undelivered = 0;
  for (const id of acked)
    if (!batchOf.has(id) && !f.deadIds.has(id)) {
      if (f.storedIds.has(id)) undelivered++;
      else {
        lost++;
        failures.push(`event ${id} was acked but is not in the spool`);
      }
    }
  const unfinished = f.batches.filter((b) => !FINISHED.includes(b.state));
  if (unfinished.length > 0) {
    const states = new Map<string, number>();
    for (const b of unfinished) states.set(b.state, (states.get(b.state) ?? 0) + 1);
    const counts = [...states].map(([k, n]) => `${n} ${k}`).join(", ");
    const oldest = unfinished
      .slice(0, 5)
      .map((b) => `${b.id} ${b.state}`)
      .join(", ");
    failures.push(
      `${unfinished.length} batch(es) neither delivered nor dead (${counts}), holding ${undelivered} acked ` +
        `event(s); the oldest: ${oldest}`,
    );
  }
  const hashes = new Map<number, Set<string>>();
  for (const { doc } of got) hashes.set(doc.batch_id, (hashes.get(doc.batch_id) ?? new Set()).add(doc.content_hash));
  let twoContents = 0;
  for (const [b, h] of hashes)
    if (h.size > 1) {
      twoContents++;
      failures.push(`batch ${b} was delivered with ${h.size} different content_hashes`);
    }
  const breaks = orderBreaks(got);
  failures.push(...breaks);
  for (const b of f.batches) {
    const w = SOURCES[b.source as keyof typeof SOURCES];
    if (!w) continue;
    if (b.count > w.maxEvents) failures.push(`batch ${b.id} has ${b.count} events, over max_events ${w.maxEvents}`);
    if (b.bytes > w.maxBytes + MAX_EVENT_BYTES)
      failures.push(`batch ${b.id} has ${b.bytes} bytes, over max_bytes ${w.maxBytes} plus one event`);
    if (b.state === "dead" && !b.last_error) failures.push(`batch ${b.id} is dead without a reason`);
  }
  failures.push(...f.integrity);
  // A lease a dispatcher died holding is taken over once it expires ('lease expired'); one whose
  // own last transaction was already on its way to the server when it died may have ended there.
  for (const h of f.held)
    if (!h.finished) failures.push(`attempt ${h.attempt}, leased by a killed dispatcher, never ended`);
  if (f.held.length > 0 && !f.held.some((h) => h.error === "lease expired"))
    failures.push(`killed dispatchers held ${f.held.length} lease(s) and none was taken over`);
  return {
    failures,
    lost,
    undelivered,
    twoContents,
    orderBreaks: breaks.length,
    leasesHeld: f.held.length,
    leasesRecovered: f.leasesRecovered,
  };
}

/**
 * Per route and key, in the order the receiver first accepted each batch: batches in id order,
 * events in commit order (event_meta's row ids), and never two batches in flight at once,
 * whichever intake took the events and whichever dispatcher delivered. A batch delivered again
 * (its dispatcher killed before it could record the answer) keeps the place of its first delivery.
 */
export function orderBreaks(got: readonly Delivery<Doc>[]): string[] {
  const out: string[] = [];
  const keys = new Map<string, Delivery<Doc>[]>();
  for (const r of got) {
    const k = `${r.doc.route}/${r.doc.key}`;
    keys.set(k, [...(keys.get(k) ?? []), r]);
  }
  for (const [key, all] of keys) {
    const seen = new Set<number>();
    const list = [...all]
      .sort((a, b) => a.startMs - b.startMs)
      .filter((r) => !seen.has(r.doc.batch_id) && seen.add(r.doc.batch_id));
    let lastRow = 0;
    for (let i = 0; i < list.length; i++) {
      const cur = list[i].doc;
      const prev = i > 0 ? list[i - 1] : null;
      if (prev && cur.batch_id < prev.doc.batch_id)
        out.push(`key ${key}: batch ${cur.batch_id} delivered after the newer ${prev.doc.batch_id}`);
      if (prev && list[i].startMs < prev.endMs)
        out.push(`key ${key}: batch ${cur.batch_id} in flight with ${prev.doc.batch_id}`);
      for (const m of cur.event_meta) {
        if (m.id <= lastRow) out.push(`key ${key}: batch ${cur.batch_id} has event row ${m.id} after row ${lastRow}`);
        lastRow = Math.max(lastRow, m.id);
      }
    }
  }
  return out;
}
