// The outbound headers (Standard Webhooks, X-Hub-Signature-256, X-Hookspool-*; described in
// docs/receiving.md), and reading the signing secrets for one attempt. Every HMAC goes through
// src/plugin/verify.ts.
import { resolveSecret, type Env } from "../config/secrets.ts";
import type { SecretRef } from "../config/types.ts";
import { isHookspoolError } from "../errors.ts";
import { hmac, signingKey, standardWebhooksSignature } from "../plugin/verify.ts";
import { VERSION } from "../version.ts";
import { outcome, type Outcome } from "../delivery.ts";

/** The headers hookspool sets on every delivery (lower case); nothing configured may replace them. */
export const HOOKSPOOL_HEADERS: ReadonlySet<string> = new Set([
  "webhook-id",
  "webhook-timestamp",
  "webhook-signature",
  "x-hub-signature-256",
  "x-hookspool-batch",
  "x-hookspool-attempt",
  "content-type",
  "user-agent",
]);

// Framing headers belong to the HTTP client; a configured value would corrupt the request.
const TRANSPORT_HEADERS: ReadonlySet<string> = new Set([
  "content-length",
  "host",
  "transfer-encoding",
  "connection",
  "keep-alive",
  "upgrade",
  "te",
  "trailer",
  "expect",
]);

/** Whether config may not set this header (hookspool's own, or the client's framing). */
export function isReservedHeader(name: string): boolean {
  const lower = name.toLowerCase();
  return HOOKSPOOL_HEADERS.has(lower) || TRANSPORT_HEADERS.has(lower);
}

/** An RFC 9110 token: anything else makes fetch throw. */
export function validHeaderName(name: string): boolean {
  return /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(name);
}

/** A value that can go on the wire: no CR, LF or NUL, Latin-1 only (else the header is left out). */
export function wireSafe(value: string): boolean {
  return !/[\r\n\u0000]/.test(value) && /^[\u0000-\u00ff]*$/.test(value);
}

export interface HeaderInput {
  /** webhook-id: the delivery id (per batch, per attempt or per event). */
  webhookId: string;
  /** Unix seconds at send time, whole. */
  timestamp: number;
  /** The exact bytes that are sent. */
  body: Uint8Array;
  /** Standard Webhooks secrets, current first (each signs during a rotation); empty: no signature. */
  secrets: readonly string[];
  /** The X-Hub-Signature-256 key (raw UTF-8 of the current secret), or null to leave it out. */
  hubSecret: string | null;
  batchId: number;
  attempt: number;
  /** Static headers from config (http); any reserved or unusable one is skipped. */
  extra?: Record<string, string>;
  /** event_header / dedup_header with their values; left out when empty, reserved or not wire-safe. */
  named?: { name: string | null | undefined; value: string | null | undefined }[];
}

/** The headers of one request, with hookspool's own set last so nothing can override them. */
export function outboundHeaders(i: HeaderInput): Headers {
  const h = new Headers();
  const put = (name: string | null | undefined, value: string | null | undefined) => {
    if (!name || value === null || value === undefined) return;
    if (isReservedHeader(name) || !validHeaderName(name) || !wireSafe(value)) return;
    h.set(name, value);
  };
  for (const [name, value] of Object.entries(i.extra ?? {})) put(name, value);
  // An event without a type (or a dedup id) sends no such header, never an empty one.
  for (const n of i.named ?? []) if (n.value?.trim()) put(n.name, n.value);
  h.set("webhook-id", i.webhookId);
  h.set("webhook-timestamp", String(i.timestamp));
  if (i.secrets.length)
    h.set(
      "webhook-signature",
      i.secrets.map((s) => standardWebhooksSignature(s, i.webhookId, i.timestamp, i.body)).join(" "),
    );
  if (i.hubSecret !== null) h.set("x-hub-signature-256", `sha256=${hmac(i.hubSecret, i.body)}`);
  h.set("x-hookspool-batch", String(i.batchId));
  h.set("x-hookspool-attempt", String(i.attempt));
  h.set("content-type", "application/json");
  h.set("user-agent", `hookspool/${VERSION}`);
  return h;
}

/** Whether a secret gives a signing key (a whsec_ secret must be base64 after the prefix). */
export function usableSecret(secret: string): boolean {
  try {
    signingKey(secret);
    return true;
  } catch (e) {
    if (isHookspoolError(e)) return false;
    throw e;
  }
}

/** A config outcome for a secret problem; the reason names the problem, never the value. */
export function secretProblem(reason: string, detail: string): Outcome {
  return outcome({ kind: "retry", klass: "config", reason, detail });
}

/**
 * Read signing secrets now (at use time, never cached), current first. An unreadable secret,
 * or a whsec_ one that is not base64, is a config outcome rather than a throw: the batch waits
 * for the operator's fix instead of failing the worker.
 */
export function readSecrets(refs: readonly SecretRef[], env: Env): string[] | Outcome {
  const out: string[] = [];
  for (const [i, ref] of refs.entries()) {
    const which = i === 0 ? "secret" : "previous secret";
    let value: string;
    try {
      value = resolveSecret(ref, env);
    } catch (e) {
      if (!isHookspoolError(e)) throw e;
      return secretProblem(`${which} unreadable`, e.message);
    }
    if (!usableSecret(value))
      return secretProblem(`${which} is not valid whsec_ base64`, `${which} is not valid whsec_ base64`);
    out.push(value);
  }
  return out;
}

/** Problems with secret references, for check(): the same rules as readSecrets. */
export function secretProblems(refs: readonly SecretRef[], env: Env): string[] {
  const problems: string[] = [];
  for (const [i, ref] of refs.entries()) {
    const r = readSecrets([ref], env);
    if (!Array.isArray(r)) problems.push(i === 0 ? r.detail : `secret_previous: ${r.detail}`);
  }
  return problems;
}

/** check() rule for hermes and http: event_header / dedup_header must be usable names. */
export function namedHeaderProblems(named: Record<string, string | null | undefined>): string[] {
  const problems: string[] = [];
  for (const [key, name] of Object.entries(named)) {
    if (!name) continue;
    if (isReservedHeader(name)) problems.push(`${key} ${name} is a header hookspool sets`);
    else if (!validHeaderName(name)) problems.push(`${key} ${name} is not a valid header name`);
  }
  return problems;
}
