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
  throw new HookspoolError("E_USAGE", `${flag} ${value}: expected Unix seconds, an ISO date, or an age like 30m, 24h, 7d`);
}
