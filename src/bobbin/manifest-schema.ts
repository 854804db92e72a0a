// The shape of a bobbin's manifest (bobbin.toml): its sections' types, the keys each section
// takes, the template keys a setting may give, and the setting types. manifest.ts reads and
// checks a manifest against it.
import type { TEMPLATE_KEYS } from "../plugin/template.ts";
import type { HealthSection } from "./manifest-health.ts";

/** A dotted path into a JSON document (data.items.0.id). */
export const DOTTED_PATH = /^[A-Za-z0-9_$-]+(\.[A-Za-z0-9_$-]+)*$/;
/** An HTTP header's name (RFC 9110's token). */
export const HEADER_NAME = /^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/;

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
  /**
   * What the captures and the scheme were checked against, in one line: an SDK, its version or commit and file, or a
   * page.
   */
  checked?: string;
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
  /** events-api: the provider's list of what it sent, and how to read it ([sweep.api]). */
  api?: EventsApiSection;
}

/**
 * An events-api sweep's list: a GET of `url` + `path` that answers a page of items (the events
 * or deliveries the provider made), newest first, with a cursor to the next page. Selectors are
 * dotted paths into the JSON answer or into one item.
 */
export interface EventsApiSection {
  /** The API's base URL (https); `hookspool sweep --api-url` replaces it. */
  url: string;
  /** The list's path, from the base URL ("/notifications"). */
  path: string;
  /** Fixed query parameters (filters, page size, order). */
  query: Record<string, string>;
  /** Query parameters the operator gives with `--param <name>=<value>`, each with what it is. */
  args: Record<string, string>;
  /** How the key is sent: "bearer", "basic" (the key as the user name) or "header:<Name>". */
  auth: string;
  /** The items' array in the answer ("" when the answer is the array). */
  items: string;
  /** The webhook's body in an item ("" when the item is the body). */
  payload: string;
  /** The item's dedup id: the one the bobbin's template reads from the webhook. */
  id: string;
  /** Headers the webhook carried, each from an item's field (for a template that reads one). */
  headers: Record<string, string>;
  /** The query parameter that takes the window's start, and its form. */
  since_param?: string;
  since_format: "rfc3339" | "unix";
  /** The item's time (RFC 3339 or Unix seconds): a listing stops at the first older than --since. */
  time?: string;
  /** The next page's URL in the answer... */
  next?: string;
  /**
   * ...or the query parameter that takes the next page's cursor, and where the cursor is (a path
   * into the answer, or "last:<path>" into the page's last item).
   */
  cursor_param?: string;
  cursor_value?: string;
  /**
   * Whether another page follows: a boolean in the answer, or "!<path>" for one that says the
   * list is done (Svix's `done`); unset: while the cursor has a value and the page is not empty.
   */
  more?: string;
  /** Requests a second, under the provider's rate limit. */
  per_s: number;
  /** How long the provider keeps what it lists, in seconds: the longest --since. */
  keeps_s: number;
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
  /** How the maintenance loop asks the provider whether it still sends to us ([health]). */
  health?: HealthSection;
  /** Payload paths `--where` looks up often: migrate builds an index for each (store/where.ts). */
  indexed: string[];
}

/** How many payload paths a bobbin may have indexed: each one costs every stored event a parse. */
export const MAX_INDEXED = 8;

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

/**
 * The readers a section's checker shares, each reporting a problem at its key through `e`:
 * `text` a string (required or not; empty only when `empty`), `strings` a table of strings.
 */
export function sectionFields(t: Table, e: (key: string, message: string) => void) {
  return {
    text(k: string, required: boolean, empty = false): string | undefined {
      const v = t[k];
      if (v === undefined) {
        if (required) e(k, "required");
        return undefined;
      }
      if (typeof v !== "string" || (v === "" && !empty)) {
        e(k, "expected a non-empty string");
        return undefined;
      }
      return v;
    },
    strings(k: string): Record<string, string> {
      const v = t[k];
      if (v === undefined) return {};
      if (!isTable(v) || !Object.values(v).every((x) => typeof x === "string")) {
        e(k, "expected a table of strings");
        return {};
      }
      return v as Record<string, string>;
    },
  };
}

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
  "health",
  "indexed",
];
/**
 * The sweeps `hookspool sweep` knows: github-redeliver asks GitHub to send a failed delivery
 * again; stripe-events and events-api list what the provider failed to deliver and enqueue it.
 */
export const SWEEP_KINDS = ["github-redeliver", "stripe-events", "events-api"] as const;
/** The keys of an events-api sweep's [sweep.api] table. */
export const SWEEP_API_KEYS = [
  "url",
  "path",
  "query",
  "args",
  "auth",
  "items",
  "payload",
  "id",
  "headers",
  "since_param",
  "since_format",
  "time",
  "next",
  "cursor_param",
  "cursor_value",
  "more",
  "per_s",
  "keeps_s",
];
export const PROVIDER_KEYS = [
  "vendor",
  "product",
  "homepage",
  "webhook_docs",
  "signature_docs",
  "api_docs",
  "no_push_note",
  "no_push_docs",
  "checked",
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
  echo_unsigned: ["string"],
  echo_method: ["string"],
  echo_reply: ["string"],
  secret_encoding: ["string"],
  scheme: ["string"],
  header: ["string"],
  header2: ["string"],
  prefix: ["string"],
  param: ["string"],
  callback_url: ["string"],
  dedup: ["string"],
  event_type: ["string"],
  version: ["string"],
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
