// The http destination: POST the document, or each event with unwrap, to any URL with the
// Standard Webhooks headers (docs/receiving.md); https unless allow_insecure, TLS verified,
// redirects never followed, one total deadline per attempt.
import { destinationDefaults } from "../config/schema.ts";
import type { Env } from "../config/secrets.ts";
import type { SecretRef } from "../config/types.ts";
import { isReceived, post } from "./post.ts";
import {
  isReservedHeader,
  namedHeaderProblems,
  outboundHeaders,
  readSecrets,
  secretProblems,
  validHeaderName,
  wireSafe,
} from "./signing.ts";
import { outcomeForStatus } from "./status-map.ts";
import {
  configuredPace,
  type DeliveryContext,
  type Destination,
  type Idempotency,
  outcome,
  type Outcome,
  type Pace,
} from "../delivery.ts";
import type { Rate } from "../pacing.ts";
import { deliverBatch, type NamedHeader } from "./unwrap.ts";

export interface HttpDestinationOptions {
  /** The [destinations.<name>] key, e.g. "audit". */
  name: string;
  url: string;
  secret?: SecretRef;
  /** Earlier secrets still signed during a rotation, after the current one. */
  secretPrevious?: SecretRef[];
  /** Deliver without webhook-signature when there is no secret (an explicit choice; else config). */
  unsigned?: boolean;
  /** Extra static headers; never replace one hookspool sets. */
  headers?: Record<string, string>;
  allowInsecure?: boolean;
  timeoutS?: number;
  maxBodyBytes?: number;
  maxInflight?: number;
  unwrap?: boolean;
  /** Header carrying the event type (each event's with unwrap, else the batch's last). */
  eventHeader?: string;
  /** Unwrap: header carrying each event's dedup id. */
  dedupHeader?: string;
  /** The dispatcher's instance id, for per-event ids. */
  instanceId: string;
  /** Where { env = ... } secret references are read. */
  env?: Env;
  /** Its rate, from its table (none: not paced). */
  rate?: Rate | null;
}

/** Why a URL cannot be used, or null. Never quotes the URL: its query string may hold a token. */
export function urlProblem(url: string, allowInsecure: boolean): string | null {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return "url is not a valid URL";
  }
  if (parsed.protocol === "https:") return null;
  if (parsed.protocol === "http:") return allowInsecure ? null : "https required (http:// needs allow_insecure = true)";
  return "url must be http(s)";
}

export class HttpDestination implements Destination {
  readonly type = "http" as const;
  readonly name: string;
  readonly timeoutS: number;
  readonly maxBodyBytes: number;
  readonly maxInflight: number;
  readonly idempotency: Idempotency;
  readonly unwrap: boolean;
  private readonly env: Env;
  private readonly paced: Pace | null;

  constructor(private readonly opts: HttpDestinationOptions) {
    this.name = opts.name;
    const d = destinationDefaults("http");
    this.timeoutS = opts.timeoutS ?? d.timeout_s;
    this.maxBodyBytes = opts.maxBodyBytes ?? d.max_body_bytes;
    this.maxInflight = opts.maxInflight ?? d.max_inflight;
    this.unwrap = opts.unwrap ?? false;
    // Idempotency per batch, identical on every attempt; per event with unwrap.
    this.idempotency = this.unwrap ? "per-event" : "per-batch";
    this.env = opts.env ?? process.env;
    this.paced = configuredPace(opts.rate);
  }

  pace(): Pace | null {
    return this.paced;
  }

  private secretRefs(): SecretRef[] {
    if (!this.opts.secret) return [];
    return [this.opts.secret, ...(this.opts.secretPrevious ?? [])];
  }

  outcomeSecrets(): string[] {
    const secrets = readSecrets(this.secretRefs(), this.env);
    return Array.isArray(secrets) ? secrets : [];
  }

  async deliver(body: string, ctx: DeliveryContext): Promise<Outcome> {
    const bad = urlProblem(this.opts.url, this.opts.allowInsecure ?? false);
    // No request at all: an insecure or broken URL is the operator's to fix.
    if (bad)
      return outcome({
        kind: "retry",
        klass: "config",
        reason: bad.startsWith("https") ? "https required" : "bad url",
        detail: bad,
      });
    // Every delivery is signed unless the operator said otherwise: a missing secret is theirs to fix.
    if (!this.opts.secret && !this.opts.unsigned)
      return outcome({
        kind: "retry",
        klass: "config",
        reason: "no signing secret",
        detail: "no secret to sign the delivery with (set secret, or unsigned = true)",
      });
    // Read fresh on every attempt, never cached, so a rotated file is picked up without a restart.
    const secrets = readSecrets(this.secretRefs(), this.env);
    if (!Array.isArray(secrets)) return secrets;
    return deliverBatch(body, ctx, {
      instanceId: this.opts.instanceId,
      maxBodyBytes: this.maxBodyBytes,
      unwrap: this.unwrap,
      eventHeader: this.opts.eventHeader,
      dedupHeader: this.opts.dedupHeader,
      // On a paced receiver every request spends its window: what got through is not sent again.
      skipTaken: this.paced !== null,
      send: (bytes, webhookId, named) => this.send(bytes, webhookId, secrets, named, ctx),
    });
  }

  private async send(
    body: Uint8Array,
    webhookId: string,
    secrets: string[],
    named: NamedHeader[],
    ctx: DeliveryContext,
  ): Promise<Outcome> {
    const headers = outboundHeaders({
      webhookId,
      timestamp: Math.floor(ctx.clock.now()),
      body,
      secrets,
      hubSecret: secrets[0] ?? null,
      batchId: ctx.batchId,
      attempt: ctx.attempt,
      extra: this.opts.headers,
      named,
    });
    const r = await post(this.opts.url, headers, body, ctx.deadline);
    if (!isReceived(r)) return r;
    return outcomeForStatus(r.status, r.headers.get("retry-after"), "http", ctx.clock.now());
  }

  check(): string[] {
    const problems: string[] = [];
    const bad = urlProblem(this.opts.url, this.opts.allowInsecure ?? false);
    if (bad) problems.push(bad);
    if (!this.opts.secret && !this.opts.unsigned)
      problems.push(
        "no secret: every delivery carries webhook-signature; " +
          "set secret = { file = ... }, or unsigned = true to deliver unsigned",
      );
    if (this.opts.secret && this.opts.unsigned)
      problems.push("unsigned = true with a secret: the secret signs every delivery anyway; remove one of them");
    problems.push(...secretProblems(this.secretRefs(), this.env));
    if (!this.opts.secret && this.opts.secretPrevious?.length) problems.push("secret_previous is set without secret");
    for (const [name, value] of Object.entries(this.opts.headers ?? {})) {
      if (isReservedHeader(name)) problems.push(`headers.${name} is set by hookspool and is ignored`);
      else if (!validHeaderName(name)) problems.push(`headers.${name} is not a valid header name`);
      else if (!wireSafe(value))
        problems.push(`headers.${name} has a value that cannot go on the wire (CR, LF, NUL or non-Latin-1)`);
    }
    problems.push(...namedHeaderProblems({ event_header: this.opts.eventHeader, dedup_header: this.opts.dedupHeader }));
    return problems;
  }
}
