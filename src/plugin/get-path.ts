// Dotted paths into a JSON payload: "repository.full_name", "items.0.id".

/** The value at `path`, or undefined when any step is missing. */
export function getPath(value: unknown, path: string): unknown {
  let cur: unknown = value;
  for (const part of path.split(".")) {
    if (cur === null || typeof cur !== "object") return undefined;
    if (Array.isArray(cur)) {
      if (!/^\d+$/.test(part)) return undefined;
      cur = cur[Number(part)];
    } else {
      if (!Object.hasOwn(cur, part)) return undefined;
      cur = (cur as Record<string, unknown>)[part];
    }
  }
  return cur;
}

/** A scalar at `path` as text, or null when it is missing or not a scalar. */
export function getText(value: unknown, path: string): string | null {
  const v = getPath(value, path);
  if (typeof v === "string") return v;
  if (typeof v === "number" || typeof v === "boolean") return String(v);
  return null;
}

/**
 * A stored payload's path as `--where` and a bobbin's `indexed` list take it: a selector's bare
 * path (keys of letters, digits, `_`, `$` and `-` joined by dots; a key of digits alone is an
 * array's index, or the key itself in an object, as getPath reads it), bounded as an expose
 * list's entries are, with at most `indexes` keys of digits (SQLite reads each both ways, so
 * every one doubles the expression) and no key like -1 (PostgreSQL would read an array from its
 * end there).
 */
export const PAYLOAD_PATH_LIMITS = { chars: 256, keys: 32, indexes: 4, indexDigits: 9 } as const;

/** Why `path` is not a payload path, in a few words, or null when it is one. */
export function payloadPathProblem(path: string): string | null {
  const l = PAYLOAD_PATH_LIMITS;
  if (path === "") return "an empty path";
  if (path.length > l.chars) return `a path is at most ${l.chars} characters`;
  if (!/^[A-Za-z0-9_$-]+(\.[A-Za-z0-9_$-]+)*$/.test(path))
    return "a path is keys of letters, digits, _, $ and - joined by single dots";
  const keys = path.split(".");
  if (keys.length > l.keys) return `a path is at most ${l.keys} keys deep`;
  const indexes = keys.filter((k) => /^\d+$/.test(k));
  if (indexes.length > l.indexes) return `a path has at most ${l.indexes} array indexes`;
  if (indexes.some((k) => k.length > l.indexDigits)) return `an array index has at most ${l.indexDigits} digits`;
  if (keys.some((k) => /^-\d+$/.test(k))) return "a key may not be a negative number";
  return null;
}
