// The processor API: what a bobbin's processor.ts exports (`export default defineProcessor({...})`)
// and the context the runtime gives it. A processor turns one batch into items; the runtime
// turns items into emits, keeps the staged state, journals both and does every retry. The
// context's clients are described by shape here; src/net/ implements them.

/** One batch, as the dispatcher delivered it. */
export interface Batch {
  id: number;
  deliveryId: string;
  source: string;
  key: string;
  /** The stored payloads, oldest first. */
  events: unknown[];
  /** The whole batch document (docs/receiving.md). */
  doc: Record<string, unknown>;
}

/** What a processor produces: an event type among the bobbin's outputs, and its payload fields. */
export interface Item {
  event_type: string;
  /** The coalesce key of the item's batch downstream; default: the batch's key. */
  key?: string;
  [field: string]: unknown;
}

export interface HttpAnswer {
  status: number;
  /** Names lower-cased. */
  headers: Record<string, string>;
  text: string;
}

export interface HttpOptions {
  headers?: Record<string, string>;
  timeoutS?: number;
  maxBytes?: number;
  followRedirects?: boolean;
}

/** HTTP to the provider: timeouts, a size cap, 429/5xx as Retryable and other 4xx as Permanent. */
export interface HttpClient {
  request(method: string, url: string, opts?: HttpOptions & { body?: string | Uint8Array }): Promise<HttpAnswer>;
  getJson<T = unknown>(url: string, opts?: HttpOptions): Promise<T>;
  postJson<T = unknown>(url: string, body: unknown, opts?: HttpOptions): Promise<T>;
  postForm<T = unknown>(url: string, form: Record<string, string>, opts?: HttpOptions): Promise<T>;
  getText(
    url: string,
    opts?: HttpOptions & { etag?: string; lastModified?: string },
  ): Promise<{ status: 200 | 304; text: string; headers: Record<string, string> }>;
}

/** HTTP with an OAuth access token refreshed from a refresh-token credential. */
export interface OAuthClient {
  accessToken(): Promise<string>;
  request(method: string, url: string, opts?: HttpOptions & { body?: string | Uint8Array }): Promise<HttpAnswer>;
  getJson<T = unknown>(url: string, opts?: HttpOptions): Promise<T>;
}

export interface Context<S = Record<string, unknown>> {
  /** The instance's settings, typed as the manifest declares them, defaults filled in. */
  readonly settings: S;
  /** A secret the manifest grants the processor (processor = true); any other name is Permanent. */
  secret(name: string): Promise<string>;
  readonly http: HttpClient;
  /** HTTP authorised by the OAuth credential in the secret `name`. */
  oauth(name: string): OAuthClient;
  /** The state saved under `name` by an earlier batch, or `fallback`. */
  loadState<T>(name: string, fallback: T): T;
  /** Staged: applied only after the batch's result is journaled. */
  saveState(name: string, value: unknown): void;
  /** The deployment's hooks module (a `hooks` path setting), or null. */
  readonly hooks: Record<string, unknown> | null;
  /** One line to the log: ids and counts, never a body or a secret. */
  log(line: string): void;
  now(): number;
  /** End the batch for good: a short fixed phrase (at most 300 characters), never a value. */
  failPermanent(reason: string): never;
  /** At most perSec requests a second: wait() before each. */
  pace(perSec: number): { wait(): Promise<void> };
}

export interface ProcessorPlugin<S = Record<string, unknown>> {
  process(batch: Batch, ctx: Context<S>): Item[] | Promise<Item[]>;
}

/** Identity helper for type inference: `export default defineProcessor({ process(batch, ctx) {...} })`. */
export function defineProcessor<S = Record<string, unknown>>(plugin: ProcessorPlugin<S>): ProcessorPlugin<S> {
  return plugin;
}

/** A poll bobbin's poller: called on each tick of the dispatcher's clock, never on a sender's request. */
export interface PollerPlugin<S = Record<string, unknown>> {
  poll(batch: Batch, ctx: Context<S>): Item[] | Promise<Item[]>;
}

/** Identity helper: `export default definePoller({ poll(batch, ctx) {...} })`. */
export function definePoller<S = Record<string, unknown>>(plugin: PollerPlugin<S>): PollerPlugin<S> {
  return plugin;
}
