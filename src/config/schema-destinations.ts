// The config table's destinations: a [destinations.<name>] table's keys, the [hermes] section's,
// and what each destination type has by default when its table does not say.
import { bool, type Fields, int, num, str } from "./schema-field.ts";

/** A destination's types, as a name or table resolves them. */
export type DestinationType = "hermes" | "script" | "http" | "module" | "pull";

export const HERMES_FIELDS: Fields = {
  base_url: str("gateway URL", "http://127.0.0.1:8644"),
  subscriptions_path: str("the gateway's webhook subscriptions file", "~/.hermes/webhook_subscriptions.json"),
  timeout_s: num("one delivery's time limit", 30),
  max_body_bytes: int("must match the gateway's webhook max_body_bytes", 1048576, 1),
  legacy_signature: bool("also send X-Hub-Signature-256", true),
  rate_limit: int(
    "the gateway's webhook rate_limit: requests it accepts per route in any 60 s; " +
      "hermes destinations are paced to it (a route's own rate_limit in the subscriptions file wins, " +
      "a destination's rate wins over both)",
    30,
    1,
  ),
};

/** The [hermes] limits a hermes destination follows when its own table sets none. */
export interface HermesLimits {
  timeout_s: number;
  max_body_bytes: number;
}

const HERMES_LIMITS: HermesLimits = {
  timeout_s: HERMES_FIELDS.timeout_s.default as number,
  max_body_bytes: HERMES_FIELDS.max_body_bytes.default as number,
};

/** Per type, when a destination's table does not say: a script may run long and take any body. */
const TYPE_DEFAULTS: Record<
  Exclude<DestinationType, "hermes">,
  { timeout_s: number; max_inflight: number; max_body_bytes: number }
> = {
  http: { timeout_s: 30, max_inflight: 4, max_body_bytes: 1048576 },
  script: { timeout_s: 300, max_inflight: 1, max_body_bytes: Number.POSITIVE_INFINITY },
  module: { timeout_s: 30, max_inflight: 1, max_body_bytes: Number.POSITIVE_INFINITY },
  // A pull destination's timeout_s is how long a consumer holds a lease before acking it.
  pull: { timeout_s: 60, max_inflight: 1, max_body_bytes: Number.POSITIVE_INFINITY },
};
const HERMES_INFLIGHT = 2;

/** The timeout_s, max_inflight and max_body_bytes a destination of `type` has by default. */
export function destinationDefaults(
  type: DestinationType,
  hermes: HermesLimits = HERMES_LIMITS,
): { timeout_s: number; max_inflight: number; max_body_bytes: number } {
  if (type === "hermes")
    return { timeout_s: hermes.timeout_s, max_inflight: HERMES_INFLIGHT, max_body_bytes: hermes.max_body_bytes };
  return TYPE_DEFAULTS[type];
}

const perType = (key: "timeout_s" | "max_inflight" | "max_body_bytes", hermes: string) =>
  `default: hermes ${hermes}; http ${TYPE_DEFAULTS.http[key]}; ` +
  `script ${Number.isFinite(TYPE_DEFAULTS.script[key]) ? TYPE_DEFAULTS.script[key] : "unbounded"}` +
  (key === "timeout_s" ? `; pull ${TYPE_DEFAULTS.pull.timeout_s}, a consumer's lease` : "");

export const DESTINATION_FIELDS: Fields = {
  type: {
    type: { kind: "string", choices: ["http", "hermes", "script", "pull"] },
    doc: "http, hermes, script or pull (inferred from a hermes:/script:/pull: name)",
  },
  module: str("a module implementing a custom destination type (pkg:ClassName)"),
  url: str("http: the receiver's URL (https unless allow_insecure)"),
  secret: { type: { kind: "secret" }, doc: "http: the signing secret (whsec_... is base64-decoded)" },
  secret_previous: { type: { kind: "secrets" }, doc: "http: earlier secrets still signed during a rotation" },
  unsigned: bool("http: deliver without webhook-signature; without it an http destination needs a secret", false),
  headers: { type: { kind: "stringMap" }, doc: "http: extra static headers" },
  allow_insecure: bool("http: allow http:// URLs", false),
  max_body_bytes: int(
    `largest body the receiver accepts (${perType("max_body_bytes", "[hermes] max_body_bytes")})`,
    undefined,
    1,
  ),
  large: {
    type: { kind: "string", choices: ["reference", "refuse"] },
    doc:
      "http: a batch over max_body_bytes because of a body kept in a file: reference (the event carries " +
      "body_url, a signed, expiring URL on the intake) or refuse (dead, reason config)",
  },
  timeout_s: num(`one attempt's time limit (${perType("timeout_s", "[hermes] timeout_s")})`),
  max_inflight: int(`deliveries in flight at once (${perType("max_inflight", String(HERMES_INFLIGHT))})`, undefined, 1),
  unwrap: bool(
    "http/hermes: one request per event, its body the payload exactly as received, instead of the batch document",
    false,
  ),
  event_header: str(
    "http/hermes: header carrying the event type (each event's with unwrap, " +
      "else the batch's last); hermes falls back to the source's",
  ),
  dedup_header: str("unwrap: header carrying each event's dedup id"),
  argv: { type: { kind: "strings" }, doc: "script: the command and its arguments" },
  cwd: str("script: working directory"),
  env_file: str("script: KEY=VALUE file merged into the environment"),
  env: { type: { kind: "stringMap" }, doc: "script: extra environment (names ^[A-Z][A-Z0-9_]*$)" },
  state_dir: str("script: a private directory for the script's own state"),
  processor: str("script: a bobbin instance whose processor runs (replaces argv)"),
  rate: str(
    'at most this many requests in any rolling window, as N/<window>: "30/min", "5/s", "1000/h", "30/10s"; ' +
      '"none" for no pacing (default: hermes the gateway\'s rate_limit per minute, others none)',
  ),
  ignored_issue_after: int(
    "hermes: open an issue after this many ignored answers in a row, " +
      "0 never (default 5; an unwrap destination never opens one)",
    undefined,
    0,
  ),
  outcome: {
    type: { kind: "string", choices: ["answer", "await"] },
    doc:
      "answer (default): a 2xx ends the batch; await: a 2xx makes it awaiting, holding its key, " +
      "until the receiver reports the run's outcome (hookspool outcome, " +
      "or a signed POST /outcomes/<webhook-id>)",
  },
  outcome_timeout_s: num(
    "await: how long an awaiting batch waits for its outcome before on_timeout applies (default 900)",
    undefined,
    1,
  ),
  on_timeout: {
    type: { kind: "string", choices: ["retry", "delivered"] },
    doc:
      "await: what an overdue outcome does: retry (default: deliver again, " +
      "a counted attempt) or delivered (take the 2xx as done)",
  },
  budget: str(
    "a spend limit: at most this many batches delivered in any rolling window, " +
      'as N/<window> ("20/h", "100/24h"); over it a batch waits sealed, in order (default: none)',
  ),
  key_budget: str(
    'the same per (route, key): at most N of one key\'s batches delivered in the window ("3/h"); ' +
      "its later events keep coalescing meanwhile (default: none)",
  ),
  token: {
    type: { kind: "secrets" },
    doc: "pull: the bearer token its consumers send (a list during a rotation; required for pull)",
  },
  api_rate: str('pull: requests its pull API takes at most, as N/<window> (default "600/min")'),
};
