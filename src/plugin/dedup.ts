// Dedup id helpers for sources: by header, by field, or by body hash.
import { getText } from "./get-path.ts";
import type { HookRequest } from "./types.ts";
import { sha256Hex } from "./verify.ts";

export type DedupFn = (payload: unknown, req: HookRequest) => string | null;

/** A delivery id in a header (GitHub's X-GitHub-Delivery). */
export function header(name: string): DedupFn {
  return (_payload, req) => req.header(name) || null;
}

/** An id inside the payload (Pub/Sub's message.messageId, Trello's action.id). */
export function field(path: string): DedupFn {
  return (payload) => getText(payload, path) || null;
}

/** The body's SHA-256, for senders whose payloads carry no id (Plaid; keep its window short). */
export function bodySha256(_payload: unknown, req: HookRequest): string {
  return sha256Hex(req.body);
}
