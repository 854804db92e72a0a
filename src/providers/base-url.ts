// An `api_base_url` setting, the one way a bobbin lets tests and the kit point its API calls at
// a stub: empty means the provider's own; otherwise https, or plain http to this machine only,
// with no credentials, query or fragment.
const LOOPBACK = new Set(["127.0.0.1", "localhost", "[::1]"]);

/** Why the setting cannot be a base URL, as a fixed phrase for failPermanent or an Error. */
export const BASE_URL_RULE =
  "api_base_url must be https, or plain http on 127.0.0.1 or localhost only, with no credentials, query or fragment";

/** The base URL without a trailing slash; undefined when the setting is empty; null when it breaks the rule. */
export function apiBaseUrl(raw: unknown): string | undefined | null {
  if (raw === undefined || raw === null || (typeof raw === "string" && raw.trim() === "")) return undefined;
  if (typeof raw !== "string") return null;
  let u: URL;
  try {
    u = new URL(raw.trim());
  } catch {
    return null;
  }
  if (u.protocol !== "https:" && !(u.protocol === "http:" && LOOPBACK.has(u.hostname))) return null;
  if (u.username || u.password || u.search || u.hash) return null;
  return `${u.origin}${u.pathname.replace(/\/+$/, "")}`;
}
