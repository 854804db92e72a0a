// The template source's section of docs/config.md: the hand-written partial
// (docs/partials/template-source.md) with its generated tables filled in from the code, the
// schemes of src/plugin/template.ts with what each checks, and every template key with its type,
// when it is required and what it means.
import { SCHEMES, type Scheme, TEMPLATE_KEYS } from "../plugin/template.ts";

/** What the scheme table says beyond SCHEMES: the timestamp a scheme checks and its default dedup id. */
interface SchemeNote {
  /** The timestamp the scheme checks, or null when it carries none. */
  timestamp: string | null;
  /** The dedup id when `dedup` is unset (defaultDedup in template.ts), or null for none. */
  dedup: string | null;
  /** Replaces the needs column when `needs` cannot say it (one key of two). */
  needs?: string;
}

const SCHEME_NOTES: { [S in Scheme]: SchemeNote } = {
  "hmac-sha256-hex": { timestamp: null, dedup: null },
  "hmac-sha1-hex": { timestamp: null, dedup: null },
  "hmac-sha256-base64": { timestamp: null, dedup: null },
  "hmac-sha1-base64-url": { timestamp: null, dedup: null },
  "standard-webhooks": {
    timestamp: "`webhook-timestamp`, 300 s either side",
    dedup: "the `webhook-id` header (or `svix-id`)",
  },
  timestamped: { timestamp: "`t=` in `header`, 300 s either side", dedup: "a SHA-256 of the `header` value" },
  "static-token": { timestamp: null, dedup: null, needs: "exactly one of `header` or `param`" },
  hmac: {
    timestamp: "`timestamp_header`, `timestamp_field` or the `ts_name` pair, when set; `tolerance_s` either side",
    dedup: "the `id_header` header, or a SHA-256 of the `header` value when a timestamp is checked",
  },
  ed25519: {
    timestamp: "`timestamp_header` (or `timestamp_field`, a pair); `tolerance_s` either side",
    dedup: "the `id_header` header, or a SHA-256 of the `header` value when a timestamp is checked",
    needs: "`header`, and `timestamp_header` unless `message` is set",
  },
  "ecdsa-p256": {
    timestamp: "`timestamp_header` (or `timestamp_field`, a pair); `tolerance_s` either side",
    dedup: "the `id_header` header, or a SHA-256 of the `header` value when a timestamp is checked",
    needs: "`header`, and `timestamp_header` unless `message` is set",
  },
};

type TemplateKey = (typeof TEMPLATE_KEYS)[number];

