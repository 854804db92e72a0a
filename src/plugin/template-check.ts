// The check of a template table: every key known and of its type, each scheme's needs, and the
// keys that only make sense together. `hookspool check` and `bobbin check` report these.
import { closest } from "../spelling.ts";
import { isBarePath, parseWhen, selectorOk } from "./template-select.ts";
import { defaultRecipe, MAC_KEY_SCHEMES, parseRecipe, RECIPE_PARTS, type VerifySettings } from "./template-verify.ts";
import { SCHEMES, type Scheme, TEMPLATE_KEYS } from "./template.ts";

export interface TemplateProblem {
  key: string;
  message: string;
}

const STRING_KEYS = [
  "scheme",
  "header",
  "header2",
  "prefix",
  "param",
  "callback_url",
  "dedup",
  "event_type",
  "version",
  "sw_headers",
  "algorithm",
  "encoding",
  "timestamp_header",
  "timestamp_field",
  "id_header",
  "pairs",
  "ts_name",
  "sig_name",
  "signatures",
  "public_url",
  "body",
  "form_json",
  "echo_when",
  "echo_field",
  "echo_unsigned",
  "echo_method",
  "echo_reply",
  "secret_encoding",
  "reply_when",
  "reply_type",
  "ack_type",
  "split",
] as const;
// A recipe, a reply or an ack may be any text, even empty.
const TEXT_KEYS = ["message", "reply", "ack"] as const;
const BOOLEAN_KEYS = ["head_handshake", "sender_retries", "get_verify"] as const;

const GENERIC: readonly string[] = ["hmac", "ed25519", "ecdsa-p256"];
const GENERIC_ONLY = [
  "message",
  "timestamp_header",
  "timestamp_field",
  "id_header",
  "pairs",
  "ts_name",
  "sig_name",
  "signatures",
  "public_url",
  "encoding",
] as const;

const ENUMS: Record<string, readonly string[]> = {
  sw_headers: ["webhook", "svix", "either"],
  algorithm: ["sha256", "sha1", "sha512"],
  encoding: ["hex", "base64"],
  body: ["json", "form"],
};

/** Keys that need another to mean anything. */
const NEEDS: [string, string, string][] = [
  ["echo_when", "echo_field", "the field whose value answers"],
  ["echo_field", "echo_when", "when the echo answers"],
  ["reply_when", "reply", "the reply's body"],
  ["reply", "reply_when", "when the reply answers"],
  ["reply_type", "reply", "a reply"],
  ["ack_type", "ack", "an ack body"],
  ["ts_name", "pairs", "the pairs separator"],
  ["sig_name", "pairs", "the pairs separator"],
];

/**
 * Check a template table. Selectors: `header:<Name>`, `field:<dotted.path>` or a bare path
 * (a payload field), `const:<text>`, alternatives `a|b`, `keyof:a|b`; `dedup` also takes
 * `body_sha256` and `none`.
 */
