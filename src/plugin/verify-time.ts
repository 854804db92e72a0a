// Timestamps a sender signs beside its body: Unix seconds or milliseconds, or an RFC 3339
// date-time, judged within a tolerance either side of now (a request dated ahead fails too).
// Part of the plugin API through verify.ts; nothing here compares a secret.
import type { VerifyFailure } from "./verify-codec.ts";

/**
 * abs(now - t) <= toleranceS: future-dated requests fail too. t is unix seconds (a decimal
 * string or a number); a value above 1e12 is taken as milliseconds. Anything else is false.
 */
export function timestampFresh(ts: string | number | null, now: number, toleranceS = 300): boolean {
  return timestampWhy(ts, now, toleranceS) === null;
}

/**
 * An RFC 3339 date-time (`2020-01-01T00:00:00-08:00`, `2021-03-25T05:09:27Z`, fractions allowed;
 * `T` and `Z` in either case) as Unix seconds, or null when the text is not one or names no real
 * instant (month 13, February 30). A time without an offset is not an instant, and is refused.
 */
export function rfc3339Seconds(text: string): number | null {
  const m = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})$/.exec(text);
  if (!m) return null;
  const [, y, mo, d, h, mi, s, frac, zone] = m as unknown as string[];
  const utc = Date.UTC(Number(y), Number(mo) - 1, Number(d), Number(h), Number(mi), Number(s));
  const back = new Date(utc);
  // Date.UTC rolls an out-of-range field over into the next; a real date-time reads back the same.
  if (
    back.getUTCFullYear() !== Number(y) ||
    back.getUTCMonth() !== Number(mo) - 1 ||
    back.getUTCDate() !== Number(d) ||
    back.getUTCHours() !== Number(h) ||
    back.getUTCMinutes() !== Number(mi) ||
    back.getUTCSeconds() !== Number(s)
  )
    return null;
  let offset = 0;
  if (zone !== "Z" && zone !== "z") {
    const oh = Number(zone.slice(1, 3));
    const om = Number(zone.slice(4, 6));
    if (oh > 23 || om > 59) return null;
    offset = (zone[0] === "-" ? -1 : 1) * (oh * 3600 + om * 60);
  }
  return utc / 1000 + (frac ? Number(`0${frac}`) : 0) - offset;
}

/**
 * timestampFresh, saying why not: absent, unreadable, too old (stale) or ahead (future). With
 * `rfc3339`, a string may also be an RFC 3339 date-time (a sender that writes its timestamp
 * header so: Box, Zendesk); without it only Unix seconds or milliseconds are read.
 */
export function timestampWhy(
  ts: string | number | null,
  now: number,
  toleranceS = 300,
  opts: { rfc3339?: boolean } = {},
): VerifyFailure | null {
  let t: number;
  if (ts === null) return "missing_signature";
  if (typeof ts === "number") t = ts;
  else if (typeof ts === "string" && /^\d{1,16}(?:\.\d{1,9})?$/.test(ts.trim())) t = Number(ts.trim());
  else if (typeof ts === "string" && opts.rfc3339 && ts.length <= 64) {
    const at = rfc3339Seconds(ts.trim());
    if (at === null) return "malformed";
    // An instant in the date-time form is never read as milliseconds.
    if (now - at > toleranceS) return "stale";
    if (at - now > toleranceS) return "future";
    return null;
  } else return "malformed";
  if (!Number.isFinite(t) || t < 0) return "malformed";
  if (t > 1e12) t /= 1000;
  if (now - t > toleranceS) return "stale";
  if (t - now > toleranceS) return "future";
  return null;
}
