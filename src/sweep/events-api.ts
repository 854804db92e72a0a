// An events-api sweep's list: the provider's recent events (or deliveries), read page by page as
// its manifest's [sweep.api] says, newest first, back to --since. Every request is paced; a 429
// stops the listing (what was read is kept, and the sweep exits 1). The key goes only into the
// header the manifest names, and only to the API's own origin: a next-page URL on another host is
// refused, and no error or line quotes a URL's query, a header or a body.
import type { EventsApiSection } from "../bobbin/manifest.ts";
import { HookspoolError } from "../errors.ts";
import { authHeader, rateLimitText } from "../net/api.ts";
import { type Http, tryJson } from "../net/http.ts";
import type { Pacer } from "../net/pace.ts";
import { getPath, getText } from "../plugin/get-path.ts";
import type { ListedEvent } from "./land.ts";

export { authHeader, rateLimitText };

export interface ListOptions {
  http: Http;
  /** The API's base URL (the manifest's, or --api-url). */
  apiUrl: string;
  spec: EventsApiSection;
  /** The operator's --param values, one for each of the spec's args. */
  args: Record<string, string>;
  key: string;
  /** Unix seconds: the window's start. */
  since: number;
  /** The provider as its messages name it ("Paddle"). */
  vendor: string;
  /** What the key is, for the hint when the provider refuses it. */
  keyHint: string;
  now: () => number;
  pacer?: Pacer;
  /** At most this many pages (a runaway guard). */
  maxPages?: number;
}

export interface ListReport {
  events: ListedEvent[];
  pages: number;
  /** Why the listing stopped before the end (a rate limit), if it did. */
  stopped: string | null;
}

/** A time an item carries, as Unix seconds: a number of seconds, or an RFC 3339 text. */
function secondsOf(v: unknown): number | null {
  if (typeof v === "number" && Number.isFinite(v)) return v;
  if (typeof v === "string") {
    const t = /^\d+(\.\d+)?$/.test(v) ? Number(v) * 1000 : Date.parse(v);
    if (Number.isFinite(t)) return t / 1000;
  }
  return null;
}

const at = (path: string) => (v: unknown) => (path === "" ? v : getPath(v, path));

/** A rate-limit answer: the sweep stops, keeps what it read, and exits 1. */
export class RateLimited extends Error {}

export async function listEventsApi(o: ListOptions): Promise<ListReport> {
  const { spec } = o;
  const base = new URL(o.apiUrl.replace(/\/+$/, "") + spec.path);
  for (const [k, v] of Object.entries(spec.query)) base.searchParams.set(k, v);
  for (const [k, v] of Object.entries(o.args)) base.searchParams.set(k, v);
  if (spec.since_param)
    base.searchParams.set(
      spec.since_param,
      spec.since_format === "unix" ? String(Math.floor(o.since)) : new Date(o.since * 1000).toISOString(),
    );
  const [authName, authValue] = authHeader(spec.auth, o.key);
  const headers = { accept: "application/json", [authName]: authValue, "user-agent": "hookspool-sweep" };
  const report: ListReport = { events: [], pages: 0, stopped: null };
  const maxPages = o.maxPages ?? 200;
  let url: string | null = base.toString();
  try {
    while (url) {
      if (report.pages >= maxPages) {
        report.stopped = `more than ${maxPages} pages: run it again, or with a shorter --since`;
        break;
      }
      await o.pacer?.wait();
      const r = await o.http.request("GET", url, { headers, timeoutS: 30 });
      report.pages++;
      if (r.status === 429) throw new RateLimited(rateLimitText(o.vendor, r, o.now()));
      if (r.status === 401 || r.status === 403)
        throw new HookspoolError("E_CONFIG", `${o.vendor} refused the sweep's key (http ${r.status})`, {
          hint: o.keyHint,
        });
      if (r.status === 404)
        throw new HookspoolError("E_NOT_FOUND", `${o.vendor} knows no such list (http 404)`, {
          hint: "check --api-url and the --param values",
        });
      if (r.status < 200 || r.status > 299) throw new Error(`${o.vendor}: listing the events: http ${r.status}`);
      const answer = tryJson(r.text);
      const list = at(spec.items)(answer);
      if (answer === undefined || !Array.isArray(list))
        throw new Error(`${o.vendor}: the list's answer is not the JSON its manifest describes`);
      let older = false;
      for (const item of list) {
        const when = spec.time ? secondsOf(getPath(item, spec.time)) : null;
        if (when !== null && when < o.since) {
          older = true;
          continue;
        }
        const itemHeaders: Record<string, string> = {};
        for (const [h, sel] of Object.entries(spec.headers)) {
          const v = getText(item, sel);
          if (v !== null) itemHeaders[h] = v;
        }
        report.events.push({ id: getText(item, spec.id), payload: at(spec.payload)(item), headers: itemHeaders });
      }
      // Newest first: once a page reaches past the window, the pages after it are older still.
      if (older || list.length === 0) break;
      // "!done" (Svix's) reads as "not done".
      const more =
        spec.more === undefined
          ? null
          : spec.more.startsWith("!")
            ? getPath(answer, spec.more.slice(1)) !== true
            : getPath(answer, spec.more) === true;
      const next: string | null = more === false ? null : nextUrl(spec, answer, list, base, url);
      // A cursor that does not move would read the same page again and again.
      url = next === url ? null : next;
    }
  } catch (e) {
    if (!(e instanceof RateLimited)) throw e;
    report.stopped = e.message;
  }
  return report;
}

/** The next page's URL, or null at the end; never one on another origin than the API's. */
function nextUrl(spec: EventsApiSection, answer: unknown, list: unknown[], base: URL, current: string): string | null {
  if (spec.next !== undefined) {
    const v = getText(answer, spec.next);
    if (!v) return null;
    let next: URL;
    try {
      next = new URL(v, current);
    } catch {
      throw new Error("the next page's URL is not a URL");
    }
    if (next.origin !== base.origin)
      throw new Error(`the next page is on another host (${next.host}): the key is not sent there`);
    return next.toString();
  }
  const value = spec.cursor_value ?? "";
  const cursor = value.startsWith("last:") ? getText(list[list.length - 1], value.slice(5)) : getText(answer, value);
  if (!cursor || !spec.cursor_param) return null;
  const next = new URL(base);
  next.searchParams.set(spec.cursor_param, cursor);
  return next.toString();
}
