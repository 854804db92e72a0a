// The config table: every key, its type, default and meaning. The loader, the
// starter config written by `hookspool init` and docs/config.md are all made from this table,
// so the three cannot drift.

export type FieldType =
  | { kind: "string"; choices?: readonly string[] }
  | { kind: "int"; min?: number; max?: number }
  | { kind: "number"; min?: number }
  | { kind: "bool" }
  | { kind: "strings" } // an array of strings
  | { kind: "stringMap" } // a table of string values
  | { kind: "scalarMap" } // a table of string, number or boolean values
  | { kind: "secret" } // a secret reference: { file }, { env } or { env_file, key }
  | { kind: "secrets" } // secret reference, or an array of them (rotation)
  | { kind: "secretMap" } // a table of name -> secret reference
  | { kind: "table" } // a table whose shape its owner checks (a template, settings)
  | { kind: "section"; fields: Fields } // a nested table with fixed keys
  // name -> table with fixed keys (closed: an unknown key is an error)
  | { kind: "map"; entry: Fields; closed?: boolean }
  | { kind: "array"; entry: Fields }; // an array of tables with fixed keys

export interface Field {
  type: FieldType;
  /** The default applied when the key is absent (undefined: no default, the key stays unset). */
  default?: unknown;
  /** One line for the starter config and the reference. */
  doc: string;
  /** The environment variable that overrides it. */
  env?: string;
  required?: boolean;
  /** A section that stays unset when the file leaves it out (its defaults apply only once it is there). */
  optional?: boolean;
}

export type Fields = Record<string, Field>;

const str = (doc: string, def?: string, extra: Partial<Field> = {}): Field => ({
  type: { kind: "string" },
  default: def,
  doc,
  ...extra,
});
const int = (doc: string, def?: number, min = 0, max?: number): Field => ({
  type: max === undefined ? { kind: "int", min } : { kind: "int", min, max },
  default: def,
  doc,
});

/** The largest body a source may accept: 25 MiB, GitHub's largest webhook payload. */
export const MAX_SOURCE_BODY_BYTES = 25 * 1024 * 1024;
const num = (doc: string, def?: number, min = 0): Field => ({ type: { kind: "number", min }, default: def, doc });
const bool = (doc: string, def?: boolean): Field => ({ type: { kind: "bool" }, default: def, doc });

/** The four window fields; routes, sources and bobbin instances may set any of them. */
const WINDOW_OVERRIDES: Fields = {
  quiet_s: num("quiet window: seal when no event joined for this long"),
  max_s: num("maximum wait: seal when the first event is this old"),
  max_events: int("seal at this many events", undefined, 1),
  max_bytes: int("seal at this many bytes", undefined, 1),
};

export const SPAN_FIELDS: Fields = {
  quiet_s: { ...num("quiet window of the preset"), required: true },
  max_s: { ...num("maximum wait of the preset"), required: true },
};

/** A pull source: where it leases from, and as whom. */
export const PULL_SOURCE_FIELDS: Fields = {
  url: {
    ...str("the public hookspool's base URL (https unless allow_insecure; /pull/<destination>/ is added)"),
    required: true,
  },
  destination: { ...str("the upstream pull destination's name, without pull:"), required: true },
  token: { type: { kind: "secret" }, doc: "the bearer token of that pull destination", required: true },
  consumer: str("the name this consumer leases as (status upstream shows it; default: this host's name)"),
  wait_s: num("how long one lease request waits upstream for a batch (at most 60)", 30, 1),
  max: int("batches leased per request at most (at most 100)", 20, 1),
  allow_insecure: bool("allow an http:// url (a loopback test, or a tunnel that is itself encrypted)", false),
};

/** A route's stale rule (docs/receiving.md): off, or what becomes of an event older than its key delivered. */
const STALE: Field = {
  type: { kind: "string", choices: ["off", "mark", "skip"] },
  doc:
    "an event whose version (the source's template version) is older than the last version its (route, key) " +
    'delivered: "mark" delivers it with "stale": true in event_meta, "skip" leaves it out of the document ' +
    '(kept, shown and counted); "off" (the default) neither',
};

