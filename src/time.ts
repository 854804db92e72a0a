// Times on the command line: Unix seconds, ISO 8601, or an age ("30m", "24h", "7d") before now.
import { HookspoolError } from "./errors.ts";

const UNITS: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86400, w: 604800 };

/** Parse --since T into Unix seconds. */
export function parseSince(value: string, now: number, flag = "--since"): number {
  const v = value.trim();
  const age = /^(\d+(?:\.\d+)?)([smhdw])$/.exec(v);
  if (age) return now - Number(age[1]) * UNITS[age[2]];
  if (/^\d+(\.\d+)?$/.test(v)) return Number(v);
  if (/^\d{4}-\d{2}-\d{2}/.test(v)) {
    const t = Date.parse(v);
    if (Number.isFinite(t)) return t / 1000;
  }
  throw new HookspoolError(
    "E_USAGE",
    `${flag} ${value}: expected Unix seconds, an ISO date, or an age like 30m, 24h, 7d`,
  );
}

/** Parse a duration ("90s", "10m", "1h", "2d", or plain seconds) into seconds; over 0. */
export function parseDuration(value: string, flag: string): number {
  const v = value.trim();
  const m = /^(\d+(?:\.\d+)?)([smhdw]?)$/.exec(v);
  const seconds = m ? Number(m[1]) * (m[2] ? UNITS[m[2]] : 1) : Number.NaN;
  if (!(seconds > 0))
    throw new HookspoolError("E_USAGE", `${flag} ${value}: expected a duration such as 90s, 10m or 1h`);
  return seconds;
}
