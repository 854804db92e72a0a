// The GitHub redelivery sweep: GitHub never sends a failed delivery again, so after an outage
// the sweep lists a webhook's recent deliveries (every page, newest first), groups the attempts
// by GUID (the X-GitHub-Delivery value), and for each GUID that never got a 2xx answer and that
// the spool has not seen, asks GitHub to redeliver it. Running it twice is harmless: a GUID that
// landed has a 2xx attempt, and a redelivery the spool already took is a duplicate.
import type { Http, HttpResponse } from "../net/http.ts";
import type { Pacer } from "../net/pace.ts";

export interface GitHubDelivery {
  id: number;
  guid: string;
  delivered_at: string;
  status_code: number;
  event?: string;
  redelivery?: boolean;
}

export interface SweepOptions {
  http: Http;
  /** https://api.github.com, or a GitHub Enterprise Server's /api/v3. */
  apiUrl: string;
  /** owner/repo */
  repo: string;
  hookId: string;
  token: string;
  /** Unix seconds: deliveries before this are not looked at. */
  since: number;
  dryRun: boolean;
  /** The GUIDs among these that the spool already holds. */
  spooled(guids: readonly string[]): Set<string> | Promise<Set<string>>;
  pacer?: Pacer;
  /** At most this many pages of 100 (a runaway guard). */
  maxPages?: number;
}

export interface SweepReport {
  /** Attempts listed since `since`. */
  attempts: number;
  guids: number;
  landed: number;
  spooled: string[];
  redelivered: { guid: string; id: number; event: string }[];
  failed: { guid: string; id: number; reason: string }[];
  /** Why the sweep stopped early (a rate limit), if it did. */
  stopped: string | null;
}

const encoded = (s: string) => s.split("/").map(encodeURIComponent).join("/");

/** The rel="next" URL of a Link header. */
function nextLink(link: string | undefined): string | null {
  for (const part of (link ?? "").split(",")) {
    const m = /<([^>]+)>\s*;\s*rel="?next"?/.exec(part);
    if (m) return m[1];
  }
  return null;
}

/** A rate limit answer: 429, or 403 with no requests left. */
function rateLimited(r: HttpResponse): string | null {
  if (r.status !== 429 && !(r.status === 403 && r.headers["x-ratelimit-remaining"] === "0")) return null;
  const reset = Number(r.headers["x-ratelimit-reset"]);
  const after = r.headers["retry-after"];
  if (after) return `GitHub's rate limit: retry after ${after} s`;
  return Number.isFinite(reset) && reset > 0
    ? `GitHub's rate limit: it resets at ${new Date(reset * 1000).toISOString()}`
    : "GitHub's rate limit";
}

class Stop extends Error {}

export async function sweepGitHub(o: SweepOptions): Promise<SweepReport> {
  const headers = {
    Accept: "application/vnd.github+json",
    Authorization: `Bearer ${o.token}`,
    "X-GitHub-Api-Version": "2022-11-28",
    "User-Agent": "hookspool-sweep",
  };
  const hook = `${o.apiUrl.replace(/\/+$/, "")}/repos/${encoded(o.repo)}/hooks/${encodeURIComponent(o.hookId)}`;
  const report: SweepReport = {
    attempts: 0,
    guids: 0,
    landed: 0,
    spooled: [],
    redelivered: [],
    failed: [],
    stopped: null,
  };
  const call = async (method: string, url: string): Promise<HttpResponse> => {
    await o.pacer?.wait();
    const r = await o.http.request(method, url, { headers, timeoutS: 30 });
    const limited = rateLimited(r);
    if (limited) throw new Stop(limited);
    return r;
  };

  // Newest first: one attempt per GUID is kept, the newest, with whether any attempt landed.
  const newest = new Map<string, GitHubDelivery>();
  const landed = new Set<string>();
  try {
    let url: string | null = `${hook}/deliveries?per_page=100`;
    for (let page = 0; url && page < (o.maxPages ?? 100); page++) {
      const r = await call("GET", url);
      if (r.status === 401 || r.status === 403)
        throw new Error(
          `GitHub refused the token (http ${r.status}): it needs read and write access to the repository's webhooks`,
        );
      if (r.status === 404)
        throw new Error(
          "GitHub knows no such webhook (http 404): check --repo and --hook, and that the token can see them",
        );
      if (r.status < 200 || r.status > 299) throw new Error(`listing the deliveries: http ${r.status}`);
      const list = JSON.parse(r.text) as GitHubDelivery[];
      if (!Array.isArray(list) || list.length === 0) break;
      let older = false;
      for (const d of list) {
        if (Date.parse(d.delivered_at) / 1000 < o.since) {
          older = true;
          continue;
        }
        report.attempts++;
        if (d.status_code >= 200 && d.status_code <= 299) landed.add(d.guid);
        if (!newest.has(d.guid)) newest.set(d.guid, d);
      }
      url = older ? null : nextLink(r.headers.link);
    }
  } catch (e) {
    if (!(e instanceof Stop)) throw e;
    report.stopped = e.message;
    return report;
  }
  report.guids = newest.size;
  report.landed = landed.size;
  const failed = [...newest.values()].filter((d) => !landed.has(d.guid));
  const spooled = await o.spooled(failed.map((d) => d.guid));
  report.spooled = failed.filter((d) => spooled.has(d.guid)).map((d) => d.guid);
  for (const d of failed) {
    if (spooled.has(d.guid)) continue;
    const entry = { guid: d.guid, id: d.id, event: d.event ?? "" };
    if (o.dryRun) {
      report.redelivered.push(entry);
      continue;
    }
    try {
      const r = await call("POST", `${hook}/deliveries/${d.id}/attempts`);
      if (r.status >= 200 && r.status <= 299) report.redelivered.push(entry);
      else report.failed.push({ guid: d.guid, id: d.id, reason: `http ${r.status}` });
    } catch (e) {
      if (e instanceof Stop) {
        report.stopped = e.message;
        break;
      }
      report.failed.push({
        guid: d.guid,
        id: d.id,
        reason: (e as Error).name === "RetryLater" ? (e as Error).message : "request failed",
      });
    }
  }
  return report;
}
