// Signing a request the way a sender of each template scheme would: what `bobbin new` writes
// into a scaffold's captures and what the source kit signs its own variations with. The
// verifying side is template.ts; a test holds the two to each other.
import type { TemplateSettings } from "./template.ts";
import { hmac, standardWebhooksSignature } from "./verify.ts";

export interface SignedParts {
  /** Headers that carry the signature, token or timestamp. */
  headers: [string, string][];
  /** A query string (static tokens in the URL), without the "?". */
  query?: string;
}

/** How each scheme is signed; `id` names the message where the scheme carries one. */
export function signTemplate(t: Pick<TemplateSettings, "scheme" | "header" | "prefix" | "param" | "callback_url">, secret: string, body: Uint8Array, now: number, id = "msg_kit"): SignedParts {
  const prefix = t.prefix ?? "";
  const header = t.header ?? "";
  switch (t.scheme) {
    case "hmac-sha256-hex":
      return { headers: [[header, `${prefix}${hmac(secret, body, { algorithm: "sha256", encoding: "hex" })}`]] };
    case "hmac-sha1-hex":
      return { headers: [[header, `${prefix}${hmac(secret, body, { algorithm: "sha1", encoding: "hex" })}`]] };
    case "hmac-sha256-base64":
      return { headers: [[header, `${prefix}${hmac(secret, body, { algorithm: "sha256", encoding: "base64" })}`]] };
    case "hmac-sha1-base64-url": {
      const tail = new TextEncoder().encode(t.callback_url ?? "");
      const signed = new Uint8Array(body.length + tail.length);
      signed.set(body, 0);
      signed.set(tail, body.length);
      return { headers: [[header, `${prefix}${hmac(secret, signed, { algorithm: "sha1", encoding: "base64" })}`]] };
    }
    case "standard-webhooks":
      return {
        headers: [
          ["webhook-id", id],
          ["webhook-timestamp", String(now)],
          ["webhook-signature", standardWebhooksSignature(secret, id, now, body)],
        ],
      };
    case "timestamped": {
      const signed = new Uint8Array([...new TextEncoder().encode(`${now}.`), ...body]);
      return { headers: [[header, `t=${now},v1=${hmac(secret, signed)}`]] };
    }
    case "static-token":
      return t.param ? { headers: [], query: `${encodeURIComponent(t.param)}=${encodeURIComponent(secret)}` } : { headers: [[header, `${prefix}${secret}`]] };
  }
}

/** The schemes whose signature covers the body (a token scheme's does not). */
export function signsBody(scheme: TemplateSettings["scheme"]): boolean {
  return scheme !== "static-token";
}

/** The schemes that carry a timestamp, so a stale or future-dated request is refused. */
export function isTimestamped(scheme: TemplateSettings["scheme"]): boolean {
  return scheme === "standard-webhooks" || scheme === "timestamped";
}
