// The texts `hookspool bobbin new` writes: the three documents (the frontmatter, the config
// table, the secret and the procedure, with TODO where the provider's pages must answer), and
// for --code the template's decisions written out as a source module on the plugin API.
import { checksTimestamp } from "../plugin/template-verify.ts";
import type { TemplateSettings } from "../plugin/template.ts";

const FRONTMATTER = (name: string) => `---\nbobbin: ${name}\nprovider: TODO TODO\nwebhook_docs: https://TODO\n---\n`;

function configTable(name: string, output: string): string {
  return [
    "```toml",
    "[bobbins.<INSTANCE>]",
    `bobbin = "${name}"`,
    'secrets.secret = { file = "/etc/hookspool/secrets/<INSTANCE>" }',
    `outputs = { ${JSON.stringify(output)} = "hermes:<INSTANCE>" }`,
    "```",
  ].join("\n");
}

/** A processor that passes each event of a batch on as one item of the output "event". */
export function processorSource(name: string): string {
  return `// The ${name} processor: what a batch of events becomes. It calls the plugin API
// (hookspool/plugin) for everything outside the batch: ctx.http, ctx.secret, ctx.saveState.
import { defineProcessor } from "hookspool/plugin";

export default defineProcessor({
  process(batch, ctx) {
    // TODO: decide what a batch becomes (a summary, a fetched object); each event is passed on now.
    ctx.log(\`batch \${batch.id}: \${batch.events.length} event(s)\`);
    return batch.events.map((event) => ({ event_type: "event", event }));
  },
});
`;
}

export function documents(name: string, t: TemplateSettings, output = "*"): [string, string][] {
  const retries =
    t.sender_retries === undefined
      ? "TODO: does the provider retry a delivery that got no 2xx? How often, for how long?"
      : t.sender_retries
        ? "The provider retries a delivery that got no 2xx."
        : "The provider does not retry a failed delivery: install a sweep (see below).";
  const keys = ([] as string[]).concat(t.key).join('", "');
  const readme = `${FRONTMATTER(name)}
# ${name}

TODO: what the provider sends, and what an agent does with it, in two sentences.

- Verification: the \`${t.scheme}\` scheme${t.header ? ` in \`${t.header}\`` : ""}, with the one secret \`secret\`.
- Key: \`${keys}\`; event type: \`${t.event_type ?? "(none)"}\`; dedup: \`${t.dedup ?? "the scheme's default"}\`.
- Sender: ${retries}
- Sweep: TODO: the job that finds what the provider could not deliver (or "none needed, because ...").

What was checked against which of the provider's pages: TODO.
`;
  const setup = `${FRONTMATTER(name)}
# Setting up ${name}

1. Create the webhook at the provider: TODO (which page, which events, the URL
   \`https://<HOST>/hooks/<INSTANCE>\`).
2. Save the provider's signing secret as the file the instance's \`secret\` names, mode 0600,
   owned by the hookspool user.
3. Add the instance and check it:

${configTable(name, output)}

   \`hookspool check\`, then reload.
4. Send a test delivery from the provider and see it with \`hookspool list --source <INSTANCE>\`.
5. To roll back: delete the webhook at the provider, remove the table, reload.
`;
  const agents = `${FRONTMATTER(name)}
# Agent setup: ${name}

## Needs from the human

- An account at the provider that may create webhooks: TODO.
- The signing secret, written by the human (or by you from a pipe) to the file \`secret\` names.

## Steps

1. **Goal: the secret file exists.** Check \`stat -c '%a %U' /etc/hookspool/secrets/<INSTANCE>\`
   shows \`600\` and the hookspool user; if not, ask the human to write it.
2. **Goal: the instance loads.** Add this table, then run \`hookspool check\`; fix what it names.

${configTable(name, output)}

3. **outward. Goal: the provider posts to hookspool.** TODO: the exact call or page that
   creates the webhook. Ask the human before running it.
4. **Goal: a delivery is queued.** \`hookspool list --source <INSTANCE> --json\` shows it; if not,
   read \`hookspool status\` and the intake's log lines for the source.
`;
  return [
    ["README.md", readme],
    ["SETUP.md", setup],
    ["AGENTS.md", agents],
  ];
}

