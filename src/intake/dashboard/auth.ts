// Who may see the dashboard: the holder of the token in <home>/dashboard.token (0600, made at
// first start), carried in an HttpOnly, SameSite=Strict cookie after the printed URL's first
// visit. Every state-changing request also carries a CSRF token derived from it; Host and
// Origin must name the listener (a DNS-rebinding page cannot reach it).
import { chmodSync, existsSync, readFileSync, writeFileSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { constantTimeEqual, hmac } from "../../plugin/verify.ts";

export const COOKIE = "hookspool_dashboard";

/** The token: read from its file, or made and written (0600) when there is none. */
export function dashboardToken(path: string): { token: string; created: boolean } {
  if (existsSync(path)) {
    const token = readFileSync(path, "utf8").trim();
    if (token.length >= 32) return { token, created: false };
  }
  const token = randomBytes(32).toString("base64url");
  writeFileSync(path, `${token}\n`, { mode: 0o600 });
  chmodSync(path, 0o600);
  return { token, created: true };
}

/** The CSRF token of a session: derived from the access token, never the token itself. */
export function csrfOf(token: string): string {
  return hmac(token, "hookspool dashboard csrf", { encoding: "hex" }).slice(0, 40);
}

function cookieValue(header: string | null): string | null {
  for (const part of (header ?? "").split(";")) {
    const eq = part.indexOf("=");
    if (eq > 0 && part.slice(0, eq).trim() === COOKIE) return part.slice(eq + 1).trim();
  }
  return null;
}

/** Whether the request carries the token, in its cookie (or, on the first visit, in ?token=). */
export function authorized(req: Request, url: URL, token: string): { ok: boolean; fromQuery: boolean } {
  const cookie = cookieValue(req.headers.get("cookie"));
  if (cookie !== null && constantTimeEqual(cookie, token)) return { ok: true, fromQuery: false };
  const q = url.searchParams.get("token");
  if (q !== null && constantTimeEqual(q, token)) return { ok: true, fromQuery: true };
  return { ok: false, fromQuery: false };
}

/** The Set-Cookie header for the token. */
export function tokenCookie(token: string): string {
  return `${COOKIE}=${token}; HttpOnly; SameSite=Strict; Path=/`;
}

/** Host names the listener (DNS rebinding sends another name); a POST's Origin names it too. */
export function sameOrigin(req: Request, hosts: ReadonlySet<string>): boolean {
  const host = req.headers.get("host");
  if (!host || !hosts.has(host)) return false;
  if (req.method !== "GET" && req.method !== "HEAD") {
    const origin = req.headers.get("origin");
    if (origin === null || !/^https?:\/\//.test(origin) || !hosts.has(origin.replace(/^https?:\/\//, ""))) return false;
  }
  return true;
}
