// A pull destination's consumers as the store keeps them: one meta row per (destination,
// consumer), its value the last time that consumer leased. Both dialects write and read these
// keys; the format lives here once.

/** A consumer of a pull destination, as status and the dashboard show it. */
export interface PullConsumer {
  destination: string;
  consumer: string;
  lastLeaseAt: number;
}

/** What a consumer's name may be: it is shown in status and kept in the lease's owner. */
export const CONSUMER_NAME = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$/;

/** meta keys of consumers start so (a LIKE prefix: no _ or % in it). */
export const CONSUMER_PREFIX = "consumer:";

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