export const SOURCE_FIELDS: Fields = {
  module: str("a TypeScript module that implements the source (a code source; relative to config.toml)"),
  template: {
    type: { kind: "table" },
    doc: "template source settings: scheme, header, key, ... (see The template source)",
  },
  config: {
    type: { kind: "table" },
    doc: "a code source's own settings, the names its configKeys lists (a bobbin's source.config)",
  },
  secrets: {
    type: { kind: "secretMap" },
    doc:
      "secret name -> reference, or a rotation's list of them, newest first, an older one with " +
      'until = "<RFC 3339 time>" (see docs/operations/secrets.md)',
  },
  span: str("coalesce preset name (a key of [spans])"),
  ...WINDOW_OVERRIDES,
  expect_every_s: num(
    "open a source_silent issue after this long without an event; " +
      "0 = no expectation; unset: the source plugin's, if it has one",
  ),
  dedup_window_s: num("how long a dedup id is remembered", 86400),
  max_body_bytes: int(
    "largest accepted body for this source, at most 25 MiB (default: intake.max_body_bytes)",
    undefined,
    1,
    MAX_SOURCE_BODY_BYTES,
  ),
  store_raw: bool("keep original bodies (default: spool.store_raw)"),
  keep_headers: {
    type: { kind: "strings" },
    doc: "request headers stored with each event and delivered in event_meta",
  },
  allow_sensitive_keep_headers: bool(
    "allow keep_headers that look like credentials (Authorization, Cookie, names with key, token or secret)",
    false,
  ),
  auth_headers: { type: { kind: "strings" }, doc: "signature/token headers: never stored" },
  action: str("default destination for events no route claims"),
  event_header: str("header that carries the event type on delivery (e.g. X-GitHub-Event)"),
  sender_retries: bool("whether the sender retries a failed delivery (documentation only)"),
  kind: {
    type: { kind: "string", choices: ["webhook", "poll"] },
    doc: "webhook (default) or poll (bobbin expansion only)",
  },
  pull: {
    type: { kind: "section", fields: PULL_SOURCE_FIELDS },
    optional: true,
    doc: "take this source's events from another hookspool's pull destination instead of webhooks",
  },
  every_s: num("poll interval (poll sources only)"),
  jitter_s: num("poll jitter (poll sources only)"),
  stale: { ...STALE, doc: `its routes' stale rule, for a route that sets none (the implicit route's): ${STALE.doc}` },
};

export const ROUTE_FIELDS: Fields = {
  name: { ...str("route name, unique"), required: true },
  source: { ...str("the source this route takes events from"), required: true },
  match: { type: { kind: "scalarMap" }, doc: "attrs the event must have (a subset match)", default: {} },
  destination: str("where matching events go (default: the source's action)"),
  tee: bool("receive a copy without claiming the event", false),
  expose: {
    type: { kind: "strings" },
    doc:
      'deliver only these payload paths, keys joined by dots ("pull_request.title"); ' +
      '":untrusted" at the end delivers the value as {"untrusted": "<text>"}; ' +
      "unset: the whole payload (see docs/receiving.md)",
  },
  stale: { ...STALE, doc: `${STALE.doc}; unset: the source's` },
  ...WINDOW_OVERRIDES,
};

/** A destination's types, as a name or table resolves them. */
export type DestinationType = "hermes" | "script" | "http" | "module" | "pull";

