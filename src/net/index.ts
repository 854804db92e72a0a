// The network core bobbins call instead of fetch: HTTP with timeouts, size caps and typed
// errors, pacing, OAuth refresh, and key fetchers for published signing keys.
export {
  type ConditionalOptions,
  createHttp,
  type Http,
  type HttpResponse,
  HttpStatusError,
  hostOf,
  jsonOf,
  type RequestOptions,
  RetryLater,
  retryAfterSeconds,
  type SendOptions,
  statusError,
  type TextAnswer,
} from "./http.ts";
export { createPacer, type Pacer } from "./pace.ts";
export {
  createOAuth,
  type OAuth,
  type OAuthCredential,
  parseCredential,
  type StoredToken,
  type TokenStore,
} from "./oauth.ts";
export {
  type DocumentFetcherOptions,
  documentFetcher,
  jwksFetcher,
  keyFetcher,
  type KeyFetcherOptions,
} from "./keys.ts";
