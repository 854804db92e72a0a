// A manifest's [health]: how to ask the provider whether it still sends to us (one API call) and
// what a healthy answer holds. The maintenance loop asks it every probe_every_s for an instance
// that gives the section's secret and its args (`health = { ... }` on the instance). A URL, a path
// and a body may name the instance's args as {name}; conditions read the JSON answer.
//
//   [health]
//   secret  = "api_key"                       # the secret that holds the API token
//   url     = "https://api.stripe.com"        # https; {arg}s allowed (https://{shop})
//   path    = "/v1/webhook_endpoints/{endpoint}"
//   auth    = "basic"                         # bearer, basic (the key as the user) or header:<Name>
//   args    = { endpoint = "the endpoint's id (we_...)" }
//   healthy = ["status=enabled"]              # every one must hold
//   says    = ["status"]                      # what the issue quotes of the answer
//   console = "https://dashboard.stripe.com/webhooks/{endpoint}"
//
// A condition is `<path>=<a>|<b>` (the value is one of them) or `<path>!=<a>|<b>` (none of
// them). An empty alternative stands for no value (missing or null), and `2xx` (any digit, then
// xx) for a three-digit code starting with it. A 404 or 410 answer means the subscription is gone.
import { getPath } from "../plugin/get-path.ts";
import { DOTTED_PATH as PATH, HEADER_NAME, sectionFields, type Table, tomlKey } from "./manifest-schema.ts";

export interface HealthSection {
  secret: string;
  url: string;
  method: "GET" | "POST";
  path: string;
  auth: string;
  /** Fixed request headers (an API version, an Accept). */
  headers: Record<string, string>;
  /** POST only: the request's JSON text, each {arg} replaced by its value as JSON string text. */
  body?: string;
  /** The instance's values the call needs, each with what it is. */
  args: Record<string, string>;
  healthy: string[];
  says: string[];
  /** Where a person sees the subscription in the provider's console ({arg}s allowed). */
  console?: string;
}

export const HEALTH_KEYS = [
  "secret",
  "url",
  "method",
  "path",
  "auth",
  "headers",
  "body",
  "args",
  "healthy",
  "says",
  "console",
];

/** The keys an instance's `health` table may hold beyond the section's args. */
export const HEALTH_INSTANCE_KEYS = ["api_url"];

const ARG_NAME = /^[a-z][a-z0-9_]{0,31}$/;
/** An {arg} in a template text (a GraphQL query's own braces hold spaces, so they are not one). */
export const ARG_PLACE = /\{([a-z][a-z0-9_]{0,31})\}/g;

export interface Condition {
  path: string;
  negated: boolean;
  values: string[];
}

/** A condition's parts, or null when it is not one. */
export function parseCondition(text: string): Condition | null {
  const m = /^([^=!]+)(!?=)(.*)$/.exec(text);
  if (!m || !PATH.test(m[1])) return null;
  return { path: m[1], negated: m[2] === "!=", values: m[3].split("|") };
}

/** The text a value compares as: a scalar's text, "" for none; an object or a list has none to compare. */
function textOf(v: unknown): string | null {
  if (v === undefined || v === null) return "";
  if (typeof v === "string" || typeof v === "number" || typeof v === "boolean") return String(v);
  return null;
}

function matches(alt: string, text: string | null): boolean {
  if (text === null) return false;
  if (/^[1-5]xx$/.test(alt)) return /^\d{3}$/.test(text) && text[0] === alt[0];
  return alt === text;
}

/** Whether a parsed condition holds for an answer. */
export function conditionHolds(c: Condition, answer: unknown): boolean {
  const text = textOf(getPath(answer, c.path));
  const any = c.values.some((alt) => matches(alt, text));
  return c.negated ? !any : any;
}

/** The {arg} names a template text uses. */
export function placesOf(text: string): string[] {
  return [...text.matchAll(ARG_PLACE)].map((m) => m[1]);
}

/**
 * [health]: what the probe calls and what healthy means. Each problem is reported at its key;
 * the section is returned only when it has none.
 */