/** The template keys' types and meanings; `always` marks the two keys every template needs. */
const TEMPLATE_KEY_DOCS: { [K in TemplateKey]: { type: string; doc: string; always?: true } } = {
  scheme: { type: "string", always: true, doc: "how a request is verified: one of the schemes above" },
  header: { type: "header name", doc: "the header that carries the signature or token (any letter case)" },
  header2: {
    type: "header name",
    doc:
      "`hmac` only: a second header with the same kind of signature over the same message, made under a " +
      "second key, the secret `secret2` (Box's `box-signature-secondary`); both are checked on every request, " +
      "and either verifying is enough, so the sender can replace one key at a time; not with `pairs`",
  },
  prefix: {
    type: "string",
    doc:
      "text in front of the signature or token in `header` (`sha256=`, `Bearer `); " +
      "compared case-sensitively, and a header without it is `malformed`; default empty",
  },
  param: {
    type: "string",
    doc:
      "`static-token` only: the query parameter that carries the token (`?token=...`); " +
      "the reverse proxy must pass the query string on",
  },
  callback_url: {
    type: "string",
    doc:
      "`hmac-sha1-base64-url` only: the URL the sender signs after the body (Trello: " +
      "the callback URL, exactly as registered)",
  },
  head_handshake: {
    type: "boolean",
    doc:
      "answer a HEAD request with an empty 200 before any verification " +
      "(Trello checks a callback URL this way); the answer is constant, so it tells nothing about the secret",
  },
  key: {
    type: "selector, or array of selectors",
    always: true,
    doc:
      "the coalesce key: events with the same key share a batch; the values of an array are joined with `:`; " +
      "a selector with no value quarantines the request (`key_missing`); at most 512 bytes",
  },
  dedup: {
    type: "selector, `body_sha256` or `none`",
    doc:
      "the dedup id; unset: the scheme's default (table above); " +
      "a selector with no value: no dedup id for that request",
  },
  ignore: {
    type: "event type, or array of them",
    doc: 'event types answered 200 `{"status":"ignored"}` and not queued (GitHub\'s `ping`); needs `event_type`',
  },
  event_type: {
    type: "selector",
    doc:
      "the event type, stored with the event; " +
      "routes can always match on it as `event_type`; unset or no value: empty",
  },
  version: {
    type: "selector",
    doc:
      "the event's version by the sender's own clock (Stripe's `field:created`, Shopify's " +
      "`header:X-Shopify-Triggered-At`): a number, or an RFC 3339 or ISO 8601 time; a batch orders its events by " +
      "it and a route's `stale` compares it with the last version its key delivered; unset or no value: none",
  },
  attrs: {
    type: "table of name = selector",
    doc: "more attributes for routes to match on; a selector with no value leaves its attribute out",
  },
  sender_retries: {
    type: "boolean",
    doc: "whether the sender retries a delivery that failed (documentation: it says whether a 503 loses the event)",
  },
  tolerance_s: {
    type: "number",
    doc:
      "how far a signed timestamp may be from the intake's clock, " +
      "either side, in seconds; default 300 (Paddle: 5, Linear: 60)",
  },
  sw_headers: {
    type: "`webhook`, `svix` or `either`",
    doc:
      "`standard-webhooks` only: which header names carry id, timestamp and signature; " +
      "`either` (the default) takes the set that has a signature, `webhook-*` first",
  },
  algorithm: { type: "`sha256`, `sha1` or `sha512`", doc: "`hmac` only: the HMAC's hash; default `sha256`" },
  encoding: {
    type: "`hex` or `base64`",
    doc: "the generic schemes: how the signature is written; default `hex` (`ecdsa-p256`: `base64`)",
  },
  message: {
    type: "recipe",
    doc:
      "the generic schemes: what is signed, text with parts `{body}` (the raw body), `{ts}`, " +
      "`{id}` (the `id_header` value), `{method}`, `{url}` (`public_url` and the query string as received) " +
      "and `{params}` (a form body's parameters sorted by name, each name then value); " +
      "default `{body}` (`ed25519`, `ecdsa-p256`: `{ts}{body}`). Slack: `v0:{ts}:{body}`",
  },
  timestamp_header: {
    type: "header name",
    doc:
      "the generic schemes: the header that carries the signed timestamp: Unix seconds, milliseconds, " +
      "or an RFC 3339 time with its offset (`2020-01-01T00:00:00-08:00`, `2021-03-25T05:09:27Z`: Box, Zendesk)",
  },
  timestamp_field: {
    type: "payload path",
    doc:
      "the generic schemes: the body field that carries the timestamp, " +
      "for senders that put it there (Linear's `webhookTimestamp`)",
  },
  id_header: {
    type: "header name",
    doc: "the generic schemes: the header that carries the message id, for `{id}`; also the default dedup id",
  },
  pairs: {
    type: "separator",
    doc:
      "the generic schemes: `header` is `name=value` pairs separated by this (`,` for `t=...,v1=...`, " +
      "`;` for Paddle's `ts=...;h1=...`); " +
      "the timestamp is the `ts_name` pair, every `sig_name` pair a signature",
  },
  ts_name: { type: "string", doc: "with `pairs`: the timestamp pair's name; default `t`" },
  sig_name: { type: "string", doc: "with `pairs`: the signature pairs' name; default `v1` (Paddle: `h1`)" },
  signatures: {
    type: "separator",
    doc:
      "the generic schemes: `header` holds several signatures separated by this, each after `prefix`; " +
      "any one may match (PagerDuty during a secret rotation: `v1=...,v1=...`)",
  },
  public_url: {
    type: "URL",
    doc:
      "the generic schemes: the URL the sender calls, exactly as registered with it, " +
      "for `{url}` (Twilio, HubSpot); the reverse proxy must pass the query string on",
  },
  body: {
    type: "`json` or `form`",
    doc:
      "`form`: the body is `application/x-www-form-urlencoded`, " +
      "queued as a JSON object of its fields (the first value of a repeated name); default `json`",
  },
  form_json: {
    type: "field name",
    doc: 'with `body = "form"`: a field that holds JSON (Slack\'s `payload`); when present, its JSON is the payload',
  },
  echo_when: {
    type: "condition",
    doc:
      "`<selector>=<value>`: a verified request for which it holds is answered 200 " +
      "with the `echo_field` value as text, not queued (Slack: `type=url_verification`)",
  },
  echo_field: { type: "selector", doc: "with `echo_when`: the value to answer with (Slack: `challenge`)" },
  echo_unsigned: {
    type: "`query:<name>` or `header:<Name>`",
    doc:
      "a verification request that carries no signature, answered before verify with the value it brought " +
      "(printable ASCII, at most 1,024 characters; else 400), never queued: " +
      "Dropbox's GET `query:challenge`, Okta's GET `header:X-Okta-Verification-Challenge`, " +
      "Microsoft Graph's POST `query:validationToken`; the answer echoes only what the request sent",
  },
  secret_encoding: {
    type: "`text` or `base64`",
    doc:
      "how an HMAC scheme reads `secrets.secret`: as the key's text (default), or as the base64 of the key's bytes " +
      "(Airtable's `macSecretBase64`); not for static-token, standard-webhooks or a public key",
  },
  echo_method: { type: "`GET` or `POST`", doc: "with `echo_unsigned`: the request's method; default `GET`" },
  echo_reply: {
    type: "`text` or `json:<field>`",
    doc:
      'with `echo_unsigned`: the value as `text/plain` (default), or as the JSON object `{"<field>": value}` ' +
      "(Okta: `json:verification`); either with `X-Content-Type-Options: nosniff`",
  },
  get_verify: {
    type: "boolean",
    doc:
      "answer a GET with `hub.mode=subscribe` whose `hub.verify_token` equals " +
      "the secret `verify_token` (compared in constant time) with its `hub.challenge`, " +
      "403 otherwise (Meta, WhatsApp); needs `secrets.verify_token`",
  },
  reply_when: {
    type: "condition",
    doc:
      "`<selector>=<value>`: a verified request for which it holds is answered 200 with `reply`, " +
      "not queued (Discord's PING: `type=1`)",
  },
  reply: { type: "string", doc: 'with `reply_when`: the answer\'s body (Discord: `{"type":1}`)' },
  reply_type: { type: "media type", doc: "the `reply`'s Content-Type; default `application/json`" },
  ack: {
    type: "string",
    doc:
      "the 200 answer's body for a queued or duplicate request, in place of the JSON status, " +
      "for a sender that reads it (Twilio: `<Response/>`, Discord: a deferred reply)",
  },
  ack_type: { type: "media type", doc: "the `ack`'s Content-Type; default `application/json` (Twilio: `text/xml`)" },
  split: {
    type: "payload path, or `*`",
    doc:
      "one event per element of this array (`*`: the body is the array), each with its own key, " +
      "dedup id, type and attributes, all queued in one transaction (SendGrid, HubSpot); " +
      "the raw body is stored with the first; an empty array is acked as ignored",
  },
  learn: {
    type: "`header:<Name>` or `field:<path>`",
    doc:
      "a handshake that teaches the secret, kept in the file `secrets.secret` names while " +
      "the source is armed (`hookspool source arm`, whose one-time token the handshake's URL must carry): " +
      "`header:X-Hook-Secret` takes the header's value and echoes it (Asana), " +
      "`field:verification_token` takes the field of an unsigned JSON POST (Notion)",
  },
};

