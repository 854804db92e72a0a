// paypal.webhooks: the webhooks PayPal's REST APIs send to a webhook's listener URL (payments,
// refunds, disputes, subscriptions, ...). A code source, because PayPal signs with its own key
// pair, not a shared secret:
//
// - PAYPAL-TRANSMISSION-SIG is base64 RSA SHA-256 (PAYPAL-AUTH-ALGO SHA256withRSA) over
//   "<PAYPAL-TRANSMISSION-ID>|<PAYPAL-TRANSMISSION-TIME>|<webhook_id>|<CRC-32 of the body, decimal>",
//   under the public key of the X.509 certificate at PAYPAL-CERT-URL. The webhook id is the
//   instance's setting: a delivery signed for another webhook does not verify.
// - The certificate URL comes from the request, so it is checked before anything is fetched:
//   https, no port, credentials, query or fragment, one of PayPal's API hosts and the path
//   /v1/notifications/certs/<name>. Anything else is refused without a request.
// - Certificates are fetched through one guarded cache per instance (by URL, at most 64): a
//   certificate is kept and its validity dates checked at each use; a URL PayPal answers 404 for
//   is remembered as unknown for 10 minutes; and the cache fetches at most once a minute, so a
//   flood of made-up certificate URLs on PayPal's host costs one request a minute.
// - PAYPAL-TRANSMISSION-TIME must be within 300 s of now, either way (PayPal documents no
//   tolerance; README.md says why 300 s).
// - One batch per resource (resource.id); the event type is event_type; the dedup id is the
//   event's id, which PayPal keeps when it sends an event again.
import { getText } from "../../../src/plugin/get-path.ts";
import {
  type CertificateKey,
  certificateKey,
  certificateValidAt,
  KeyCache,
  sharedKeyCache,
} from "../../../src/plugin/keys.ts";
import {
  type Attrs,
  BadPayload,
  defineSource,
  type HookRequest,
  type SourcePlugin,
  type VerifyFailure,
} from "../../../src/plugin/types.ts";
import { crc32Decimal, rsaSha256Why, timestampWhy } from "../../../src/plugin/verify.ts";
import { createHttp, type Http } from "../../../src/net/http.ts";
import { documentFetcher } from "../../../src/net/keys.ts";

const TRANSMISSION_ID = "PAYPAL-TRANSMISSION-ID";
const TRANSMISSION_TIME = "PAYPAL-TRANSMISSION-TIME";
const TRANSMISSION_SIG = "PAYPAL-TRANSMISSION-SIG";
const CERT_URL = "PAYPAL-CERT-URL";
const AUTH_ALGO = "PAYPAL-AUTH-ALGO";
const TOLERANCE_S = 300;

/** PayPal's REST API hosts, live and sandbox (api-m is the host PayPal's current pages name). */
export const CERT_HOSTS: ReadonlySet<string> = new Set([
  "api.paypal.com",
  "api-m.paypal.com",
  "api.sandbox.paypal.com",
  "api-m.sandbox.paypal.com",
]);
const CERT_PATH = /^\/v1\/notifications\/certs\/[A-Za-z0-9._-]{1,128}$/;

/**
 * The certificate URL as it is fetched and cached, or null when it is not one of PayPal's: https
 * on a host of CERT_HOSTS, the default port, no credentials, query or fragment, and a path under
 * /v1/notifications/certs/. Checked before any request, so a forged URL reaches no network.
 */
export function certUrlOf(value: string | null): string | null {
  if (value === null || value.length === 0 || value.length > 500) return null;
  let u: URL;
  try {
    u = new URL(value.trim());
  } catch {
    return null;
  }
  if (u.protocol !== "https:" || u.username !== "" || u.password !== "" || u.port !== "") return null;
  if (u.search !== "" || u.hash !== "" || !CERT_HOSTS.has(u.hostname)) return null;
  if (!CERT_PATH.test(u.pathname)) return null;
  return `https://${u.hostname}${u.pathname}`;
}

/** An RFC 3339 time (PAYPAL-TRANSMISSION-TIME, "2026-12-04T00:00:00Z") as Unix seconds, or null. */
function rfc3339(value: string): number | null {
  if (!/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?(?:Z|[+-]\d{2}:\d{2})$/.test(value)) return null;
  const ms = Date.parse(value);
  return Number.isFinite(ms) ? ms / 1000 : null;
}

