// Requests kept as text: the URL a quarantined request keeps, and capture files (.http) that
// `hookspool source test` and the tests replay.

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

/** Parse a captured request (.http: start line, headers, blank line, body) for `source test`. */
export function parseHttpCapture(text: string): { method: string; url: string; headers: [string, string][]; body: Uint8Array } {
  const normalized = text.replace(/\r\n/g, "\n");
  const split = normalized.indexOf("\n\n");
  const head = split < 0 ? normalized : normalized.slice(0, split);
  const body = split < 0 ? "" : normalized.slice(split + 2);
  const lines = head.split("\n").filter((l) => !l.startsWith("#"));
  const start = (lines.shift() ?? "").trim().split(/\s+/);
  if (start.length < 2) throw new Error("the first line must be METHOD PATH [HTTP/1.1]");
  const headers: [string, string][] = [];
  for (const line of lines) {
    if (line.trim() === "") continue;
    const c = line.indexOf(":");
    if (c <= 0) throw new Error(`not a header line: ${line.slice(0, 40)}`);
    headers.push([line.slice(0, c).trim(), line.slice(c + 1).trim()]);
  }
  // A capture's body ends at the file's end; a single trailing newline is the file's, not the body's.
  return { method: start[0], url: start[1], headers, body: new TextEncoder().encode(body.replace(/\n$/, "")) };
}