const GENERATED = /^<!-- generated: ([a-z-]+) -->$/;

/** The template source section: the partial, with its `<!-- generated: ... -->` lines filled in. */
export function renderTemplateSection(partial: string): string {
  const tables: Record<string, () => string[]> = { schemes: schemeTable, "template-keys": templateKeyTable };
  const used = new Set<string>();
  const lines = partial
    .trimEnd()
    .split("\n")
    .flatMap((line) => {
      const m = GENERATED.exec(line);
      if (!m) return [line];
      const table = tables[m[1]];
      if (!table)
        throw new Error(`docs partial: no generated table named ${m[1]} (one of ${Object.keys(tables).join(", ")})`);
      used.add(m[1]);
      return table();
    });
  for (const name of Object.keys(tables)) {
    if (!used.has(name)) throw new Error(`docs partial: the line <!-- generated: ${name} --> is missing`);
  }
  return lines.join("\n");
}

const code = (s: string) => `\`${s}\``;

function schemeTable(): string[] {
  const out = [
    "| scheme | what it verifies | needs | timestamp | default dedup id |",
    "| --- | --- | --- | --- | --- |",
  ];
  for (const [name, s] of Object.entries(SCHEMES) as [Scheme, (typeof SCHEMES)[Scheme]][]) {
    const note = SCHEME_NOTES[name];
    const needs = note.needs ?? (s.needs.length ? s.needs.map(code).join(", ") : "nothing more");
    out.push(`| ${code(name)} | ${s.doc} | ${needs} | ${note.timestamp ?? "none"} | ${note.dedup ?? "none"} |`);
  }
  return out;
}

function templateKeyTable(): string[] {
  const out = ["| key | type | required | meaning |", "| --- | --- | --- | --- |"];
  for (const key of TEMPLATE_KEYS) {
    const d = TEMPLATE_KEY_DOCS[key];
    const by = (Object.entries(SCHEMES) as [Scheme, (typeof SCHEMES)[Scheme]][])
      .filter(([, s]) => (s.needs as readonly string[]).includes(key))
      .map(([n]) => code(n));
    const required = d.always ? "always" : by.length ? `by ${by.join(", ")}` : "no";
    out.push(`| ${code(key)} | ${d.type} | ${required} | ${d.doc} |`);
  }
  return out;
}
