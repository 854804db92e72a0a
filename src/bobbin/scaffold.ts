// `hookspool bobbin new`: a new bobbin made from the hookspool.webhook settings a user gives,
// frozen into a fixed template (or, with code, the same decisions written as a source module),
// with a made-up delivery signed for the scheme, a rejected copy, the kit file and the three
// documents. What only the provider's pages can say is left as TODO, which `bobbin check`
// reports (provider, todos) until it is filled in.
import { generateKeyPairSync } from "node:crypto";
import { stringify } from "smol-toml";
import { hookRequest } from "../plugin/hook-request.ts";
import { isTimestamped, signsBody, signTemplate } from "../plugin/sign.ts";
import { checkTemplate, TEMPLATE_KEYS, type TemplateSettings, templateSource } from "../plugin/template.ts";
import { NAME_PART } from "./manifest.ts";
import { codeSource, documents, processorSource } from "./scaffold-text.ts";

/** The time a scaffold's timestamped captures are signed at (2025-01-01T00:00:00Z). */
export const SCAFFOLD_NOW = 1_735_689_600;

export interface ScaffoldOptions {
  name: string;
  /** hookspool.webhook settings, as --set gave them. */
  settings: Record<string, unknown>;
  /** A source.ts in place of the template. */
  code?: boolean;
  /** Also a processor.ts: each batch becomes items of the output "event". */
  processor?: boolean;
}

export interface ScaffoldProblem {
  key: string;
  message: string;
}

/** A --set value: TOML when it reads as a TOML value (true, 3, ["a", "b"]), else the text itself. */
export function settingValue(raw: string): unknown {
  try {
    return (Bun.TOML.parse(`v = ${raw}`) as { v: unknown }).v;
  } catch {
    return raw;
  }
}

/** A payload with a value at every body path the template reads, and the headers it reads. */
function example(t: TemplateSettings): { payload: Record<string, unknown>; headers: [string, string][] } {
  const payload: Record<string, unknown> = {};
  const headers: [string, string][] = [];
  const selectors = [...([] as string[]).concat(t.key), t.dedup, t.event_type, ...Object.values(t.attrs ?? {})].filter(
    (s): s is string => typeof s === "string",
  );
  for (const sel of selectors) {
    if (sel === "body_sha256" || sel === "none" || sel.startsWith("const:")) continue;
    if (sel.startsWith("header:")) {
      const name = sel.slice(7);
      if (!headers.some(([h]) => h.toLowerCase() === name.toLowerCase()))
        headers.push([name, `example-${name.toLowerCase()}`]);
      continue;
    }
    const path = (sel.startsWith("field:") ? sel.slice(6) : sel).split(".");
    let at: Record<string, unknown> = payload;
    for (const [i, part] of path.entries()) {
      if (i === path.length - 1) at[part] ??= `example-${part}`;
      else at = (at[part] ??= {}) as Record<string, unknown>;
    }
  }
  return { payload, headers };
}

/** Check the settings as the template source would; nothing is made when there is a problem. */
export function scaffoldProblems(o: ScaffoldOptions): ScaffoldProblem[] {
  const out: ScaffoldProblem[] = [];
  const [vendor = "", product = "", ...more] = o.name.split(".");
  if (more.length || !NAME_PART.test(vendor) || !NAME_PART.test(product))
    out.push({ key: "name", message: `"${o.name}" is not <vendor>.<product> (lower-case, one dot)` });
  if (vendor === "hookspool")
    out.push({ key: "name", message: "the hookspool. namespace is reserved for the bobbins that ship with hookspool" });
  for (const k of Object.keys(o.settings))
    if (!(TEMPLATE_KEYS as readonly string[]).includes(k))
      out.push({ key: k, message: `not a template setting (${TEMPLATE_KEYS.join(", ")})` });
  for (const k of ["scheme", "key"])
    if (o.settings[k] === undefined)
      out.push({
        key: k,
        message: "required: --set scheme=... and --set key=... (see hookspool bobbin show hookspool.webhook)",
      });
  if (!out.length) out.push(...checkTemplate(o.settings));
  return out;
}

const KIT_SECRET = (product: string) => `kit-test-secret-${product}`;
const WRONG_SECRET = "kit-test-wrong-secret";

/**
 * The test keys of a public-key scheme: the kit's secret is the public key, the captures are signed with the private
 * one.
 */
interface KitKeys {
  secret: string;
  privateKey?: string;
  /** Signs the rejected copy: another key pair's private key. */
  wrongKey?: string;
}

function kitKeys(t: TemplateSettings, product: string): KitKeys {
  if (t.scheme !== "ed25519" && t.scheme !== "ecdsa-p256") return { secret: KIT_SECRET(product) };
  const pair = () =>
    t.scheme === "ed25519" ? generateKeyPairSync("ed25519") : generateKeyPairSync("ec", { namedCurve: "prime256v1" });
  const good = pair();
  const der = good.publicKey.export({ format: "der", type: "spki" });
  // As the senders show them: Discord a hex raw Ed25519 key, SendGrid a base64 SPKI key.
  const secret = t.scheme === "ed25519" ? der.subarray(der.length - 32).toString("hex") : der.toString("base64");
  const pem = (k: ReturnType<typeof pair>) => k.privateKey.export({ format: "pem", type: "pkcs8" }).toString();
  return { secret, privateKey: pem(good), wrongKey: pem(pair()) };
}