/** A selector as code reading `payload` and `req` (alternatives as `||`, first with a value). */
function selectorCode(sel: string): string {
  if (sel.startsWith("keyof:"))
    return `(${JSON.stringify(sel.slice(6).split("|"))}.find((p) => getPath(payload, p) != null) ?? null)`;
  const alts = sel.split("|");
  if (alts.length > 1) return `(${alts.map((a) => `${selectorCode(a)} || `).join("")}null)`;
  if (sel.startsWith("header:")) return `req.header(${JSON.stringify(sel.slice(7))})`;
  if (sel.startsWith("const:")) return JSON.stringify(sel.slice(6));
  return `getText(payload, ${JSON.stringify(sel.startsWith("field:") ? sel.slice(6) : sel)})`;
}

function verifyCode(t: TemplateSettings): { code: string; imports: string[]; setup?: string } {
  const h = JSON.stringify(t.header ?? "");
  const prefix = JSON.stringify(t.prefix ?? "");
  const hmac = (algorithm: string, encoding: string, data = "req.body") => ({
    code:
      `hmacPrefixedWhy(req.header(${h}), ${prefix}, secrets.get("secret"), ` +
      `${data}, { algorithm: "${algorithm}", encoding: "${encoding}" }) ?? true`,
    imports: ["hmacPrefixedWhy"],
  });
  switch (t.scheme) {
    case "hmac-sha256-hex":
      return hmac("sha256", "hex");
    case "hmac-sha1-hex":
      return hmac("sha1", "hex");
    case "hmac-sha256-base64":
      return hmac("sha256", "base64");
    case "hmac-sha1-base64-url":
      return hmac("sha1", "base64", `Buffer.concat([req.body, Buffer.from(${JSON.stringify(t.callback_url ?? "")})])`);
    case "standard-webhooks":
      return {
        code:
          "standardWebhooksWhy(standardWebhooksHeaders(req), " +
          `secrets.get("secret"), req.body, { now: req.now }) ?? true`,
        imports: ["standardWebhooksHeaders", "standardWebhooksWhy"],
      };
    case "timestamped":
      return {
        code: `timestampedWhy(req.header(${h}), secrets.get("secret"), req.body, { now: req.now }) ?? true`,
        imports: ["timestampedWhy"],
      };
    case "static-token": {
      if (t.param)
        return {
          code: `staticTokenWhy(req.query[${JSON.stringify(t.param)}] ?? null, secrets.get("secret")) ?? true`,
          imports: ["staticTokenWhy"],
        };
      const token = `req.header(${h})`;
      return {
        code:
          `${token}?.startsWith(${prefix}) ` +
          `? (staticTokenWhy(${token}?.slice(${(t.prefix ?? "").length}) ?? null, secrets.get("secret")) ?? true) ` +
          `: "missing_signature"`,
        imports: ["staticTokenWhy"],
      };
    }
    default: {
      // The generic schemes: the template's own verifier over the same settings, read once.
      const keys = [
        "scheme",
        "header",
        "header2",
        "prefix",
        "tolerance_s",
        "algorithm",
        "encoding",
        "message",
        "timestamp_header",
        "timestamp_field",
        "id_header",
        "pairs",
        "ts_name",
        "sig_name",
        "signatures",
        "public_url",
        "body",
      ] as const;
      const settings = Object.fromEntries(keys.filter((k) => t[k] !== undefined).map((k) => [k, t[k]]));
      return {
        code: t.header2
          ? `verifier(req, secrets.get("secret"), secrets.get("secret2")) ?? true`
          : `verifier(req, secrets.get("secret")) ?? true`,
        imports: ["schemeVerifier"],
        setup: `const verifier = schemeVerifier(${JSON.stringify(settings)});`,
      };
    }
  }
}

