// Who may see the dashboard: the holder of the token in <home>/dashboard.token (0600, made at first start); after the
// printed URL's first visit an HttpOnly, SameSite=Strict cookie (named for the port) carries a session value derived
// from it, never the token itself. Every state-changing request also carries a CSRF token derived from it; Host and
// Origin must name the listener (a DNS-rebinding page cannot reach it).
import { chmodSync, existsSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { constantTimeEqual, hmac } from "../plugin/verify.ts";

/** The cookie's name: one per port, so two dashboards on one host keep their own sessions. */
export const cookieName = (port: number) => `hookspool_dashboard_${port}`;

/**
 * The token: read from its file (its mode repaired to 0600 if it drifted), or made and written
 * with O_EXCL (never through a planted file or symlink) when there is none.
 */
export function dashboardToken(path: string): { token: string; created: boolean } {
  if (existsSync(path)) {
    const token = readFileSync(path, "utf8").trim();
    if ((statSync(path).mode & 0o077) !== 0) chmodSync(path, 0o600);
    if (token.length >= 32) return { token, created: false };
    rmSync(path, { force: true });
  }
  const token = randomBytes(32).toString("base64url");
  writeFileSync(path, `${token}\n`, { mode: 0o600, flag: "wx" });
  return { token, created: true };
}

/** What the cookie holds: derived from the token, so the file's token itself never travels in a cookie. */
export function sessionOf(token: string): string {
  return hmac(token, "hookspool dashboard session", { encoding: "hex" });
}

/** The CSRF token of a session: derived from the access token, never the token itself. */
export function csrfOf(token: string): string {
  return hmac(token, "hookspool dashboard csrf", { encoding: "hex" }).slice(0, 40);
}

function cookieValue(header: string | null, name: string): string | null {
  for (const part of (header ?? "").split(";")) {
    const eq = part.indexOf("=");
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return null;
}

/** Whether the request carries the session cookie (or, on the first visit, the token in ?token=). */
export function authorized(req: Request, url: URL, token: string, port: number): { ok: boolean; fromQuery: boolean } {
  const cookie = cookieValue(req.headers.get("cookie"), cookieName(port));
  if (cookie !== null && constantTimeEqual(cookie, sessionOf(token))) return { ok: true, fromQuery: false };
  const q = url.searchParams.get("token");
  if (q !== null && constantTimeEqual(q, token)) return { ok: true, fromQuery: true };
  return { ok: false, fromQuery: false };
}

/** The Set-Cookie header of a session. */
export function sessionCookie(token: string, port: number): string {
  return `${cookieName(port)}=${sessionOf(token)}; HttpOnly; SameSite=Strict; Path=/`;
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
