// The typed shape of a loaded config.toml. Keys keep the file's snake_case.
import type { ProbeConfig } from "./probes.ts";

export type SecretRef = { file: string } | { env: string } | { env_file: string; key: string };

/** A reference in a rotation's list: ignored from `until` on (epoch seconds; absent: never). */
export type TimedSecretRef = SecretRef & { until?: number };

/** A source's secret: one reference, or a rotation's list, newest first. */
export type SourceSecret = SecretRef | TimedSecretRef[];

/** The four window fields a batch is opened with. */
export interface Window {
  quiet_s: number;
  max_s: number;
  max_events: number;
  max_bytes: number;
}

export type PartialWindow = Partial<Window>;

export interface SourceConfig extends PartialWindow {
  module?: string;
  template?: Record<string, unknown>;
  /** A code source's own settings: the names its configKeys lists. */
  config?: Record<string, unknown>;
  secrets?: Record<string, SourceSecret>;
  span?: string;
  /** Unset: the source plugin's expectation, if any (see expectEvery). */
  expect_every_s?: number;
  dedup_window_s: number;
  max_body_bytes?: number;
  store_raw?: boolean;
  keep_headers?: string[];
  allow_sensitive_keep_headers: boolean;
  auth_headers?: string[];
  action?: string;
  event_header?: string;
  sender_retries?: boolean;
  kind?: "webhook" | "poll";
  /** A pull source: its events come from another hookspool's pull destination. */
  pull?: PullSourceConfig;
  every_s?: number;
  jitter_s?: number;
  /** The implicit route's expose: set only by a bobbin instance's expansion, never by the file. */
  expose?: string[];
  /** The payload paths its bobbin has indexed (manifest `indexed`): set only by the expansion. */
  indexed?: string[];
  /** Its routes' stale rule when a route sets none (the implicit route's); see docs/receiving.md. */
  stale?: StaleRule;
}

/** What a route does with an event older than the last version its (route, key) delivered. */
export type StaleRule = "off" | "mark" | "skip";

export interface PullSourceConfig {
  url: string;
  destination: string;
  token: SecretRef;
  consumer?: string;
  wait_s: number;
  max: number;
  allow_insecure: boolean;
}

export interface RouteConfig extends PartialWindow {
  name: string;
  source: string;
  match: Record<string, string | number | boolean>;
  destination?: string;
  tee: boolean;
  /** The payload paths its copies deliver (absent: the whole payload); see expose.ts. */
  expose?: string[];
  /** Unset: its source's. */
  stale?: StaleRule;
  /** The bobbin instance whose outputs made this route (absent: the file's own). */
  instance?: string;
}

export interface DestinationConfig {
  type?: "http" | "hermes" | "script" | "pull";
  module?: string;
  url?: string;
  secret?: SecretRef;
  secret_previous?: SecretRef | SecretRef[];
  unsigned: boolean;
  headers?: Record<string, string>;
  allow_insecure: boolean;
  max_body_bytes?: number;
  /** http: a body kept in a file that does not fit max_body_bytes goes by reference, or is refused. */
  large?: "reference" | "refuse";
  timeout_s?: number;
  max_inflight?: number;
  unwrap: boolean;
  event_header?: string;
  dedup_header?: string;
  argv?: string[];
  cwd?: string;
  env_file?: string;
  env?: Record<string, string>;
  state_dir?: string;
  processor?: string;
  rate?: string;
  ignored_issue_after?: number;
  outcome?: "answer" | "await";
  outcome_timeout_s?: number;
  on_timeout?: "retry" | "delivered";
  budget?: string;
  key_budget?: string;
  /** pull: its consumers' bearer token (several during a rotation). */
  token?: SecretRef | SecretRef[];
  api_rate?: string;
}

export interface BobbinInstanceConfig extends PartialWindow {
  /** Required; a missing one is reported by the expansion, with the bobbin it probably meant. */
  bobbin?: string;
  secrets?: Record<string, SourceSecret>;
  settings?: Record<string, unknown>;
  outputs?: Record<string, string>;
  /** Output (a key of outputs) -> the paths its events deliver, as a route's expose. */
  expose?: Record<string, string[]>;
  /** The stale rule of its source (so of its routes). */
  stale?: StaleRule;
  expect?: boolean;
  span?: string;
  expect_every_s?: number;
  dedup_window_s?: number;
  max_body_bytes?: number;
  timeout_s?: number;
  state_dir?: string;
  every_s?: number;
  jitter_s?: number;
  /** The health probe's values (the bobbin's [health] args, api_url). */
  health?: Record<string, unknown>;
  probe_every_s?: number;
}

export interface Config {
  spool: {
    home: string;
    db: string;
    store_raw: boolean;
    /** A body above this many bytes is kept in a file under <home>/bodies/. */
    inline_max_bytes: number;
    bobbin_path: string[];
    backend: "sqlite" | "postgres";
    url?: SecretRef;
    /** Unset: sized by the process (store/open.ts poolSize). */
    pool?: number;
  };
  dashboard: { listen: string; allow_non_loopback: boolean; actions: boolean };
  intake: {
    listen: string;
    allow_non_loopback: boolean;
    max_body_bytes: number;
    busy_timeout_s: number;
    threads: number;
  };
  dispatch: {
    parallel: number;
    poll_s: number;
    heartbeat_s: number;
    lease_grace_s: number;
    max_attempts: number;
    backoff_base_s: number;
    backoff_cap_s: number;
    breaker: { trip_after: number; cooldown_initial_s: number; cooldown_max_s: number };
  };
  coalesce: Window;
  limits: { min_free_bytes: number };
  retention: { delivered_days: number; attempts_days: number; dropped_days: number; issues_days: number };
  alerts: { argv: string[]; dry: boolean; rate_limit_s: number; timeout_s: number };
  hermes: {
    base_url: string;
    subscriptions_path: string;
    timeout_s: number;
    max_body_bytes: number;
    legacy_signature: boolean;
    rate_limit: number;
  };
  spans: Record<string, { quiet_s: number; max_s: number }>;
  sources: Record<string, SourceConfig>;
  routes: RouteConfig[];
  destinations: Record<string, DestinationConfig>;
  bobbins: Record<string, BobbinInstanceConfig>;
  /** Set by the expansion: each instance's health probe, for maintenance (not a key of the file). */
  probes?: Record<string, ProbeConfig>;
}

/** One problem found while loading or checking a config. */
export interface ConfigProblem {
  level: "error" | "warning";
  /** The key path, e.g. routes[2].match or sources.github.span. */
  key: string;
  message: string;
  hint?: string;
}

/** Where things live, after the precedence rule: flag -> env -> config -> default. */
export interface Paths {
  home: string;
  /** The config file, or null when none exists at the default place. */
  config: string | null;
  /** The spool database file. */
  spoolFile: string;
  lock: string;
}

export interface LoadedConfig {
  config: Config;
  paths: Paths;
  /** Warnings (unknown keys at run time, notes); errors are thrown. */
  problems: ConfigProblem[];
  /** The config file's mtime when it was read (reload on change), or null. */
  mtimeMs: number | null;
}
