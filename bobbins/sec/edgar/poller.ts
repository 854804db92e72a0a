// The sec.edgar poller: on each tick of the dispatcher's clock, one conditional GET of the
// company's EDGAR Atom feed (browse-edgar, action=getcompany, output=atom), and the filings whose
// accession number it has not seen before as `filing` items, newest first.
//
// - SEC's fair access rules: every request carries the instance's `user_agent` (a name and a
//   contact e-mail, refused without one) and waits on ctx.pace(5), half SEC's 10 a second; a tick
//   makes one request.
// - The first tick for a feed is a baseline: its filings are recorded as seen and none is
//   returned, unless `announce_existing` is set. A changed cik (or forms to or from a single
//   form, which changes type=) is another feed URL, so it starts a new baseline instead of
//   announcing 40 old filings.
// - `forms` keeps only those form types (exact, case-insensitive); every entry is recorded as
//   seen whatever its form. With exactly one form the feed is asked for that type (SEC's search
//   may match it as a prefix, so the exact filter still applies).
// - State: "http" (the feed URL, the answer's ETag and Last-Modified, sent back only for the
//   same URL) and "seen" (the feed URL and the last 500 accession numbers, newest first).
import { apiBaseUrl, BASE_URL_RULE } from "../../../src/providers/base-url.ts";
import { definePoller } from "../../../src/plugin/processor.ts";
import { Retryable } from "../../../src/plugin/types.ts";
import { type FeedEntry, FeedError, parseFeed } from "../../../src/providers/feeds.ts";

export interface EdgarSettings {
  cik: string;
  user_agent: string;
  forms: string[];
  announce_existing: boolean;
  base_url: string;
}

/** A filing as the bobbin emits it (with event_type "filing" and the CIK as key). */
export interface Filing {
  accession: string;
  form: string;
  filed: string;
  title: string;
  link: string;
}

interface HttpState {
  url: string;
  etag: string;
  last_modified: string;
}

interface SeenState {
  feed: string;
  accessions: string[];
}

/** How many accession numbers are remembered: far more than the feed's 40 entries. */
export const SEEN = 500;
/** Requests a second at most: well under SEC's 10. */
export const PER_SEC = 5;
/** Entries the feed is asked for. */
export const COUNT = 40;
export const DEFAULT_BASE = "https://www.sec.gov";
const EMAIL = /[^\s@<>()]+@[^\s@<>()]+\.[A-Za-z]{2,}/;
const ACCESSION = /\b(\d{10}-\d{2}-\d{6})\b/;

/** The CIK zero-padded to 10 digits, or null when it is not 1 to 10 digits. */
export function cikOf(raw: unknown): string | null {
  const s = typeof raw === "string" ? raw.trim() : "";
  return /^\d{1,10}$/.test(s) ? s.padStart(10, "0") : null;
}

/** Why a User-Agent does not meet SEC's rule (a name and a contact e-mail), or null. */
export function userAgentProblem(raw: unknown): string | null {
  const ua = typeof raw === "string" ? raw.trim() : "";
  if (ua === "") return "user_agent is required: a name and a contact e-mail, as SEC's fair access rules ask";
  if (/[\u0000-\u001f\u007f]/.test(ua)) return "user_agent holds a control character";
  if (ua.length > 200) return "user_agent is longer than 200 characters";
  if (!EMAIL.test(ua)) return "user_agent has no contact e-mail address: SEC asks for a name and an e-mail";
  if (ua.replace(EMAIL, "").trim() === "") return "user_agent has no name beside the e-mail address";
  return null;
}

/** The base URL without a trailing slash (SEC's own when the setting is empty), or null when it breaks core's rule. */
export function baseOf(raw: unknown): string | null {
  const base = apiBaseUrl(raw);
  return base === undefined ? DEFAULT_BASE : base;
}

/** The form types to keep, upper-cased; empty keeps all. */
export function formsOf(raw: unknown): string[] {
  const list = Array.isArray(raw) ? raw : [];
  return [
    ...new Set(
      list
        .filter((f): f is string => typeof f === "string")
        .map((f) => f.trim().toUpperCase())
        .filter(Boolean),
    ),
  ];
}

/** The company's Atom feed: its newest filings, of one type when exactly one form is kept. */
export function feedUrl(base: string, cik: string, forms: readonly string[]): string {
  const type = forms.length === 1 ? (forms[0] ?? "") : "";
  const query = `action=getcompany&CIK=${cik}&type=${encodeURIComponent(type)}&dateb=&owner=include&count=${COUNT}`;
  return `${base}/cgi-bin/browse-edgar?${query}&output=atom`;
}

