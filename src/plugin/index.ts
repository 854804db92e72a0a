// The plugin API, whole: what a source imports as "hookspool/plugin". Verification helpers,
// JSON paths, dedup ids, the errors that classify a request, and defineSource.
export * as dedup from "./dedup.ts";
export { getPath, getText } from "./get-path.ts";
export { standardWebhooksHeaders } from "./template.ts";
export { schemeVerifier, sortedParams } from "./template-verify.ts";
export {
  type Attrs,
  BadPayload,
  defineSource,
  type HookRequest,
  type HookResponse,
  Permanent,
  Retryable,
  response,
  type Secrets,
  type SourcePlugin,
  type Verdict,
} from "./types.ts";
export * from "./verify.ts";
export {
  type Batch,
  type Context,
  definePoller,
  defineProcessor,
  type HttpClient,
  type Item,
  type OAuthClient,
  type PollerPlugin,
  type ProcessorPlugin,
} from "./processor.ts";
