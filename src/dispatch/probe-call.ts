// A health probe's one call: ask the provider about our subscription as the bobbin's [health] says,
// and read its answer. healthy true: every condition holds; false: one does not, or the provider
// answers 404 or 410 (the subscription is gone); null: the probe could not tell (the token refused,
// a rate limit, the network, an answer that is not JSON). The token goes only into the header the
// section names; no message quotes a URL's path or query, a header or the body, and what the
// provider says is cut to a line (whoever shows it escapes it).
import type { ProbeConfig } from "../config/probes.ts";
import { ARG_PLACE, type Condition, conditionHolds, parseCondition } from "../bobbin/manifest-health.ts";
import { type Http, tryJson } from "../net/http.ts";
import { getPath } from "../plugin/get-path.ts";
import { authHeader, rateLimitText } from "../net/api.ts";

export interface ProbeAnswer {
  healthy: boolean | null;
  says: string;
  error: string | null;
  console: string | null;
}

/** Each quoted value at most so long, the whole line at most SAYS_MAX. */
const VALUE_MAX = 120;
const SAYS_MAX = 400;
const HOST_VALUE = /^[A-Za-z0-9.-]+(:\d+)?$/;

const cut = (s: string, n: number) => (s.length > n ? `${s.slice(0, n - 3)}...` : s);

/** A path's {arg}s: each value URL-encoded, a "/" in it kept (owner/repo); no "." or ".." segment. */
function pathValue(v: string): string | null {
  const parts = v.split("/");
  if (parts.some((p) => p === "" || p === "." || p === "..")) return null;
  return parts.map(encodeURIComponent).join("/");
}

/** Replace each {arg} of `text` by `f(value)`; null when a value cannot go there. */
function fill(text: string, args: Record<string, string>, f: (v: string) => string | null): string | null {
  let bad = false;
  const out = text.replace(ARG_PLACE, (_, name: string) => {
    const v = f(args[name] ?? "");
    if (v === null) bad = true;
    return v ?? "";
  });
  return bad ? null : out;
}

/** Where a person sees the subscription, or null when the section names no console. */
export function consoleOf(probe: ProbeConfig): string | null {
  const c = probe.section.console;
  return c === undefined ? null : fill(c, probe.args, pathValue);
}

/** What the provider says, as `path=value` for each of the section's says. */
function saysOf(probe: ProbeConfig, answer: unknown): string {
  const parts: string[] = [];
  for (const p of probe.section.says) {
    const v = getPath(answer, p);
    const text = v === undefined || v === null ? "null" : typeof v === "object" ? JSON.stringify(v) : String(v);
    parts.push(`${p}=${cut(text, VALUE_MAX)}`);
  }
  return cut(parts.join(", "), SAYS_MAX);
}

export interface ProbeOptions {
  http: Http;
  probe: ProbeConfig;
  token: string;
  now: () => number;
}

export async function probeHealth(o: ProbeOptions): Promise<ProbeAnswer> {
  const { probe } = o;
  const { section } = probe;
  const vendor = probe.vendor;
  const console = consoleOf(probe);
  const failed = (error: string): ProbeAnswer => ({ healthy: null, says: "", error, console });
  const base = probe.apiUrl ?? fill(section.url, probe.args, (v) => (HOST_VALUE.test(v) ? v : null));
  const path = fill(section.path, probe.args, pathValue);
  if (base === null || path === null) return failed("an arg of the health probe cannot go into its URL");
  const body =
    section.body === undefined ? undefined : fill(section.body, probe.args, (v) => JSON.stringify(v).slice(1, -1));
  const [authName, authValue] = authHeader(section.auth, o.token);
  const headers: Record<string, string> = {
    accept: "application/json",
    "user-agent": "hookspool-probe",
    ...Object.fromEntries(Object.entries(section.headers).map(([k, v]) => [k.toLowerCase(), v])),
    ...(body !== undefined ? { "content-type": "application/json" } : {}),
    [authName]: authValue,
  };
  let r: Awaited<ReturnType<Http["request"]>>;
  try {
    r = await o.http.request(section.method, base.replace(/\/+$/, "") + path, {
      headers,
      timeoutS: 30,
      maxBytes: 1024 * 1024,
      ...(body !== undefined && body !== null ? { body } : {}),
    });
  } catch (e) {
    return failed(`${vendor} could not be asked: ${e instanceof Error ? e.message : String(e)}`);
  }
  if (r.status === 429 || (r.status === 403 && r.headers["x-ratelimit-remaining"] === "0"))
    return failed(rateLimitText(vendor, { ...r, status: 429 }, o.now()));
  if (r.status === 401 || r.status === 403)
    return failed(`${vendor} refused the probe's token (http ${r.status}): secrets.${section.secret}`);
  if (r.status === 404 || r.status === 410)
    return { healthy: false, says: `http ${r.status}: ${vendor} knows no such subscription`, error: null, console };
  if (r.status < 200 || r.status > 299) return failed(`${vendor} answered http ${r.status}`);
  const answer = tryJson(r.text);
  if (answer === undefined || answer === null || typeof answer !== "object")
    return failed(`${vendor}'s answer is not a JSON object`);
  // A GraphQL API answers a query it could not run with errors and no data, not with a status.
  const errors = getPath(answer, "errors");
  if (Array.isArray(errors) && errors.length > 0 && (getPath(answer, "data") ?? null) === null)
    return failed(`${vendor} answered errors: ${cut(String(getPath(errors[0], "message") ?? "?"), VALUE_MAX)}`);
  const conditions = section.healthy.map(parseCondition).filter((c): c is Condition => c !== null);
  const healthy = conditions.every((c) => conditionHolds(c, answer));
  return { healthy, says: saysOf(probe, answer), error: null, console };
}
