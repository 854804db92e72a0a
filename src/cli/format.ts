// Human output, for verbs run without --json: aligned tables, ages in human units, timestamps.

/** An age in the largest sensible unit: 4s, 12m, 3h, 2d. */
export function humanAge(seconds: number | null | undefined): string {
  if (seconds === null || seconds === undefined || !Number.isFinite(seconds)) return "-";
  const s = Math.max(0, seconds);
  if (s < 90) return `${Math.round(s)}s`;
  if (s < 90 * 60) return `${Math.round(s / 60)}m`;
  if (s < 36 * 3600) return `${Math.round(s / 3600)}h`;
  return `${Math.round(s / 86400)}d`;
}

/** A stored timestamp as UTC ISO 8601 without fractions. */
export function isoTime(t: number | null | undefined): string {
  if (t === null || t === undefined) return "-";
  return new Date(t * 1000).toISOString().replace(/\.\d{3}Z$/, "Z");
}

export function humanBytes(n: number | null | undefined): string {
  if (n === null || n === undefined || !Number.isFinite(n)) return "-";
  if (n < 1024) return `${n} B`;
  const units = ["KiB", "MiB", "GiB", "TiB"];
  let v = n / 1024;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${v.toFixed(v < 10 ? 1 : 0)} ${units[i]}`;
}

/** C0 controls, DEL and C1 controls: the characters a terminal may act on instead of showing. */
const CONTROL = /[\u0000-\u001f\u007f-\u009f\\]/g;
const NAMED: Record<string, string> = { "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t" };

/**
 * Text from the spool or a sender (a key, an event type, an error) made safe for a terminal:
 * every control character is shown as an escape (ESC as \x1b, newline as \n) so it can neither
 * recolour nor rewrite the screen, and a backslash is doubled so the escapes are unambiguous.
 */
export function visible(text: string): string {
  return text.replace(CONTROL, (c) => NAMED[c] ?? `\\x${c.charCodeAt(0).toString(16).padStart(2, "0")}`);
}

/** Rows as an aligned table under a header; the last column is never padded. Every cell is visible(). */
export function table(header: string[], rows: (string | number | null | undefined)[][]): string {
  const cells = [header, ...rows.map((r) => r.map((c) => (c === null || c === undefined ? "-" : visible(String(c)))))];
  const widths = header.map((_, i) => Math.max(...cells.map((r) => (r[i] ?? "").length)));
  return cells
    .map((r) =>
      r
        .map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i])))
        .join("  ")
        .trimEnd(),
    )
    .join("\n");
}