export function healthSection(
  t: Table,
  secrets: Record<string, unknown>,
  err: (key: string, message: string, hint?: string) => void,
): HealthSection | undefined {
  let n = 0;
  const e = (key: string, message: string, hint?: string) => {
    n++;
    err(`health.${key}`, message, hint);
  };
  for (const k of Object.keys(t)) if (!HEALTH_KEYS.includes(k)) e(k, "unknown key");
  const { text, strings } = sectionFields(t, e);
  const list = (k: string, required: boolean): string[] => {
    const v = t[k];
    if (v === undefined) {
      if (required) e(k, "required");
      return [];
    }
    if (!Array.isArray(v) || !v.every((x) => typeof x === "string" && x !== "") || (required && v.length === 0)) {
      e(k, "expected a list of non-empty strings");
      return [];
    }
    return v as string[];
  };

  const secret = text("secret", true);
  if (secret !== undefined && !Object.hasOwn(secrets, secret))
    e("secret", `"${secret}" is not a secret of this bobbin`, `declare [secrets.${secret}] (required = false)`);
  const args = strings("args");
  for (const a of Object.keys(args))
    if (!ARG_NAME.test(a) || HEALTH_INSTANCE_KEYS.includes(a))
      e(`args.${tomlKey(a)}`, "an arg's name is lower case letters, digits and _ (and not api_url)");
  const usesKnown = (k: string, v: string | undefined) => {
    for (const p of v === undefined ? [] : placesOf(v))
      if (!Object.hasOwn(args, p)) e(k, `{${p}} is not one of the section's args`, "declare it in args");
  };
  const url = text("url", true);
  if (url !== undefined) {
    usesKnown("url", url);
    let u: URL | null = null;
    try {
      u = new URL(url.replace(ARG_PLACE, "x"));
    } catch {
      e("url", `"${url}" is not a URL`);
    }
    if (u && (u.protocol !== "https:" || u.search || u.hash || u.username || u.pathname !== "/"))
      e("url", "expected an https origin, without a path, a query or credentials");
  }
  const method = text("method", false) ?? "GET";
  if (method !== "GET" && method !== "POST") e("method", "expected GET or POST");
  const path = text("path", true);
  if (path !== undefined) {
    usesKnown("path", path);
    if (!path.startsWith("/") || /[?#]/.test(path)) e("path", 'expected a path from the origin ("/v1/x/{id}")');
  }
  const auth = text("auth", true);
  if (auth !== undefined && auth !== "bearer" && auth !== "basic" && !/^header:[A-Za-z0-9-]+$/.test(auth))
    e("auth", `"${auth}" is not bearer, basic or header:<Name>`);
  const headers = strings("headers");
  for (const h of Object.keys(headers)) if (!HEADER_NAME.test(h)) e(`headers.${tomlKey(h)}`, "not a header name");
  const body = text("body", false);
  if (body !== undefined) {
    if (method !== "POST") e("body", "only a POST has a body", 'method = "POST"');
    usesKnown("body", body);
    try {
      JSON.parse(body.replace(ARG_PLACE, "x"));
    } catch {
      e("body", "expected JSON text (an {arg} inside a JSON string)");
    }
  }
  const healthy = list("healthy", true);
  for (const [i, c] of healthy.entries())
    if (!parseCondition(c)) e(`healthy[${i}]`, `"${c}" is not <path>=<value> or <path>!=<value>`);
  const says = list("says", false);
  for (const [i, p] of says.entries()) if (!PATH.test(p)) e(`says[${i}]`, `"${p}" is not a dotted path`);
  const consoleUrl = text("console", false);
  if (consoleUrl !== undefined) {
    usesKnown("console", consoleUrl);
    if (!consoleUrl.startsWith("https://")) e("console", "expected an https URL");
  }
  if (n > 0 || secret === undefined || url === undefined || path === undefined || auth === undefined) return undefined;
  return {
    secret,
    url,
    method: method as HealthSection["method"],
    path,
    auth,
    headers,
    ...(body !== undefined ? { body } : {}),
    args,
    healthy,
    says,
    ...(consoleUrl !== undefined ? { console: consoleUrl } : {}),
  };
}
