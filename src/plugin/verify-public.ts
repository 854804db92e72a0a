// Public-key signatures: the configured "secret" is the sender's public key (Discord's Ed25519,
// SendGrid's ECDSA P-256, PayPal's RSA certificate), so nothing secret is compared here; a key
// that does not parse fails closed. Part of the plugin API through verify.ts.
import { createPublicKey, type KeyObject, verify as verifySignature } from "node:crypto";
import {
  bytes,
  type Data,
  decode,
  decodeBase64,
  decodeHex,
  type Encoding,
  type VerifyFailure,
} from "./verify-codec.ts";

// An Ed25519 public key as 32 raw bytes becomes a key object through this fixed SPKI header.
const ED25519_SPKI_PREFIX = Buffer.from("302a300506032b6570032100", "hex");

/** A public key from its text: PEM, or hex / base64 of the raw key (Ed25519, 32 bytes) or of SPKI DER. */
function publicKeyOf(text: string, kind: "ed25519" | "ec"): KeyObject | null {
  const t = text.trim();
  try {
    if (t.startsWith("-----BEGIN")) return createPublicKey(t);
    const raw = decodeHex(t) ?? decodeBase64(t);
    if (!raw) return null;
    const der = kind === "ed25519" && raw.length === 32 ? Buffer.concat([ED25519_SPKI_PREFIX, raw]) : Buffer.from(raw);
    return createPublicKey({ key: der, format: "der", type: "spki" });
  } catch {
    return null;
  }
}

/**
 * Null when `signature` (hex by default: Discord's X-Signature-Ed25519) is the Ed25519 signature
 * of message under the public key, else why not. A key that does not parse fails closed
 * ("mismatch": the sender is not at fault, and nothing verifies until the key is fixed).
 */
export function ed25519Why(
  signature: string | null,
  publicKey: string,
  message: Data,
  opts: { encoding?: Encoding } = {},
): VerifyFailure | null {
  if (signature === null) return "missing_signature";
  const sig = decode(signature.trim(), opts.encoding ?? "hex");
  if (sig === null || sig.length !== 64) return "malformed";
  const key = publicKeyOf(publicKey, "ed25519");
  if (key?.asymmetricKeyType !== "ed25519") return "mismatch";
  try {
    return verifySignature(null, bytes(message), key, sig) ? null : "mismatch";
  } catch {
    return "mismatch";
  }
}

/**
 * Null when `signature` (base64 DER by default: SendGrid's signed event webhook) is an ECDSA
 * P-256 / SHA-256 signature of message under the public key (base64 SPKI, as SendGrid shows it,
 * or PEM), else why not.
 */
export function ecdsaP256Why(
  signature: string | null,
  publicKey: string,
  message: Data,
  opts: { encoding?: Encoding } = {},
): VerifyFailure | null {
  if (signature === null) return "missing_signature";
  const sig = decode(signature.trim(), opts.encoding ?? "base64");
  if (sig === null) return "malformed";
  const key = publicKeyOf(publicKey, "ec");
  if (key?.asymmetricKeyType !== "ec" || key.asymmetricKeyDetails?.namedCurve !== "prime256v1") return "mismatch";
  try {
    return verifySignature("sha256", bytes(message), { key, dsaEncoding: "der" }, sig) ? null : "mismatch";
  } catch {
    return "mismatch";
  }
}

/**
 * Null when `signature` (base64 by default: PayPal's PAYPAL-TRANSMISSION-SIG) is an RSASSA-PKCS1-v1_5
 * signature with SHA-256 (Java's SHA256withRSA) of message under the public key, else why not.
 * The key is a KeyObject (a certificate's: certificateKey) or PEM text; one that is not RSA, or
 * shorter than 2048 bits, fails closed ("mismatch").
 */
export function rsaSha256Why(
  signature: string | null,
  publicKey: KeyObject | string,
  message: Data,
  opts: { encoding?: Encoding } = {},
): VerifyFailure | null {
  if (signature === null) return "missing_signature";
  const sig = decode(signature.trim(), opts.encoding ?? "base64");
  if (sig === null || sig.length === 0 || sig.length > 1024) return "malformed";
  let key: KeyObject;
  try {
    key = typeof publicKey === "string" ? createPublicKey(publicKey.trim()) : publicKey;
  } catch {
    return "mismatch";
  }
  if (key.asymmetricKeyType !== "rsa" || (key.asymmetricKeyDetails?.modulusLength ?? 0) < 2048) return "mismatch";
  try {
    return verifySignature("sha256", bytes(message), key, sig) ? null : "mismatch";
  } catch {
    return "mismatch";
  }
}

/** The CRC-32 (IEEE, zlib's) of data as an unsigned decimal: the last part of PayPal's signed message. */
export function crc32Decimal(data: Data): string {
  return String(Bun.hash.crc32(bytes(data)) >>> 0);
}
