// An event's version: the provider's own clock or counter for it (Stripe's `created`,
// Shopify's X-Shopify-Triggered-At, Paddle's `occurred_at`), as one number. A route that sets
// `stale` compares it with the last version delivered for its (route, key); a batch delivers its
// events in its order. Numbers and numeric text are taken as they are (epoch seconds, epoch
// milliseconds or a counter: one source's versions share their unit), an RFC 3339 or ISO 8601
// time becomes epoch seconds with its fraction (an ISO time without a zone is read as UTC: one
// source writes all its times alike); anything else is no version (never stale, ordered by arrival).

/**
 * RFC 3339, and the ISO 8601 forms senders also write: a date, T (or t or a space), a time with an
 * optional fraction, then Z, an offset (+hh:mm, +hhmm or +hh) or nothing (UTC).
 */
const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})([.,]\d+)?([Zz]|[+-]\d{2}(?::?\d{2})?)?$/;
/** A plain decimal number: an optional sign, digits, an optional fraction and exponent. */
const DECIMAL = /^-?\d+(\.\d+)?([eE][-+]?\d+)?$/;

/** Epoch seconds of an RFC 3339 time (its fraction kept, to what a double holds), or null. */
export function rfc3339Seconds(text: string): number | null {
  const m = RFC3339.exec(text);
  if (!m) return null;
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number);
  if (month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || second > 60) return null;
  const ms = Date.UTC(year, month - 1, day, hour, minute, second);
  // Date.UTC rolls 31 February over into March: a day the month does not have is no time.
  if (new Date(ms).getUTCDate() !== day && second !== 60) return null;
  let offsetS = 0;
  const zone = m[8];
  if (zone !== undefined && zone !== "Z" && zone !== "z") {
    const sign = zone[0] === "-" ? -1 : 1;
    const minutes = zone.replace(":", "").slice(3, 5);
    offsetS = sign * (Number(zone.slice(1, 3)) * 3600 + Number(minutes || "0") * 60);
  }
  const fraction = m[7] ? Number(`0.${m[7].slice(1)}`) : 0;
  return ms / 1000 - offsetS + fraction;
}

/**
 * A version as the spool stores it (events.version): a finite number from a number, from
 * numeric text, or from an RFC 3339 time (epoch seconds); null for anything else.
 */
export function versionNumber(raw: unknown): number | null {
  if (typeof raw === "number") return Number.isFinite(raw) ? raw : null;
  if (typeof raw !== "string") return null;
  const text = raw.trim();
  if (text === "") return null;
  if (DECIMAL.test(text)) {
    const n = Number(text);
    return Number.isFinite(n) ? n : null;
  }
  return rfc3339Seconds(text);
}
