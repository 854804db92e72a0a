// What the calls to a provider's own API share (the sweeps' lists, the health probes): the header
// that carries the key, and the words of a rate-limit answer.
import { type HttpResponse, retryAfterSeconds } from "./http.ts";

/** The Authorization (or named) header that carries the key: bearer, basic (the key as the user) or header:<Name>. */
export function authHeader(auth: string, key: string): [string, string] {
  if (auth === "basic") return ["authorization", `Basic ${Buffer.from(`${key}:`).toString("base64")}`];
  if (auth.startsWith("header:")) return [auth.slice(7).toLowerCase(), key];
  return ["authorization", `Bearer ${key}`];
}

/** The rate-limit answer's words, with the wait it asks for when it says one. */
export function rateLimitText(vendor: string, r: HttpResponse, now: number): string {
  const after = retryAfterSeconds(r.headers["retry-after"], now);
  return `${vendor}'s rate limit (http 429)${after !== null ? `: retry after ${Math.ceil(after)} s` : ""}`;
}
