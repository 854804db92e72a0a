// The request target (path and query) of a request, read without trusting its Host header. Bun
// builds a request's URL from Host: with no Host, or one that is no host name (`a b`, `[`, `a/b`,
// `%`, `x:y:z`), that URL does not parse, and a parse that throws would turn a client's
// malformed request into our 500 (and an internal issue that pages the operator). Behind the
// reverse proxy Host is the public name; nothing here routes by it.

/**
 * A host name, an IPv4 address or a bracketed IPv6 address, and an optional port (RFC 9110's Host, without
 * percent-escapes).
 */
const HOST = /^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._~-]+)(?::\d{1,5})?$/;

export type Target = { ok: true; path: string; search: string } | { ok: false; why: string };

/**
 * The path and query of a request whose URL Bun built as `url` from `host`: the bare target
 * when Bun could not make a URL, else what follows `http(s)://<host>`. A fragment is dropped.
 */
export function requestTarget(url: string, host: string | null): Target {
  if (host === null || host === "") return { ok: false, why: "no Host header" };
  if (!HOST.test(host)) return { ok: false, why: "malformed Host header" };
  let rest: string;
  if (url.startsWith("/")) rest = url;
  else {
    const scheme = /^https?:\/\//i.exec(url);
    if (!scheme || !url.slice(scheme[0].length).toLowerCase().startsWith(host.toLowerCase()))
      return { ok: false, why: "malformed request target" };
    rest = url.slice(scheme[0].length + host.length) || "/";
    if (!rest.startsWith("/")) return { ok: false, why: "malformed request target" };
  }
  const hash = rest.indexOf("#");
  if (hash >= 0) rest = rest.slice(0, hash);
  const q = rest.indexOf("?");
  return q < 0 ? { ok: true, path: rest, search: "" } : { ok: true, path: rest.slice(0, q), search: rest.slice(q) };
}

/** The 400 a malformed request gets: its reason in a word or three, nothing the client sent. */
export function badRequest(why: string): Response {
  return new Response(`${why}\n`, { status: 400, headers: { "Content-Type": "text/plain; charset=utf-8" } });
}