export function checkTemplate(t: Record<string, unknown>): TemplateProblem[] {
  const out: TemplateProblem[] = [];
  const has = (k: string) => t[k] !== undefined;
  for (const k of Object.keys(t)) {
    if (!(TEMPLATE_KEYS as readonly string[]).includes(k)) {
      const near = closest(k, [...TEMPLATE_KEYS]);
      out.push({ key: k, message: near ? `unknown template key (${near})` : "unknown template key" });
    }
  }
  for (const k of STRING_KEYS) {
    if (has(k) && (typeof t[k] !== "string" || t[k] === ""))
      out.push({ key: k, message: "expected a non-empty string" });
  }
  for (const k of TEXT_KEYS) {
    if (has(k) && typeof t[k] !== "string") out.push({ key: k, message: "expected a string" });
  }
  for (const k of BOOLEAN_KEYS) {
    if (has(k) && typeof t[k] !== "boolean") out.push({ key: k, message: "expected true or false" });
  }
  if (has("tolerance_s") && (typeof t.tolerance_s !== "number" || !Number.isFinite(t.tolerance_s) || t.tolerance_s < 0))
    out.push({ key: "tolerance_s", message: "expected a number of seconds, 0 or more" });
  for (const [k, values] of Object.entries(ENUMS)) {
    if (typeof t[k] === "string" && !values.includes(t[k] as string))
      out.push({ key: k, message: `one of ${values.join(", ")}` });
  }
  const scheme = t.scheme as string | undefined;
  if (scheme === undefined) out.push({ key: "scheme", message: `required: one of ${Object.keys(SCHEMES).join(", ")}` });
  else if (!Object.hasOwn(SCHEMES, scheme))
    out.push({ key: "scheme", message: `unknown scheme "${scheme}": one of ${Object.keys(SCHEMES).join(", ")}` });
  else schemeProblems(t, scheme as Scheme, out);

  const isSelectorList = (v: unknown) =>
    typeof v === "string" || (Array.isArray(v) && v.length > 0 && v.every((x) => typeof x === "string"));
  if (!has("key")) out.push({ key: "key", message: "required: the payload field(s) that form the coalesce key" });
  else if (!isSelectorList(t.key)) out.push({ key: "key", message: "expected a selector or a list of selectors" });
  if (has("ignore")) {
    if (!isSelectorList(t.ignore)) out.push({ key: "ignore", message: "expected an event type or a list of them" });
    else if (!has("event_type")) out.push({ key: "ignore", message: "needs event_type (ignore matches event types)" });
  }
  if (has("attrs")) {
    const a = t.attrs;
    if (
      typeof a !== "object" ||
      a === null ||
      Array.isArray(a) ||
      !Object.values(a).every((v) => typeof v === "string")
    ) {
      out.push({ key: "attrs", message: "expected a table of name = selector" });
    }
  }
  for (const k of ["key", "event_type", "version", "dedup", "echo_field"] as const) {
    for (const sel of ([] as unknown[]).concat(t[k] ?? [])) {
      if (typeof sel === "string" && !selectorOk(sel, k === "dedup"))
        out.push({ key: k, message: `bad selector "${sel}"` });
    }
  }
  for (const k of ["echo_when", "reply_when"] as const) {
    if (typeof t[k] === "string" && parseWhen(t[k] as string) === null)
      out.push({ key: k, message: "expected <selector>=<value>, such as type=url_verification" });
  }
  for (const [k, need, what] of NEEDS) {
    if (has(k) && !has(need)) out.push({ key: k, message: `needs ${need} (${what})` });
  }
  if (t.head_handshake === true && (has("echo_when") || has("reply_when")))
    out.push({
      key: "head_handshake",
      message: "answers before verify: it cannot be combined with echo_when or reply_when",
    });
  if (has("echo_unsigned")) {
    const e = t.echo_unsigned;
    if (typeof e !== "string" || !/^(query:[A-Za-z][A-Za-z0-9_.-]{0,63}|header:[A-Za-z0-9-]{1,64})$/.test(e))
      out.push({
        key: "echo_unsigned",
        message: 'expected "query:<name>" or "header:<Name>": where an unsigned verification request carries its value',
      });
    if (t.head_handshake === true || has("echo_when") || has("reply_when") || t.get_verify === true || has("learn"))
      out.push({
        key: "echo_unsigned",
        message:
          "one handshake per template: it cannot be combined with head_handshake, echo_when, " +
          "reply_when, get_verify or learn",
      });
  }
  if (has("secret_encoding")) {
    if (t.secret_encoding !== "text" && t.secret_encoding !== "base64")
      out.push({ key: "secret_encoding", message: 'expected "text" or "base64"' });
    else if (t.secret_encoding === "base64" && !MAC_KEY_SCHEMES.includes(String(t.scheme)))
      out.push({
        key: "secret_encoding",
        message: `only for an HMAC scheme (${MAC_KEY_SCHEMES.join(", ")}): ${String(t.scheme)} reads its key itself`,
      });
  }
  for (const k of ["echo_method", "echo_reply"] as const)
    if (has(k) && !has("echo_unsigned")) out.push({ key: k, message: "needs echo_unsigned" });
  if (has("echo_method") && t.echo_method !== "GET" && t.echo_method !== "POST")
    out.push({ key: "echo_method", message: "expected GET or POST" });
  if (
    has("echo_reply") &&
    (typeof t.echo_reply !== "string" || !/^(text|json:[A-Za-z_][A-Za-z0-9_]{0,63})$/.test(t.echo_reply))
  )
    out.push({ key: "echo_reply", message: 'expected "text" or "json:<field>"' });
  if (has("form_json") && t.body !== "form") out.push({ key: "form_json", message: 'needs body = "form"' });
  if (typeof t.split === "string" && t.split !== "*" && !isBarePath(t.split))
    out.push({ key: "split", message: 'expected a payload path to an array, or "*" for a body that is one' });
  // One id for the whole request would make every element after the first its duplicate.
  if (
    has("split") &&
    (!has("dedup") ||
      (typeof t.dedup === "string" &&
        (t.dedup === "body_sha256" ||
          t.dedup.split("|").some((a) => a.startsWith("header:") || a.startsWith("const:")))))
  ) {
    out.push({
      key: "dedup",
      message: "with split, the dedup id must be each element's own field (or none), not the request's",
    });
  }
  if (has("learn")) {
    const l = t.learn;
    const m = typeof l === "string" ? /^(header|field):(.+)$/.exec(l) : null;
    if (!m || (m[1] === "header" && !/^[A-Za-z0-9-]+$/.test(m[2])) || (m[1] === "field" && !isBarePath(m[2]))) {
      out.push({
        key: "learn",
        message:
          'expected "header:<Name>" (a handshake header whose value is the secret, ' +
          'echoed back) or "field:<path>" (an unsigned JSON handshake)',
      });
    }
    if (t.get_verify === true || t.head_handshake === true)
      out.push({ key: "learn", message: "a learning handshake cannot be combined with get_verify or head_handshake" });
    if (m?.[1] === "field" && !has("header"))
      out.push({
        key: "learn",
        message: "a field handshake is told apart from events by the missing signature header: set header",
      });
  }
  // ignore reads the request's event type, which a split request does not have.
  if (has("split") && has("ignore"))
    out.push({ key: "ignore", message: "with split, each element has its own type: route the ones to drop instead" });
  return out;
}

