// A health probe's last answer as the store keeps it: one meta row per instance, its value the
// JSON of what the provider said, when, and when maintenance asks next. Both dialects write and
// read these keys; the format lives here once.

/** What the last probe of an instance found. */
export interface ProbeRecord {
  instance: string;
  /** When it asked (Unix seconds). */
  at: number;
  /** When maintenance asks next. */
  next_at: number;
  /** true: healthy; false: the provider says it no longer sends to us; null: the probe failed (error). */
  healthy: boolean | null;
  /** What the provider said (the section's says, a 404), in a line. */
  says: string;
  /** Why the probe could not tell (a refused token, a rate limit, the network). */
  error: string | null;
  /** Where a person sees the subscription. */
  console: string | null;
}

/** meta keys of probes start so (a LIKE prefix: no _ or % in it). */
export const PROBE_PREFIX = "probe:";

export const probeKey = (instance: string): string => `${PROBE_PREFIX}${instance}`;

/** The value a record is kept as. */
export const probeValue = (r: ProbeRecord): string =>
  JSON.stringify({
    at: r.at,
    next_at: r.next_at,
    healthy: r.healthy,
    says: r.says,
    error: r.error,
    console: r.console,
  });

/** The record a meta row holds, or null for a row that is not one (or a value that does not read). */
export function probeOf(key: string, value: string | null): ProbeRecord | null {
  if (!key.startsWith(PROBE_PREFIX) || value === null) return null;
  try {
    const v = JSON.parse(value) as Partial<ProbeRecord>;
    if (typeof v.at !== "number" || typeof v.next_at !== "number") return null;
    return {
      instance: key.slice(PROBE_PREFIX.length),
      at: v.at,
      next_at: v.next_at,
      healthy: typeof v.healthy === "boolean" ? v.healthy : null,
      says: typeof v.says === "string" ? v.says : "",
      error: typeof v.error === "string" ? v.error : null,
      console: typeof v.console === "string" ? v.console : null,
    };
  } catch {
    return null;
  }
}

/** The records among meta rows, by instance. */
export function probesOf(rows: readonly { key: string; value: string | null }[]): ProbeRecord[] {
  return rows
    .map((r) => probeOf(r.key, r.value))
    .filter((p): p is ProbeRecord => p !== null)
    .sort((a, b) => a.instance.localeCompare(b.instance));
}