/** The dedup id the template would derive, as code (its explicit selector, or the scheme's default). */
function dedupCode(t: TemplateSettings): { code: string; imports: string[] } | null {
  if (t.dedup === "none") return null;
  if (t.dedup === "body_sha256") return { code: "dedup.bodySha256", imports: ["dedup"] };
  if (t.dedup) return { code: `(payload, req) => ${selectorCode(t.dedup)} || null`, imports: [] };
  if (t.scheme === "standard-webhooks")
    return { code: '(_payload, req) => req.header("webhook-id") || req.header("svix-id") || null', imports: [] };
  if ((t.scheme === "hmac" || t.scheme === "ed25519" || t.scheme === "ecdsa-p256") && t.id_header)
    return { code: `(_payload, req) => req.header(${JSON.stringify(t.id_header)}) || null`, imports: [] };
  if ((t.scheme === "timestamped" || checksTimestamp(t)) && t.header)
    return {
      code:
        `(_payload, req) => {\n    const signature = req.header(${JSON.stringify(t.header)});\n` +
        `    return signature ? \`sig:\${sha256Hex(signature)}\` : null;\n  }`,
      imports: ["sha256Hex"],
    };
  return null;
}

export function codeSource(name: string, t: TemplateSettings): string {
  const v = verifyCode(t);
  const d = dedupCode(t);
  const notWritten = (
    [
      "ignore",
      "attrs",
      "head_handshake",
      "tolerance_s",
      "sw_headers",
      "body",
      "form_json",
      "echo_when",
      "get_verify",
      "reply_when",
      "ack",
      "split",
    ] as const
  ).filter((k) => t[k] !== undefined);
  const keys = ([] as string[]).concat(t.key);
  const usesKeyof = [...keys, t.event_type, t.dedup].some((x) => typeof x === "string" && x.startsWith("keyof:"));
  const imports = [
    "BadPayload",
    "defineSource",
    "getText",
    ...(usesKeyof ? ["getPath"] : []),
    ...v.imports,
    ...(d?.imports ?? []),
  ].sort();
  const authHeaders = [
    t.header,
    t.header2,
    ...(t.scheme === "standard-webhooks" ? ["webhook-signature", "svix-signature"] : []),
  ].filter((x): x is string => !!x);
  const lines = [
    `// The ${name} source: how a delivery is verified and what it is about. It calls the plugin API`,
    "// (hookspool/plugin) for every check; see docs/bobbins/writing-a-bobbin.md.",
    `import { ${imports.join(", ")} } from "hookspool/plugin";`,
    "",
    ...(v.setup ? [v.setup, ""] : []),
    "export default defineSource({",
    t.header2 ? '  secrets: ["secret", "secret2"],' : '  secrets: ["secret"],',
    `  authHeaders: [${authHeaders.map((h) => JSON.stringify(h)).join(", ")}],`,
    ...(t.sender_retries !== undefined ? [`  senderRetries: ${t.sender_retries},`] : []),
    "  verify(req, secrets) {",
    `    return ${v.code};`,
    "  },",
    "  key(payload, req) {",
    `    const parts = [${keys.map(selectorCode).join(", ")}];`,
    `    if (parts.some((p) => !p)) throw new BadPayload("a key field has no value", "key_missing");`,
    '    return parts.join(":");',
    "  },",
    ...(t.event_type ? [`  eventType: (payload, req) => ${selectorCode(t.event_type)} ?? "",`] : []),
    ...(d ? [`  dedupId: ${d.code},`] : []),
    ...(notWritten.length ? [`  // TODO: the settings ${notWritten.join(", ")} are not written out here yet.`] : []),
    "});",
    "",
  ];
  return lines.join("\n");
}