function capture(
  t: TemplateSettings,
  product: string,
  secret: string,
  expect: string[],
  body: Uint8Array,
  headers: [string, string][],
  privateKey?: string,
): string {
  const signed = signTemplate(t, secret, body, SCAFFOLD_NOW, "msg_example_1", privateKey);
  const url = `/hooks/${product}${signed.query ? `?${signed.query}` : ""}`;
  const lines = [
    ...expect,
    `POST ${url} HTTP/1.1`,
    "Host: hooks.example.com",
    "Content-Type: application/json",
    ...headers.map(([k, v]) => `${k}: ${v}`),
    ...signed.headers.map(([k, v]) => `${k}: ${v}`),
    "",
  ];
  return `${lines.join("\n")}\n${new TextDecoder().decode(body)}\n`;
}

/** The files of the new bobbin, by path relative to its directory. Throws on a settings problem. */
export function scaffold(o: ScaffoldOptions): Map<string, string> {
  const problems = scaffoldProblems(o);
  if (problems.length) throw new Error(problems.map((p) => `${p.key}: ${p.message}`).join("; "));
  const [, product] = o.name.split(".");
  const t = o.settings as unknown as TemplateSettings;
  const source = templateSource(t);
  const { payload, headers } = example(t);
  const body = new TextEncoder().encode(JSON.stringify(payload));
  const req = hookRequest({
    method: "POST",
    url: `/hooks/${product}`,
    headers,
    body,
    peer: "127.0.0.1",
    now: SCAFFOLD_NOW,
  });
  const key = source.key(payload, req);
  const eventType = source.eventType?.(payload, req) ?? "";
  const files = new Map<string, string>();

  const sourceTable: Record<string, unknown> = o.code ? { module: "source" } : { template: o.settings };
  sourceTable.span = "burst";
  const manifest = stringify({
    name: o.name,
    version: "1",
    summary: `TODO: what ${product} sends, in one line`,
    provider: {
      vendor: "TODO",
      product: "TODO",
      homepage: "https://TODO",
      webhook_docs: "https://TODO",
      signature_docs: "https://TODO",
    },
    source: sourceTable,
    secrets: {
      secret: { description: "the signing secret (or token) the provider shows for this webhook" },
      ...(t.header2 ? { secret2: { description: "the second signing key, whose signature is in header2" } } : {}),
    },
    ...(o.processor ? { processor: { module: "processor", timeout_s: 300, state: false } } : {}),
    outputs: o.processor
      ? { event: { description: "TODO: what the processor makes of a batch; now each of its events, passed on" } }
      : { "*": { description: "every accepted event" } },
  });
  files.set(
    "bobbin.toml",
    `# Made by hookspool bobbin new from hookspool.webhook settings. Fill in every TODO from the\n` +
      `# provider's own documentation; hookspool bobbin check says what is left.\n${manifest}`,
  );
  if (o.code) files.set("source.ts", codeSource(o.name, t));
  if (o.processor) files.set("processor.ts", processorSource(o.name));

  const expectLines = [
    `# expect: 202 queued`,
    `# expect-key: ${key}`,
    ...(eventType ? [`# expect-event-type: ${eventType}`] : []),
  ];
  const keys = kitKeys(t, product);
  files.set(
    "captures/accepted.http",
    capture(
      t,
      product,
      keys.secret,
      [
        ...expectLines,
        "# TODO: replace this made-up delivery with a real one, redacted, signed with the kit's secret.",
      ],
      body,
      headers,
      keys.privateKey,
    ),
  );
  files.set(
    "captures/rejected.http",
    capture(
      t,
      product,
      WRONG_SECRET,
      ["# expect: 401", "# The accepted delivery under another secret."],
      body,
      headers,
      keys.wrongKey,
    ),
  );
  if (o.code) {
    // The kit signs a body of its own only for a template; a code source brings its own.
    const unreadable = new TextEncoder().encode("not json");
    files.set(
      "captures/unclassifiable.http",
      capture(
        t,
        product,
        keys.secret,
        ["# expect: 202 quarantined", "# Verified, but the body is not JSON: kept in quarantine, never queued."],
        unreadable,
        headers,
        keys.privateKey,
      ),
    );
  }
  const kit = [
    "# The example instance these captures were made for, and the test values they are signed with.",
    ...(isTimestamped(t) ? [`now = ${SCAFFOLD_NOW}`] : []),
    // What the kit cannot read from code: which of its matrix cases apply.
    ...(o.code ? [`timestamped = ${isTimestamped(t)}`, `body_signed = ${signsBody(t)}`] : []),
    "",
    "[instance]",
    `name = "${product}"`,
    "",
    "[secrets]",
    ...(keys.privateKey
      ? ["# The public half of a key pair made for these captures (the private half signed them and was thrown away)."]
      : []),
    `secret = "${keys.secret}"`,
    ...(t.header2 ? [`secret2 = "kit-test-secret2-${product}"`] : []),
    "",
  ];
  files.set("captures/kit.toml", kit.join("\n"));
  for (const [f, text] of documents(o.name, t, o.processor ? "event" : "*")) files.set(f, text);
  if (o.code) files.set("tests/source.test.ts", testSkeleton(o.name, "source.ts"));
  if (o.processor) files.set("tests/processor.test.ts", testSkeleton(o.name, "processor.ts"));
  return files;
}

function testSkeleton(name: string, file: string): string {
  return `// ${name}'s own tests: what ${file} decides that the captures do not show.
import { test } from "bun:test";

// TODO: one test per decision of ${file}, then remove this line and the todo below.
test.todo("what ${file} decides");
`;
}