/** The webhook id setting: PayPal's ids are letters and digits (17 of them today). */
function webhookIdOf(config: Readonly<Record<string, unknown>>): string {
  const id = config.webhook_id ?? "";
  if (typeof id !== "string" || !/^[A-Za-z0-9]{1,50}$/.test(id))
    throw new Error(
      "webhook_id must be the PayPal webhook's id (letters and digits, as the app's Webhooks list shows it)",
    );
  return id;
}

/** The time the cache's clock reads: the intake's (req.now) of the request that asked last. */
interface Reading {
  now: number;
}
const caches = new Map<string, { reading: Reading; cache: KeyCache<CertificateKey> }>();

function cacheFor(webhookId: string): { reading: Reading; cache: KeyCache<CertificateKey> } {
  const name = `paypal:${webhookId}`;
  const known = caches.get(name);
  if (known) return known;
  const base = createHttp();
  // A certificate fetch holds up the webhook that needed it: a short timeout, a certificate's size.
  const http: Http = {
    ...base,
    request: (method, url, opts = {}) => base.request(method, url, { ...opts, timeoutS: 5, maxBytes: 64 * 1024 }),
  };
  const reading: Reading = { now: 0 };
  const fetchKey = documentFetcher({ http, parse: certificateKey });
  const cache = sharedKeyCache(
    name,
    () =>
      new KeyCache<CertificateKey>({
        fetchKey,
        clock: { now: () => reading.now },
        minFetchIntervalS: 60,
        negativeTtlS: 600,
        maxKeys: 64,
      }),
  );
  const entry = { reading, cache };
  caches.set(name, entry);
  return entry;
}

async function verifyWith(webhookId: string, req: HookRequest): Promise<true | VerifyFailure> {
  const id = req.header(TRANSMISSION_ID);
  const time = req.header(TRANSMISSION_TIME);
  const sig = req.header(TRANSMISSION_SIG);
  const certUrl = req.header(CERT_URL);
  const algo = req.header(AUTH_ALGO);
  if (!id || !time || !sig || !certUrl || !algo) return "missing_signature";
  // The id and time go into the signed message as sent: no "|" and no control character in them.
  if (!/^[A-Za-z0-9_-]{1,64}$/.test(id) || algo.trim() !== "SHA256withRSA") return "malformed";
  const at = rfc3339(time);
  if (at === null) return "malformed";
  const when = timestampWhy(at, req.now, TOLERANCE_S);
  if (when) return when;
  const url = certUrlOf(certUrl);
  if (url === null) return "mismatch";
  const { reading, cache } = cacheFor(webhookId);
  reading.now = req.now;
  const cert = await cache.key(url);
  if (!cert || !certificateValidAt(cert, req.now)) return "mismatch";
  const message = `${id}|${time}|${webhookId}|${crc32Decimal(req.body)}`;
  return rsaSha256Why(sig, cert.publicKey, message) ?? true;
}

function plugin(config: Readonly<Record<string, unknown>>): SourcePlugin {
  // The manifest's required setting: a config without it never reaches here; the default plugin
  // (no config) verifies nothing.
  const webhookId = Object.keys(config).length === 0 ? null : webhookIdOf(config);
  return defineSource({
    authHeaders: [TRANSMISSION_SIG],
    span: "burst",
    // PayPal retries a delivery that got no 2xx up to 25 times over 3 days (README.md).
    senderRetries: true,
    configKeys: ["webhook_id"],
    withConfig: (c: Readonly<Record<string, unknown>>) => plugin(c),

    verify: (req: HookRequest) => (webhookId === null ? "mismatch" : verifyWith(webhookId, req)),

    key(payload: unknown) {
      const id = getText(payload, "resource.id");
      if (!id) throw new BadPayload("no resource.id (the resource the event is about)", "key_missing");
      return id;
    },

    eventType: (payload: unknown) => getText(payload, "event_type") ?? "",

    // PayPal sends an event again under a new transmission id, with the same event id.
    dedupId: (payload: unknown) => getText(payload, "id"),

    attrs(payload: unknown): Attrs {
      const type = getText(payload, "resource_type");
      return type ? { resource_type: type } : {};
    },
  });
}

export default plugin({});
