// Reading a script's stdout for emit lines. A line that opens as {"enqueue" is an emit and must
// be valid UTF-8 and JSON, or the attempt fails as bad emit; every other line is the script's
// own output and is ignored. Field rules (source, key, ...) are the intake's, applied by the
// dispatcher when it enqueues.
import type { EmitRequest } from "../delivery.ts";

// Any spacing, and double, single or no quotes around the name: a script that meant to emit
// and got the syntax wrong must fail loudly rather than have its emit silently ignored.
const EMIT_OPENER = /^\s*\{\s*(?:"enqueue"|'enqueue'|enqueue(?=[\s:}]|$))/;

const fatal = new TextDecoder("utf-8", { fatal: true });
const lossy = new TextDecoder("utf-8");

export interface ParsedEmits {
  emits: EmitRequest[];
  /** Why the first bad emit line is bad ("line 3: invalid JSON"); never the line itself. */
  bad: string | null;
}

/** Split stdout into lines (LF, with an optional CR) and read every emit line. */
export function parseEmits(stdout: Uint8Array): ParsedEmits {
  const emits: EmitRequest[] = [];
  let start = 0;
  let n = 0;
  while (start < stdout.length) {
    let end = stdout.indexOf(0x0a, start);
    if (end < 0) end = stdout.length;
    n += 1;
    let line = stdout.subarray(start, end);
    start = end + 1;
    if (line.length && line[line.length - 1] === 0x0d) line = line.subarray(0, -1);
    if (!EMIT_OPENER.test(lossy.decode(line))) continue;
    let text: string;
    try {
      text = fatal.decode(line);
    } catch {
      return { emits, bad: `line ${n}: invalid UTF-8` };
    }
    let v: unknown;
    try {
      v = JSON.parse(text);
    } catch {
      return { emits, bad: `line ${n}: invalid JSON` };
    }
    const enqueue =
      v !== null && typeof v === "object" && !Array.isArray(v) ? (v as { enqueue?: unknown }).enqueue : undefined;
    if (enqueue === null || typeof enqueue !== "object" || Array.isArray(enqueue))
      return { emits, bad: `line ${n}: enqueue is not an object` };
    emits.push(enqueue as EmitRequest);
  }
  return { emits, bad: null };
}