/**
 * A feed entry as a filing: the accession number from the entry id
 * (urn:tag:sec.gov,2008:accession-number=...) or the index link, the form type from the category
 * term, the filing date from the summary ("Filed: 2024-11-01"; else the date of updated), the
 * title and the filing index link. Null for an entry with no accession number.
 */
export function filingOf(e: FeedEntry): Filing | null {
  const accession = /accession-number=(\d{10}-\d{2}-\d{6})/.exec(e.id)?.[1] ?? ACCESSION.exec(e.link)?.[1];
  if (!accession) return null;
  const title = e.title.replace(/\s+/g, " ").trim();
  const form = (e.categories[0] ?? title.split(" - ")[0] ?? "").trim();
  const filed =
    /Filed:(?:\s|<\/?b>)*(\d{4}-\d{2}-\d{2})/.exec(e.summary)?.[1] ?? /^\d{4}-\d{2}-\d{2}/.exec(e.updated)?.[0] ?? "";
  return { accession, form, filed, title, link: e.link };
}

export default definePoller<EdgarSettings>({
  async poll(_batch, ctx) {
    const s = ctx.settings;
    const cik = cikOf(s.cik);
    if (!cik) return ctx.failPermanent("cik is not a CIK: 1 to 10 digits (leading zeros optional)");
    const uaProblem = userAgentProblem(s.user_agent);
    if (uaProblem) return ctx.failPermanent(uaProblem);
    const base = baseOf(s.base_url);
    if (!base) return ctx.failPermanent(BASE_URL_RULE.replace("api_base_url", "base_url"));
    const forms = formsOf(s.forms);
    const url = feedUrl(base, cik, forms);

    const http = ctx.loadState<HttpState | null>("http", null);
    const same = http !== null && http.url === url;
    await ctx.pace(PER_SEC).wait();
    const answer = await ctx.http.getText(url, {
      headers: { "User-Agent": String(s.user_agent).trim(), Accept: "application/atom+xml" },
      ...(same && http.etag ? { etag: http.etag } : {}),
      ...(same && http.last_modified ? { lastModified: http.last_modified } : {}),
    });
    if (answer.status === 304) {
      ctx.log("feed not modified (304): no new filings");
      return [];
    }
    let entries: FeedEntry[];
    try {
      entries = parseFeed(answer.text).entries;
    } catch (e) {
      if (!(e instanceof FeedError)) throw e;
      // SEC answers an undeclared or too-fast tool with an HTML page: a later try may pass.
      ctx.log(`the answer is not the Atom feed (${e.message}); the tick is retried`);
      throw new Retryable("not an Atom feed");
    }

    const filings: Filing[] = [];
    const inFeed = new Set<string>();
    let missing = 0;
    for (const e of entries) {
      const f = filingOf(e);
      if (!f) missing++;
      else if (!inFeed.has(f.accession)) {
        inFeed.add(f.accession);
        filings.push(f);
      }
    }
    const seen = ctx.loadState<SeenState | null>("seen", null);
    // Seen for this very feed URL, or null: the first tick (or a new cik or type) is a baseline.
    const prior = seen !== null && seen.feed === url && Array.isArray(seen.accessions) ? seen.accessions : null;
    const baseline = prior === null;
    const known = new Set(prior ?? []);
    const fresh = filings.filter((f) => !known.has(f.accession));
    const kept = fresh.filter((f) => forms.length === 0 || forms.includes(f.form.toUpperCase()));
    const accessions = [...fresh.map((f) => f.accession), ...(prior ?? [])].slice(0, SEEN);
    ctx.saveState("seen", { feed: url, accessions } satisfies SeenState);
    ctx.saveState("http", {
      url,
      etag: answer.headers.etag ?? "",
      last_modified: answer.headers["last-modified"] ?? "",
    } satisfies HttpState);

    const announce = !baseline || s.announce_existing === true;
    ctx.log(
      `${entries.length} entries${missing ? ` (${missing} without an accession number)` : ""}, ` +
        `${fresh.length} not seen before, ${kept.length} of the kept forms` +
        (baseline
          ? announce
            ? "; first tick: announced (announce_existing)"
            : "; first tick: recorded as the baseline, none announced"
          : ""),
    );
    if (!announce) return [];
    return kept.map((f) => ({
      event_type: "filing",
      key: cik,
      cik,
      accession: f.accession,
      form: f.form,
      filed: f.filed,
      title: f.title,
      link: f.link,
    }));
  },
});
