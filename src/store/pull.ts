// A pull destination's consumers as the store keeps them: one meta row per (destination,
// consumer), its value the last time that consumer leased. Both dialects write and read these
// keys; the format lives here once. And a pull lease's owner as any reader but the pull API
// sees it: "pull:<consumer>/<nonce>:0:<attempt id>" holds the nonce, the secret half of the
// consumer's lease id, so the operator's and the dashboard's reads give it as "*".
import type { BatchRow } from "./batches.ts";
import type { DashboardStore, OperatorStore } from "./api.ts";

/** A consumer of a pull destination, as status and the dashboard show it. */
export interface PullConsumer {
  destination: string;
  consumer: string;
  lastLeaseAt: number;
}

/** How many of a pull destination's batches one consumer holds leased now. */
export interface PullLeased {
  destination: string;
  consumer: string;
  n: number;
}

/** Batches one lease request may ask for at most; a larger `max` is refused (400). */
export const PULL_MAX_LEASE = 100;
/** How long one lease request may wait for a batch, at most (a longer `wait` is refused). */
export const PULL_MAX_WAIT_S = 60;

/** What a consumer's name may be: it is shown in status and kept in the lease's owner. */
export const CONSUMER_NAME = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$/;

/** meta keys of consumers start so (a LIKE prefix: no _ or % in it). */
export const CONSUMER_PREFIX = "consumer:";

/** A pull lease's owner starts so (a LIKE prefix too); the consumer's name runs to the first "/". */
export const PULL_OWNER_PREFIX = "pull:";

export const consumerKey = (destination: string, consumer: string): string =>
  `${CONSUMER_PREFIX}${consumer}@${destination}`;

/** The consumer a meta row names, or null for a row that is not one (a consumer name has no @). */
export function consumerOf(key: string, value: string | null): PullConsumer | null {
  if (!key.startsWith(CONSUMER_PREFIX)) return null;
  const rest = key.slice(CONSUMER_PREFIX.length);
  const at = rest.indexOf("@");
  const lastLeaseAt = Number(value);
  if (at <= 0 || !Number.isFinite(lastLeaseAt)) return null;
  return { consumer: rest.slice(0, at), destination: rest.slice(at + 1), lastLeaseAt };
}

/** The consumers among meta rows, by destination then name. */
export function consumersOf(rows: readonly { key: string; value: string | null }[]): PullConsumer[] {
  const order = (a: PullConsumer, b: PullConsumer) =>
    a.destination.localeCompare(b.destination) || a.consumer.localeCompare(b.consumer);
  return rows
    .map((r) => consumerOf(r.key, r.value))
    .filter((c): c is PullConsumer => c !== null)
    .sort(order);
}

const OWNER = /^pull:([A-Za-z0-9_][A-Za-z0-9_.-]{0,63})\/[^:]*((?::[0-9]+){2})$/;

/** The consumer holding a lease, from its owner (the stored one or as shown), or null when a pull consumer does not. */
export function leaseConsumer(owner: string | null): string | null {
  const m = owner === null ? null : /^pull:([A-Za-z0-9_][A-Za-z0-9_.-]{0,63})\//.exec(owner);
  return m ? m[1] : null;
}

/** A lease owner as shown: a pull lease's nonce as "*" (one of another shape: "pull:*"); any other as it is. */
export function shownOwner(owner: string | null): string | null {
  if (owner === null || !owner.startsWith(PULL_OWNER_PREFIX)) return owner;
  const m = OWNER.exec(owner);
  return m ? `pull:${m[1]}/*${m[2]}` : "pull:*";
}

const shownBatch = (b: BatchRow): BatchRow =>
  b.lease_owner?.startsWith(PULL_OWNER_PREFIX) ? { ...b, lease_owner: shownOwner(b.lease_owner) } : b;
const shownOrNull = (b: BatchRow | null): BatchRow | null => (b === null ? null : shownBatch(b));

/** The operator's role with every batch it reads back shown so (list, show, export). */
export function operatorShown(s: OperatorStore): OperatorStore {
  const exportBatches = s.exportBatches;
  return {
    ...s,
    getBatch: async (id) => shownOrNull(await s.getBatch(id)),
    listBatches: async (f) => (await s.listBatches(f)).map(shownBatch),
    exportBatches: (filter) =>
      (async function* () {
        for await (const r of exportBatches(filter)) yield { ...r, batch: shownBatch(r.batch) };
      })(),
  };
}

/** The dashboard's role with every batch it reads back shown so. */
export function dashboardShown(s: DashboardStore): DashboardStore {
  return {
    ...s,
    getBatch: async (id) => shownOrNull(await s.getBatch(id)),
    listBatches: async (f) => (await s.listBatches(f)).map(shownBatch),
  };
}
