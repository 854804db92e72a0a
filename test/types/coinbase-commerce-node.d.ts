// coinbase-commerce-node 1.0.4 ships no types. This declares the part of it that
// test/bobbins/coinbase_commerce.test.ts calls, its Webhook helper (lib/Webhook.js), and no more.
declare module "coinbase-commerce-node" {
  /** The body's `event`, as the SDK's Event resource: the event's own fields, copied on. */
  interface CommerceEvent {
    id: string;
    type: string;
    resource: string;
    api_version: string;
    created_at: string;
    data: { id: string; code: string };
  }

  export const Webhook: {
    /**
     * True when sigHeader is the lowercase hex HMAC-SHA256 of payload (UTF-8) under secret,
     * compared as text; else it throws a SignatureVerificationError.
     */
    verifySigHeader(payload: string, sigHeader: string, secret: string): true;
    /**
     * The body's event, when payload is JSON with an `event` (else it throws an
     * InvalidResponseError) and verifySigHeader passes (else that throws).
     */
    verifyEventBody(payload: string, sigHeader: string, secret: string): CommerceEvent;
  };
}
