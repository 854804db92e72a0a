// The config table: every key, its type, default and meaning. The loader, the
// starter config written by `hookspool init` and docs/config.md are all made from this table,
// so the three cannot drift.
import { DESTINATION_FIELDS, HERMES_FIELDS } from "./schema-destinations.ts";
import { bool, type Field, type Fields, int, num, str } from "./schema-field.ts";

export type { Field, Fields, FieldType } from "./schema-field.ts";
export {
  DESTINATION_FIELDS,
  type DestinationType,
  destinationDefaults,
  type HermesLimits,
} from "./schema-destinations.ts";

/** The largest body a source may accept: 25 MiB, GitHub's largest webhook payload. */
export const MAX_SOURCE_BODY_BYTES = 25 * 1024 * 1024;

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
