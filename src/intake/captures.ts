// The URL a quarantined request keeps: its path and query, without secret-bearing parameters.

/** Query parameters that may carry a secret (a push token, a key, a signature, an OAuth code). */
const SECRET_PARAM = /token|key|secret|sig|auth|pass|code|credential/i;

/**
 * The path and query string worth keeping with a quarantined request: every parameter that
 * may carry a secret (the source's own token parameter, and any whose name looks like one)
 * left out, so a replay sees the rest of the query as the plugin did.
 */
export function storableUrl(url: string, secretParams: readonly string[]): string {
  const q = url.indexOf("?");
  if (q < 0) return url;
  const drop = new Set(secretParams);
  const kept = [...new URLSearchParams(url.slice(q + 1))].filter(([k]) => !drop.has(k) && !SECRET_PARAM.test(k));
  return kept.length ? `${url.slice(0, q)}?${new URLSearchParams(kept).toString()}` : url.slice(0, q);
}