function schemeProblems(t: Record<string, unknown>, scheme: Scheme, out: TemplateProblem[]): void {
  const has = (k: string) => t[k] !== undefined;
  for (const need of SCHEMES[scheme].needs) {
    if (!has(need)) out.push({ key: need, message: `required by scheme ${scheme}` });
  }
  if (scheme === "static-token" && has("header") === has("param"))
    out.push({ key: "header", message: "scheme static-token needs exactly one of header or param" });
  if (has("sw_headers") && scheme !== "standard-webhooks")
    out.push({ key: "sw_headers", message: "only for scheme standard-webhooks" });
  if (has("algorithm") && scheme !== "hmac") out.push({ key: "algorithm", message: "only for scheme hmac" });
  if (has("header2")) {
    // A second key's signature is a MAC: a public-key scheme has one key, the sender's.
    if (scheme !== "hmac") out.push({ key: "header2", message: "only for scheme hmac" });
    else if (has("pairs"))
      out.push({ key: "header2", message: "takes a signature after prefix, not pairs: unset pairs or header2" });
    if (
      typeof t.header2 === "string" &&
      typeof t.header === "string" &&
      t.header2.toLowerCase() === t.header.toLowerCase()
    )
      out.push({
        key: "header2",
        message: "must name another header than header (one header's signatures: signatures)",
      });
  }
  const generic = GENERIC.includes(scheme);
  for (const k of GENERIC_ONLY) {
    if (has(k) && !generic) out.push({ key: k, message: `only for schemes ${GENERIC.join(", ")}` });
  }
  // tolerance_s is harmless where no timestamp is checked (hookspool.webhook sets it for every
  // scheme): it is not reported.
  if (!generic) return;
  if (has("timestamp_header") && has("timestamp_field"))
    out.push({ key: "timestamp_field", message: "one of timestamp_header or timestamp_field" });
  if (has("pairs") && has("signatures"))
    out.push({ key: "signatures", message: "with pairs, every sig_name pair is a signature" });
  if (typeof t.public_url === "string" && !/^https?:\/\/[^\s?#]+$/.test(t.public_url))
    out.push({ key: "public_url", message: "expected the http(s) URL the sender calls, without a query string" });
  const tsSource = has("timestamp_header") || has("timestamp_field") || has("pairs");
  // A timestamp that is checked but not signed proves nothing: a replay with a fresh one passes.
  const recipe = parseRecipe(defaultRecipe(t as unknown as VerifySettings));
  const signs = (part: string) => recipe.some((p) => "part" in p && p.part === part);
  if ((has("timestamp_header") || has("pairs")) && !signs("ts"))
    out.push({
      key: "message",
      message: "the timestamp is checked but not signed: put {ts} in the message (Slack: v0:{ts}:{body})",
    });
  if (has("timestamp_field") && !signs("body"))
    out.push({ key: "message", message: "timestamp_field is in the body: the message must sign {body}" });
  if (typeof t.message !== "string") {
    if (scheme !== "hmac" && !tsSource)
      out.push({
        key: "timestamp_header",
        message: `required by scheme ${scheme} unless message is set (it signs {ts}{body})`,
      });
    return;
  }
  for (const p of parseRecipe(t.message)) {
    if (!("part" in p)) continue;
    if (!(RECIPE_PARTS as readonly string[]).includes(p.part))
      out.push({
        key: "message",
        message: `unknown part {${p.part}}: the parts are ${RECIPE_PARTS.map((x) => `{${x}}`).join(", ")}`,
      });
    else if (p.part === "ts" && !tsSource)
      out.push({ key: "message", message: "{ts} needs timestamp_header, timestamp_field or pairs" });
    else if (p.part === "id" && !has("id_header")) out.push({ key: "message", message: "{id} needs id_header" });
    else if (p.part === "url" && !has("public_url")) out.push({ key: "message", message: "{url} needs public_url" });
    else if (p.part === "params" && t.body !== "form")
      out.push({ key: "message", message: '{params} needs body = "form"' });
  }
}
