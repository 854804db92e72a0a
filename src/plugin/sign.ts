// Signing a request the way a sender of each template scheme would: what `bobbin new` writes
// into a scaffold's captures and what the source kit signs its own variations with. The
// verifying side is template.ts; a test holds the two to each other.
import { sign as signWith } from "node:crypto";
import { getText } from "./get-path.ts";
import type { TemplateSettings } from "./template.ts";
import {
  buildMessage,
  checksTimestamp,
  coversBody,
  signedUrl,
  sortedParams,
  type VerifySettings,
} from "./template-verify.ts";
import { hmac, standardWebhooksSignature } from "./verify.ts";

export interface SignedParts {
  /** Headers that carry the signature, token or timestamp. */
  headers: [string, string][];
  /** A query string (static tokens in the URL), without the "?". */
  query?: string;
}

/** The timestamp a generic scheme signs: `now`, or the body's own field when it carries one (Linear). */
function signedTs(t: VerifySettings, body: Uint8Array, now: number): string {
  if (!t.timestamp_field) return String(now);
  try {
    return getText(JSON.parse(new TextDecoder().decode(body)), t.timestamp_field) ?? String(now);
  } catch {
    return String(now);
  }
}

/** The generic schemes' signature header (and its timestamp and id headers, and header2's signature). */
function genericParts(t: VerifySettings, sig: string, ts: string, id: string, sig2?: string): [string, string][] {
  const header = t.header ?? "";
  const value =
    t.pairs !== undefined
      ? `${t.ts_name ?? "t"}=${ts}${t.pairs}${t.sig_name ?? "v1"}=${sig}`
      : `${t.prefix ?? ""}${sig}`;
  const out: [string, string][] = [[header, value]];
  if (t.header2 && sig2 !== undefined) out.push([t.header2, `${t.prefix ?? ""}${sig2}`]);
  if (t.timestamp_header) out.push([t.timestamp_header, ts]);
  if (t.id_header) out.push([t.id_header, id]);
  return out;
}

/**
 * How each scheme is signed; `id` names the message where the scheme carries one. The public-key
 * schemes (ed25519, ecdsa-p256) sign with the sender's private key, `privateKey` (PEM): without
 * it they cannot be signed, and the answer is null. With `header2`, `secret2` signs that header
 * (without it only `header` is signed, which verifies alone).
 */
export function signTemplate(
  t: Pick<TemplateSettings, "scheme" | "header" | "prefix" | "param" | "callback_url"> & VerifySettings,
  secret: string,
  body: Uint8Array,
  now: number,
  id = "msg_kit",
  privateKey?: string,
  secret2?: string,
): SignedParts {
  const prefix = t.prefix ?? "";
  const header = t.header ?? "";
  // An HMAC key given as base64 (secret_encoding): its bytes sign, as they verify.
  const keyOf = (s: string): string | Uint8Array => (t.secret_encoding === "base64" ? Buffer.from(s, "base64") : s);
  const key = keyOf(secret);
  switch (t.scheme) {
    case "hmac-sha256-hex":
      return { headers: [[header, `${prefix}${hmac(key, body, { algorithm: "sha256", encoding: "hex" })}`]] };
    case "hmac-sha1-hex":
      return { headers: [[header, `${prefix}${hmac(key, body, { algorithm: "sha1", encoding: "hex" })}`]] };
    case "hmac-sha256-base64":
      return { headers: [[header, `${prefix}${hmac(key, body, { algorithm: "sha256", encoding: "base64" })}`]] };
    case "hmac-sha1-base64-url": {
      const signed = Buffer.concat([body, new TextEncoder().encode(t.callback_url ?? "")]);
      return { headers: [[header, `${prefix}${hmac(key, signed, { algorithm: "sha1", encoding: "base64" })}`]] };
    }
    case "standard-webhooks": {
      const p = t.sw_headers === "svix" ? "svix" : "webhook";
      return {
        headers: [
          [`${p}-id`, id],
          [`${p}-timestamp`, String(now)],
          [`${p}-signature`, standardWebhooksSignature(secret, id, now, body)],
        ],
      };
    }
    case "timestamped":
      return {
        headers: [[header, `t=${now},v1=${hmac(key, Buffer.concat([new TextEncoder().encode(`${now}.`), body]))}`]],
      };
    case "static-token":
      return t.param
        ? { headers: [], query: `${encodeURIComponent(t.param)}=${encodeURIComponent(secret)}` }
        : { headers: [[header, `${prefix}${secret}`]] };
    case "hmac":
    case "ed25519":
    case "ecdsa-p256": {
      const ts = signedTs(t, body, now);
      // The kit and the scaffold post to the instance's path with no query of their own.
      const message = buildMessage(t, {
        body,
        ts,
        id,
        method: "POST",
        url: signedUrl(t, { rawQuery: "" }),
        params: () => sortedParams(body),
      });
      if (t.scheme === "hmac") {
        const opts = { algorithm: t.algorithm ?? "sha256", encoding: t.encoding ?? "hex" } as const;
        return {
          headers: genericParts(
            t,
            hmac(key, message, opts),
            ts,
            id,
            secret2 !== undefined ? hmac(keyOf(secret2), message, opts) : undefined,
          ),
        };
      }
      if (!privateKey)
        throw new Error(`scheme ${t.scheme} is signed with the sender's private key, and none was given`);
      const sig = signWith(
        t.scheme === "ed25519" ? null : "sha256",
        message,
        t.scheme === "ed25519" ? privateKey : { key: privateKey, dsaEncoding: "der" },
      );
      return {
        headers: genericParts(t, sig.toString(t.encoding ?? (t.scheme === "ed25519" ? "hex" : "base64")), ts, id),
      };
    }
    default:
      throw new Error(`no signing for scheme ${t.scheme}`);
  }
}

/**
 * Whether a request can be signed with the configured secret alone (not for a public-key scheme, whose secret is the
 * public key).
 */
export function canSign(t: VerifySettings): boolean {
  return t.scheme !== "ed25519" && t.scheme !== "ecdsa-p256";
}

/** Whether the scheme, as set, signs the body (a token scheme does not; a URL-only recipe does not). */
export function signsBody(t: VerifySettings): boolean {
  return coversBody(t);
}

/** Whether the scheme, as set, carries a timestamp, so a stale or future-dated request is refused. */
export function isTimestamped(t: VerifySettings): boolean {
  return checksTimestamp(t);
}
