// A destination's rate: at most `limit` requests in any rolling window of `windowS` seconds,
// the rule an agent gateway applies to what it accepts (Hermes: 30 per route per minute). The
// window is counted over the destination's attempts, in flight or finished within the window,
// each holding the requests it made (its hits); the dispatcher, each backend's claim and the
// status document all apply the rule written here.

export interface Rate {
  limit: number;
  windowS: number;
}

/** One attempt's share of the window: its hits, and when it ended (null: still in flight). */
export interface WindowHit {
  hits: number;
  finishedAt: number | null;
}

/**
 * A slot comes free this long after the window has passed the attempt's end. The receiver
 * counted the request before it answered, so our end is never before its count; the margin
 * covers a receiver whose clock runs a little ahead of the spool's.
 */
export function rateMarginS(rate: Rate): number {
  return Math.min(1, rate.windowS * 0.02);
}

export interface WindowState {
  /** Hits in the window now (in flight included). */
  used: number;
  /** Hits that may start now. */
  room: number;
  /**
   * When the next attempt may start, if it does not fit now: the instant enough finished hits
   * have left the window (null while it fits; Infinity when in-flight attempts fill it, whose
   * ends will say).
   */
  nextFreeAt: number | null;
}

/**
 * The window at `now` from the hits that may still be in it (older ones are ignored); `need`: the hits the next attempt
 * takes.
 */
export function windowState(rate: Rate, hits: readonly WindowHit[], now: number, need = 1): WindowState {
  const span = rate.windowS + rateMarginS(rate);
  const inWindow = hits.filter((h) => h.hits > 0 && (h.finishedAt === null || h.finishedAt > now - span));
  const used = inWindow.reduce((n, h) => n + h.hits, 0);
  const room = Math.max(0, rate.limit - used);
  if (room >= need) return { used, room, nextFreeAt: null };
  // Finished hits leave the window oldest first; the next attempt may start once `need` fit.
  const finished = inWindow
    .filter((h) => h.finishedAt !== null)
    .sort((a, b) => (a.finishedAt as number) - (b.finishedAt as number));
  let left = used;
  for (const h of finished) {
    left -= h.hits;
    if (rate.limit - left >= need) return { used, room, nextFreeAt: (h.finishedAt as number) + span };
  }
  return { used, room, nextFreeAt: Number.POSITIVE_INFINITY };
}

/**
 * The hits one attempt reserves when it is claimed: one request for a document (or a script
 * run), one per event with unwrap, never more than the limit, so a batch larger than the window
 * still goes (when the window is empty) rather than never.
 */
export function hitsNeeded(rate: Rate, unwrap: boolean, events: number): number {
  return unwrap ? Math.max(1, Math.min(events, rate.limit)) : 1;
}

/**
 * The hits an attempt made, from how it ended: every request sent except one answered 429 (the
 * receiver did not count it). `sent` is an unwrap attempt's count of requests (null for a
 * document); `status` the answer of its last (or only) request.
 */
export function hitsMade(status: number | null, sent: number | null, ok: boolean): number {
  const throttled = !ok && status === 429 ? 1 : 0;
  return Math.max(0, (sent ?? 1) - throttled);
}

const UNITS: Record<string, number> = {
  s: 1,
  sec: 1,
  second: 1,
  seconds: 1,
  m: 60,
  min: 60,
  minute: 60,
  minutes: 60,
  h: 3600,
  hour: 3600,
  hours: 3600,
};

/**
 * A rate as config writes it: "N/<window>", the window a unit (s, min, h) with an optional
 * count before it: "30/min", "5/s", "1000/h", "30/10s". "none" is no rate (null). Throws an
 * Error with a one-line reason for anything else.
 */
export function parseRate(text: string): Rate | null {
  const t = text.trim().toLowerCase();
  if (t === "none" || t === "off") return null;
  const m = /^(\d+)\s*(?:\/|per)\s*(\d+(?:\.\d+)?)?\s*([a-z]+)$/.exec(t);
  if (!m)
    throw new Error(
      `"${text}" is not a rate: write N/<window>, e.g. "30/min", "5/s", "1000/h" or "30/10s" ("none" for no pacing)`,
    );
  const unit = UNITS[m[3]];
  if (unit === undefined) throw new Error(`"${text}": the window's unit is s, min or h`);
  const limit = Number(m[1]);
  const windowS = (m[2] === undefined ? 1 : Number(m[2])) * unit;
  if (!Number.isSafeInteger(limit) || limit < 1)
    throw new Error(`"${text}": the count must be a whole number of at least 1`);
  if (!(windowS > 0) || windowS > 86400)
    throw new Error(`"${text}": the window must be more than 0 s and at most a day`);
  return { limit, windowS };
}

/** A rate in words: "30 per 60 s". */
export function describeRate(r: Rate): string {
  return `${r.limit} per ${r.windowS} s`;
}