const HERMES_FIELDS: Fields = {
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

export const BOBBIN_INSTANCE_FIELDS: Fields = {
  bobbin: str("the bobbin, <vendor>.<product> (required)"),
  secrets: {
    type: { kind: "secretMap" },
    doc:
      "secret name -> reference, or a rotation's list of them, newest first, an older one with " +
      'until = "<RFC 3339 time>" (see docs/operations/secrets.md)',
  },
  settings: { type: { kind: "table" }, doc: "typed settings of the bobbin" },
  outputs: { type: { kind: "stringMap" }, doc: 'output event type (or "*") -> destination' },
  expose: {
    type: { kind: "table" },
    doc:
      "output (a key of outputs) -> the payload paths its events deliver, " +
      'as a route\'s expose: { "*" = ["action", "title:untrusted"] }',
  },
  stale: { ...STALE, doc: `the stale rule of the instance's routes (its source's): ${STALE.doc}` },
  expect: bool("apply the manifest's expect_every_s"),
  span: str("coalesce preset name"),
  ...WINDOW_OVERRIDES,
  expect_every_s: num("liveness expectation override"),
  dedup_window_s: num("dedup window override"),
  max_body_bytes: int("body cap override", undefined, 1),
  timeout_s: num("processor time limit"),
  state_dir: str("processor state directory"),
  every_s: num("poll interval override"),
  jitter_s: num("poll jitter override"),
  health: {
    type: { kind: "table" },
    doc:
      "turns on the bobbin's health probe: its args' values, and api_url to replace its API's URL " +
      "(see docs/operations/probes.md)",
  },
  probe_every_s: num("how often the health probe asks the provider (default 3600, at least 60)"),
};

export const DEFAULT_SPANS: Record<string, { quiet_s: number; max_s: number }> = {
  burst: { quiet_s: 120, max_s: 600 },
  mail: { quiet_s: 30, max_s: 120 },
  calendar: { quiet_s: 45, max_s: 180 },
  sync: { quiet_s: 60, max_s: 300 },
  meeting: { quiet_s: 60, max_s: 900 },
  immediate: { quiet_s: 0, max_s: 0 },
};

/** The whole file: sections with fixed keys, then the named tables. */
export const CONFIG_FIELDS: Fields = {
  spool: {
    doc: "where the spool lives",
    type: {
      kind: "section",
      fields: {
        home: str("state directory (config.toml, spool.db, dispatch.lock)", "/var/lib/hookspool", {
          env: "HOOKSPOOL_HOME",
        }),
        db: str("database file, relative to home", "spool.db", { env: "HOOKSPOOL_DB" }),
        store_raw: bool(
          "keep original bodies for replay and verification tests (one equal to its payload is stored once)",
          true,
        ),
        inline_max_bytes: int(
          "a body larger than this is streamed to a content-addressed file under <home>/bodies/ " +
            "and the event row refers to it",
          262144,
          1,
        ),
        bobbin_path: {
          type: { kind: "strings" },
          default: [],
          doc: "extra bobbin directories, searched after the built-ins",
        },
        backend: {
          type: { kind: "string", choices: ["sqlite", "postgres"] },
          default: "sqlite",
          doc: "sqlite (one host, spool.db) or postgres (several intakes and dispatchers on one database)",
          env: "HOOKSPOOL_BACKEND",
        },
        url: {
          type: { kind: "secret" },
          doc:
            "postgres: the connection URL, a secret reference (it may hold a password), e.g. " +
            '{ env = "HOOKSPOOL_PG_URL" }',
        },
        pool: int(
          "postgres: connections per process (unset: dispatch.parallel + 2 for dispatch and run, one per worker " +
            "besides the tick's and the outcomes'; 4 for the intake and the CLI)",
          undefined,
          1,
        ),
      },
    },
  },
  intake: {
    doc: "the HTTP intake",
    type: {
      kind: "section",
      fields: {
        listen: str("address to bind: host:port on loopback, or unix:/path", "127.0.0.1:8650"),
        allow_non_loopback: bool("bind a non-loopback address (the reverse proxy should own the network)", false),
        // 768 KiB: the default batch max_bytes, so one event always fits a batch and the
        // defaults pass hookspool check (a larger body needs max_bytes and the receiver's cap raised).
        max_body_bytes: int(
          "largest accepted request body, at most 25 MiB (one above spool.inline_max_bytes is kept in a file)",
          786432,
          1,
          MAX_SOURCE_BODY_BYTES,
        ),
        busy_timeout_s: num("wait this long for a busy database, then answer 503", 10),
        threads: int("accepted for compatibility; Bun serves on one event loop", 16),
      },
    },
  },
  dispatch: {
    doc: "the dispatcher",
    type: {
      kind: "section",
      fields: {
        parallel: int("deliveries in flight at once, overall", 4, 1),
        poll_s: num(
          "the longest the dispatcher waits between ticks; " +
            "it ticks sooner when a delivery ends, a window ends, a retry falls due, or an event is committed",
          1.0,
        ),
        heartbeat_s: num("heartbeat and clock-guard interval", 10),
        // At least the 5 s the worker keeps between its deadline and the lease end.
        lease_grace_s: num("lease = timeout_s + this; at least 5 (the worker stops 5 s before its lease ends)", 60, 5),
        max_attempts: int("counted (batch-class) attempts before a batch is dead", 64, 1),
        backoff_base_s: num("first backoff step", 15),
        backoff_cap_s: num("longest backoff step", 300),
        breaker: {
          doc: "circuit breaker per destination",
          type: {
            kind: "section",
            fields: {
              trip_after: int("consecutive transport failures that open the breaker", 3, 1),
              cooldown_initial_s: num("first cooldown", 30),
              cooldown_max_s: num("longest cooldown (doubles per re-trip)", 600),
            },
          },
        },
      },
    },
  },
  coalesce: {
    doc: "defaults for every window field; sources and routes override per field",
    type: {
      kind: "section",
      fields: {
        quiet_s: num("quiet window", 0),
        max_s: num("maximum wait", 0),
        max_events: int("events per batch", 500, 1),
        max_bytes: int(
          "bytes per batch: each event's payload and event_meta as the document carries them (check: " +
            "<= 0.75 x destination max_body_bytes)",
          786432,
          1,
        ),
      },
    },
  },
  limits: {
    doc: "backpressure",
    type: { kind: "section", fields: { min_free_bytes: int("answer 503 below this much free disk", 536870912) } },
  },
  retention: {
    doc: "how long finished work is kept (dead batches: forever)",
    type: {
      kind: "section",
      fields: {
        delivered_days: num("delivered batches, their events and raw bodies", 7),
        attempts_days: num("attempt rows", 30),
        dropped_days: num("dropped batches", 7),
        issues_days: num("resolved and ignored issues", 90),
      },
    },
  },
  alerts: {
    doc: "outbound alerts for issues",
    type: {
      kind: "section",
      fields: {
        argv: {
          type: { kind: "strings" },
          default: ["logger", "-t", "hookspool"],
          doc: "command; the alert text is appended as the last argument",
        },
        dry: bool("record alerts without sending (HOOKSPOOL_ALERT_DRY=1 too)", false),
        rate_limit_s: num("at most one alert per kind in this interval", 1800),
        timeout_s: num("the alert command's time limit", 60),
      },
    },
  },
  hermes: {
    doc: "the Hermes Agent gateway",
    type: {
      kind: "section",
      fields: HERMES_FIELDS,
    },
  },
  dashboard: {
    doc: "the dashboard: hookspool dashboard, or inside run and dispatch when listen is set here",
    type: {
      kind: "section",
      fields: {
        listen: str(
          "address of the dashboard's own listener (never the intake's); empty: not inside run or dispatch",
          "",
        ),
        allow_non_loopback: bool(
          "bind a non-loopback address (the page is the spool's whole picture: keep it on loopback)",
          false,
        ),
        actions: bool("enable the buttons that change state (replay, retry, pause, resume, issue verbs)", false),
      },
    },
  },
  spans: { doc: "coalesce presets (quiet_s, max_s); add your own", type: { kind: "map", entry: SPAN_FIELDS } },
  sources: { doc: "webhook sources", type: { kind: "map", entry: SOURCE_FIELDS } },
  routes: { doc: "routes: (source, match) -> destination", type: { kind: "array", entry: ROUTE_FIELDS } },
  destinations: { doc: "destinations", type: { kind: "map", entry: DESTINATION_FIELDS } },
  bobbins: {
    doc:
      "bobbin instances: one service each, from a bobbin (service plugin); migrate builds a payload index of " +
      "each path its manifest lists in indexed, for --where",
    type: { kind: "map", entry: BOBBIN_INSTANCE_FIELDS, closed: true },
  },
};
