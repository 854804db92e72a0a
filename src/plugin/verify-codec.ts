// What every check of verify.ts, verify-time.ts and verify-public.ts shares: the data a check
// takes (text or bytes), the encodings of a signature and how they are read, and the classes of
// failure a check answers with. Nothing here computes a MAC or compares a secret.

export type Data = string | Uint8Array;
export type Algorithm = "sha256" | "sha1" | "sha512";
export type Encoding = "hex" | "base64";

/**
 * Why a request is not verified, as a class that is safe to log (it holds no value): no
 * signature at all, one that cannot be read, one that does not match, or a timestamp outside
 * the tolerance (in the past, or in the future).
 */
export type VerifyFailure = "missing_signature" | "malformed" | "mismatch" | "stale" | "future";

const encoder = new TextEncoder();

/** Text as its UTF-8 bytes; bytes as they are. */
export function bytes(x: Data): Uint8Array {
  return typeof x === "string" ? encoder.encode(x) : x;
}

/** The parts' bytes one after the other (a body is never re-encoded). */
export function concat(...parts: Data[]): Uint8Array {
  return Buffer.concat(parts.map(bytes));
}

/** Hex to bytes, or null when it is not an even run of hex digits (either case). */
export function decodeHex(s: string): Uint8Array | null {
  return /^(?:[0-9a-fA-F]{2})+$/.test(s) ? Buffer.from(s, "hex") : null;
}

/** Standard base64, or base64url with or without padding; null when it is neither. */
export function decodeBase64(s: string): Uint8Array | null {
  const body = s.replace(/={1,2}$/, "");
  const padded = body.length !== s.length;
  const std = /^[A-Za-z0-9+/]+$/.test(body);
  const url = /^[A-Za-z0-9_-]+$/.test(body);
  if (!std && !url) return null;
  if (body.length % 4 === 1 || (padded && s.length % 4 !== 0)) return null;
  return Buffer.from(body, std ? "base64" : "base64url");
}

/** A signature in its encoding; null when it is not one. */
export function decode(s: string, encoding: Encoding): Uint8Array | null {
  return encoding === "hex" ? decodeHex(s) : decodeBase64(s);
}
