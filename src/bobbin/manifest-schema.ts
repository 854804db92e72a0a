// The shape of a bobbin's manifest (bobbin.toml): its sections' types, the keys each section
// takes, the template keys a setting may give, and the setting types. manifest.ts reads and
// checks a manifest against it.
import type { TEMPLATE_KEYS } from "../plugin/template.ts";

/** `<vendor>.<product>`: each part a lower-case identifier of at most 40 characters. */
export const NAME_PART = /^[a-z][a-z0-9-]{0,39}$/;
/** An event type a bobbin may produce (an output key); "*" stands for every accepted event. */
export const EVENT_TYPE_TOKEN = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$/;
/** The namespace of the generic bobbins that ship with hookspool. */
export const RESERVED_VENDOR = "hookspool";

export const SETTING_TYPES = ["string", "int", "bool", "list", "path", "table"] as const;
export type SettingType = (typeof SETTING_TYPES)[number];

export interface Provider {
  vendor: string;
  product: string;
  homepage?: string;
  webhook_docs?: string;
  signature_docs?: string;
  api_docs?: string;
  no_push_note?: string;
  no_push_docs?: string;
}

export interface SourceSection {
  /** A code source: a module file in the bobbin's directory ("source" is source.ts). */
  module?: string;
  /** The template source: a fixed table, or "settings" (every key from the instance's settings). */
  template?: Record<string, unknown> | "settings";
  span?: string;
  /** Settings that become keys of the expanded source's own table. */
  config?: string[];
  sender_retries?: boolean;
  expect_every_s?: number;
  /** How long a dedup id is remembered, when the sender's ids call for another than the default. */
  dedup_window_s?: number;
  /** One line for the reverse-proxy recipe. */
  proxy?: string;
}

export interface SecretSpec {
  description: string;
  /** The processor needs it too (the source gets every secret). */
  processor: boolean;
  required: boolean;
  /** Earlier names an instance may still give it by (a rename never breaks a deployment). */
  aliases: string[];
}

export interface SettingSpec {
  description: string;
  type: SettingType;
  required: boolean;
  default?: unknown;
}

export interface ProcessorSection {
  module: string;
  timeout_s: number;
  state: boolean;
}

export interface PollSection {
  every_s: number;
  jitter_s: number;
  module: string;
  timeout_s: number;
  state: boolean;
}

export interface SweepSection {
  kind: (typeof SWEEP_KINDS)[number];
  /** The secret that holds the sweep's API token. */
  secret: string;
}

export interface Manifest {
  name: string;
  vendor: string;
  product: string;
  version: string;
  summary: string;
  provider: Provider;
  source?: SourceSection;
  poll?: PollSection;
  secrets: Record<string, SecretSpec>;
  settings: Record<string, SettingSpec>;
  processor?: ProcessorSection;
  outputs: Record<string, { description: string }>;
  /** The sweep that recovers what the sender could not deliver (`hookspool sweep <instance>`). */
  sweep?: SweepSection;
}

export interface ManifestProblem {
  /** The key path inside bobbin.toml ("" for the file as a whole). */
  key: string;
  message: string;
  hint?: string;
}

export interface ManifestContext {
  /** `<vendor>/<product>` as the directory names it (either part may write - as _). */
  dir: string;
  /** Shipped with hookspool: only these may use the hookspool. namespace. */
  builtin: boolean;
  /** The span presets a manifest's span may name. */
  presets: readonly string[];
}

export type Table = Record<string, unknown>;
/** A key as TOML writes it: bare when it can be, else quoted. */
export const tomlKey = (k: string) => (/^[A-Za-z0-9_-]+$/.test(k) ? k : JSON.stringify(k));
export const isTable = (v: unknown): v is Table =>
  typeof v === "object" && v !== null && !Array.isArray(v) && !(v instanceof Date);

export const TOP_KEYS = [
  "name",
  "version",
  "summary",
  "provider",
  "source",
  "poll",
  "secrets",
  "settings",
  "processor",
  "outputs",
  "sweep",
];
/** The sweeps `hookspool sweep` knows: what a bobbin whose sender does not retry may declare. */
export const SWEEP_KINDS = ["github-redeliver"] as const;
export const PROVIDER_KEYS = [
  "vendor",
  "product",
  "homepage",
  "webhook_docs",
  "signature_docs",
  "api_docs",
  "no_push_note",
  "no_push_docs",
];
export const SOURCE_KEYS = [
  "module",
  "template",
  "span",
  "config",
  "sender_retries",
  "expect_every_s",
  "dedup_window_s",
  "proxy",
];

/** The template keys a setting may give, and the setting types each accepts. */
export const TEMPLATE_SETTING_TYPES: { [K in (typeof TEMPLATE_KEYS)[number]]: readonly SettingType[] } = {
  tolerance_s: ["int"],
  sw_headers: ["string"],
  algorithm: ["string"],
  encoding: ["string"],
  message: ["string"],
  timestamp_header: ["string"],
  timestamp_field: ["string"],
  id_header: ["string"],
  pairs: ["string"],
  ts_name: ["string"],
  sig_name: ["string"],
  signatures: ["string"],
  public_url: ["string"],
  body: ["string"],
  form_json: ["string"],
  echo_when: ["string"],
  echo_field: ["string"],
  get_verify: ["bool"],
  reply_when: ["string"],
  reply: ["string"],
  reply_type: ["string"],
  ack: ["string"],
  ack_type: ["string"],
  split: ["string"],
  learn: ["string"],
  scheme: ["string"],
  header: ["string"],
  prefix: ["string"],
  param: ["string"],
  callback_url: ["string"],
  dedup: ["string"],
  event_type: ["string"],
  head_handshake: ["bool"],
  sender_retries: ["bool"],
  key: ["string", "list"],
  ignore: ["string", "list"],
  attrs: ["table"],
};

/** Whether `value` has the setting type `type` (a path is a string; int a whole number). */
export function hasSettingType(type: SettingType, value: unknown): boolean {
  switch (type) {
    case "string":
    case "path":
      return typeof value === "string";
    case "int":
      return typeof value === "number" && Number.isInteger(value);
    case "bool":
      return typeof value === "boolean";
    case "list":
      return Array.isArray(value) && value.every((x) => typeof x === "string");
    case "table":
      return isTable(value);
  }
}
