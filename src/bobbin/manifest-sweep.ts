// A manifest's [sweep.api]: where an events-api sweep's list is and how its answer reads, each
// problem reported at its key (manifest.ts reads the rest of [sweep]).
import {
  DOTTED_PATH as SELECTOR,
  type EventsApiSection,
  HEADER_NAME,
  sectionFields,
  SWEEP_API_KEYS,
  type Table,
  tomlKey,
} from "./manifest-schema.ts";

/**
 * [sweep.api]: where an events-api sweep's list is and how its answer reads. Each problem is
 * reported at its key; the section is returned only when it has none.
 */
export function eventsApiSection(
  t: Table,
  err: (key: string, message: string, hint?: string) => void,
): EventsApiSection | undefined {
  const before = { n: 0 };
  const e = (key: string, message: string, hint?: string) => {
    before.n++;
    err(`sweep.api.${key}`, message, hint);
  };
  for (const k of Object.keys(t)) if (!SWEEP_API_KEYS.includes(k)) e(k, "unknown key");
  const { text, strings } = sectionFields(t, e);
  const path = (k: string, required: boolean, empty = false): string | undefined => {
    const v = text(k, required, empty);
    if (v !== undefined && v !== "" && !SELECTOR.test(v)) e(k, `"${v}" is not a dotted path (data.items.0.id)`);
    return v;
  };
  const positive = (k: string, required: boolean, def: number): number => {
    const v = t[k];
    if (v === undefined) {
      if (required) e(k, "required");
      return def;
    }
    if (typeof v !== "number" || !Number.isFinite(v) || v <= 0) {
      e(k, "expected a number above 0");
      return def;
    }
    return v;
  };

  const url = text("url", true);
  if (url !== undefined) {
    let u: URL | null = null;
    try {
      u = new URL(url);
    } catch {
      e("url", `"${url}" is not a URL`);
    }
    if (u && (u.protocol !== "https:" || u.search || u.hash || u.username))
      e("url", "expected an https base URL without a query, a fragment or credentials");
  }
  const p = text("path", true);
  if (p !== undefined && (!p.startsWith("/") || /[?#]/.test(p)))
    e("path", 'expected a path from the base URL ("/events"), without a query');
  const query = strings("query");
  const args = strings("args");
  for (const a of Object.keys(args)) {
    if (!/^[A-Za-z][A-Za-z0-9_.[\]-]{0,63}$/.test(a)) e(`args.${tomlKey(a)}`, "not a query parameter name");
    if (Object.hasOwn(query, a)) e(`args.${tomlKey(a)}`, "the query sets it already");
  }
  const auth = text("auth", true);
  if (auth !== undefined && auth !== "bearer" && auth !== "basic" && !/^header:[A-Za-z0-9-]+$/.test(auth))
    e("auth", `"${auth}" is not bearer, basic or header:<Name>`);
  const items = path("items", false, true) ?? "";
  const payload = path("payload", false, true) ?? "";
  const id = path("id", true);
  const headers = strings("headers");
  for (const [h, sel] of Object.entries(headers)) {
    if (!HEADER_NAME.test(h)) e(`headers.${tomlKey(h)}`, "not a header name");
    if (!SELECTOR.test(sel)) e(`headers.${tomlKey(h)}`, `"${sel}" is not a dotted path into the item`);
  }
  const sinceParam = text("since_param", false);
  const sinceFormat = text("since_format", false) ?? "rfc3339";
  if (sinceFormat !== "rfc3339" && sinceFormat !== "unix") e("since_format", "expected rfc3339 or unix");
  const time = path("time", false);
  if (sinceParam === undefined && time === undefined)
    e("since_param", "an events-api list needs since_param or time, or --since could not bound it");
  const next = path("next", false);
  const cursorParam = text("cursor_param", false);
  const cursorValue = text("cursor_value", false);
  if ((next === undefined) === (cursorParam === undefined))
    e("next", "exactly one of next (the next page's URL) and cursor_param (with cursor_value)");
  if ((cursorParam === undefined) !== (cursorValue === undefined))
    e("cursor_value", "cursor_param and cursor_value go together");
  if (cursorValue !== undefined && !SELECTOR.test(cursorValue.replace(/^last:/, "")))
    e("cursor_value", `"${cursorValue}" is not a dotted path, or last: and a path into the page's last item`);
  const more = text("more", false);
  if (more !== undefined && !SELECTOR.test(more.replace(/^!/, "")))
    e("more", `"${more}" is not a dotted path to a boolean, or ! and one that says the list is done`);
  const perS = positive("per_s", false, 1);
  const keepsS = positive("keeps_s", true, 86400);
  if (before.n > 0 || url === undefined || p === undefined || auth === undefined || id === undefined) return undefined;
  return {
    url,
    path: p,
    query,
    args,
    auth,
    items,
    payload,
    id,
    headers,
    ...(sinceParam !== undefined ? { since_param: sinceParam } : {}),
    since_format: sinceFormat as EventsApiSection["since_format"],
    ...(time !== undefined ? { time } : {}),
    ...(next !== undefined ? { next } : {}),
    ...(cursorParam !== undefined ? { cursor_param: cursorParam, cursor_value: cursorValue } : {}),
    ...(more !== undefined ? { more } : {}),
    per_s: perS,
    keeps_s: keepsS,
  };
}
