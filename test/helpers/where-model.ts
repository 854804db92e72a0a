// What `--where` means, written again without SQL, for the conformance cases to hold both
// backends to: a condition read against the payload as JavaScript parses it (a leading
// byte-order mark skipped), a path as getPath reads it.
import { getPath } from "../../src/plugin/get-path.ts";
import type { Candidate, PayloadCondition } from "../../src/store/where.ts";

/** Whether `value` equals one of `values`, as `=` and `in` compare. */
function equalsOne(value: unknown, values: readonly Candidate[]): boolean {
  return values.some((c) => {
    if (typeof value === "string") return value === c.text;
    if (typeof value === "number") return c.number !== null && Number(c.number) === value;
    if (typeof value === "boolean") return c.boolean === value;
    return false;
  });
}

/** Whether one condition holds for a parsed payload. */
export function holds(c: PayloadCondition, payload: unknown): boolean {
  const v = getPath(payload, c.path);
  const scalar = typeof v === "string" || typeof v === "number" || typeof v === "boolean";
  switch (c.op) {
    case "=":
    case "in":
      return equalsOne(v, c.values);
    case "!=":
      return scalar && !equalsOne(v, c.values);
    case "~":
      return typeof v === "string" && v.includes(c.values[0].text);
    case "exists":
      return v !== undefined && v !== null;
  }
}

/** Whether a stored payload's text matches every condition (text that does not parse matches none). */
export function matchesAll(conds: readonly PayloadCondition[], text: string): boolean {
  let payload: unknown;
  try {
    payload = JSON.parse(text.startsWith("\uFEFF") ? text.slice(1) : text);
  } catch {
    return false;
  }
  return conds.every((c) => holds(c, payload));
}
