// Selectors: where a template source finds a value (a header, a payload field, a constant), and
// the conditions written with them (`type=url_verification`).
import { getPath, getText } from "./get-path.ts";
import type { HookRequest } from "./types.ts";

const BARE_PATH = /^[A-Za-z0-9_$-]+(\.[A-Za-z0-9_$-]+)*$/;

/** A payload path as a template writes it (letters, digits, `_`, `$`, `-` between dots). */
export function isBarePath(p: string): boolean {
  return BARE_PATH.test(p);
}

/**
 * The alternatives of a selector: `a|b|c` is tried left to right, the first with a value wins
 * (a `const:` last is a default). `keyof:` takes its own `|` list, so it is one alternative.
 */
export function alternatives(sel: string): string[] {
  return sel.startsWith("keyof:") ? [sel] : sel.split("|");
}

export function selectorOk(sel: string, dedup: boolean): boolean {
  if (dedup && (sel === "body_sha256" || sel === "none")) return true;
  return alternatives(sel).every((alt) => {
    if (alt.startsWith("keyof:"))
      return alt
        .slice(6)
        .split("|")
        .every((p) => BARE_PATH.test(p));
    if (/^(header|field|const):(.+)$/.test(alt)) return true;
    return BARE_PATH.test(alt);
  });
}

/** One alternative's value, or null when it has none. */
function selectOne(sel: string, payload: unknown, req: HookRequest): string | null {
  if (sel.startsWith("header:")) return req.header(sel.slice(7));
  if (sel.startsWith("const:")) return sel.slice(6);
  // The name of the first of these payload fields that is present (Telegram's update kinds).
  if (sel.startsWith("keyof:"))
    return (
      sel
        .slice(6)
        .split("|")
        .find((p) => getPath(payload, p) != null) ?? null
    );
  return getText(payload, sel.startsWith("field:") ? sel.slice(6) : sel);
}

/** A selector's value for this request: its first alternative with a non-empty value, or null. */
export function select(sel: string, payload: unknown, req: HookRequest): string | null {
  for (const alt of alternatives(sel)) {
    const v = selectOne(alt, payload, req);
    if (v !== null && v !== "") return v;
  }
  return null;
}

/** A condition `<selector>=<value>`: the selector and the text its value must equal. */
export function parseWhen(when: string): { selector: string; value: string } | null {
  const eq = when.indexOf("=");
  if (eq <= 0) return null;
  const selector = when.slice(0, eq);
  return selectorOk(selector, false) ? { selector, value: when.slice(eq + 1) } : null;
}

/** Whether a (checked) condition holds for this payload and request. */
export function holds(when: string, payload: unknown, req: HookRequest): boolean {
  const w = parseWhen(when);
  return w !== null && select(w.selector, payload, req) === w.value;
}
