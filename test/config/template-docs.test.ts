// The template source section of docs/config.md, held to the code: its tables agree with
// src/plugin/template.ts, and every worked example, read from the page itself (the blocks after
// <!-- example: ... -->, <!-- request: ... -->, <!-- result: ... --> and <!-- module: ... -->),
// loads, verifies and classifies as the page says. Signatures are made here with node:crypto,
// independently of src/plugin/verify.ts; where openssl is installed, the page's own shell
// recipes are run as well and must produce the very same requests.
import { describe, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { createHash, createHmac, randomBytes } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { basename, join } from "node:path";
import { parseConfig } from "../../src/config/load.ts";
import { type IntakeSource, loadSources } from "../../src/config/sources.ts";
import type { Config } from "../../src/config/types.ts";
import { type Evaluation, evaluate } from "../../src/intake/evaluate.ts";
import { hookRequest } from "../../src/plugin/hook-request.ts";
import { checkTemplate, defaultDedup, SCHEMES, type Scheme, TEMPLATE_KEYS } from "../../src/plugin/template.ts";
import type { HookRequest } from "../../src/plugin/types.ts";
import { enqueue } from "../../src/store/sqlite/enqueue.ts";
import { freshSpool, T0 } from "../helpers/spool.ts";
import { tempDir } from "../helpers/tmp.ts";

const ROOT = join(import.meta.dir, "..", "..");
const PAGE = readFileSync(join(ROOT, "docs", "config.md"), "utf8");

/** The section from its heading to the next second-level heading. */
const SECTION = (() => {
  const start = PAGE.indexOf("\n## The template source\n");
  if (start < 0) throw new Error("docs/config.md has no '## The template source' section");
  const end = PAGE.indexOf("\n## ", start + 1);
  return PAGE.slice(start, end < 0 ? undefined : end);
})();

interface Block {
  kind: string;
  name: string;
  lang: string;
  text: string;
}

const BLOCKS: Block[] = [...SECTION.matchAll(/<!-- ([a-z]+): ([\w/-]+) -->\n```(\w*)\n([\s\S]*?)\n```\n/g)].map(
  (m) => ({ kind: m[1], name: m[2], lang: m[3], text: m[4] }),
);

function block(kind: string, name: string): Block {
  const found = BLOCKS.filter((b) => b.kind === kind && b.name === name);
  if (found.length !== 1)
    throw new Error(`docs/config.md: expected one <!-- ${kind}: ${name} --> block, found ${found.length}`);
  return found[0];
}

const EXAMPLES = BLOCKS.filter((b) => b.kind === "example").map((b) => b.name);
const REQUESTS = BLOCKS.filter((b) => b.kind === "request").map((b) => b.name);
const exampleOf = (request: string) => request.split("/")[0];

// ---------------------------------------------------------------------------------------------
// What this test knows of each sender, independently of the intake's code

const mac = (alg: string, key: string | Buffer, data: string, enc: "hex" | "base64") =>
  createHmac(alg, key).update(data).digest(enc);
const sha256 = (data: string) => createHash("sha256").update(data).digest("hex");

/** Secrets the examples are run with (the docs name only their files). */
const SECRETS: Record<string, string> = {
  github: "gh-hook-secret-7Q2x",
  // Stripe's secrets look like Standard Webhooks ones; the timestamped scheme uses them as written.
  stripe: "whsec_stripeStyleSecret9k",
  "standard-webhooks": `whsec_${randomBytes(24).toString("base64")}`,
  "bearer-token": "uptimeToken5Rt8",
  pubsub: "pubsubPushToken42x",
  slack: "8f74c2a1b10e4f6d9a3b5c7d1e2f3a4b",
};

interface SignInput {
  secret: string;
  body: string;
  ts: string;
  vars: Record<string, string>;
}

/** The shell variables a recipe computes with openssl, computed here with node:crypto. */
const SIGNERS: Record<string, (v: SignInput) => Record<string, string>> = {
  github: ({ secret, body }) => ({ sig: mac("sha256", secret, body, "hex") }),
  stripe: ({ secret, body, ts }) => ({ sig: mac("sha256", secret, `${ts}.${body}`, "hex") }),
  "standard-webhooks": ({ secret, body, ts, vars }) => ({
    sig: mac("sha256", Buffer.from(secret.slice("whsec_".length), "base64"), `${vars.id}.${ts}.${body}`, "base64"),
  }),
  "bearer-token": () => ({}),
  pubsub: () => ({}),
  slack: ({ secret, body, ts }) => ({ sig: mac("sha256", secret, `v0:${ts}:${body}`, "hex") }),
};

// ---------------------------------------------------------------------------------------------
// Reading a recipe: literal assignments, computed ones, and one curl command

interface Recipe {
  /** The file `secret=$(cat ...)` reads. */
  secretFile: string;
  literals: Record<string, string>;
  computed: string[];
  curl: string;
}

function parseRecipe(sh: string): Recipe {
  const r: Recipe = { secretFile: "", literals: {}, computed: [], curl: "" };
  for (const line of sh.replace(/\\\n\s*/g, " ").split("\n")) {
    let m: RegExpExecArray | null;
    if (line.trim() === "" || line.startsWith("#")) continue;
    if ((m = /^(\w+)='([^']*)'$/.exec(line))) r.literals[m[1]] = m[2];
    else if ((m = /^(\w+)=\$\((.*)\)$/.exec(line))) {
      r.computed.push(m[1]);
      if (m[1] === "secret") r.secretFile = (/^cat (\S+)$/.exec(m[2]) ?? [])[1] ?? "";
    } else if (line.startsWith("curl ")) r.curl = line.slice(5);
    else throw new Error(`a recipe line this test cannot read: ${line}`);
  }
  if (!r.secretFile || !r.curl || r.literals.body === undefined)
    throw new Error("a recipe needs secret=$(cat <file>), body='...' and a curl command");
  return r;
}

/** Shell words of a command line: '...' as is, "..." and bare words with $name and ${name} expanded. */
function shellWords(line: string, value: (name: string) => string): string[] {
  const expand = (s: string) => s.replace(/\$\{(\w+)\}|\$(\w+)/g, (_, a, b) => value(a ?? b));
  const out: string[] = [];
  let i = 0;
  while (i < line.length) {
    if (line[i] === " ") {
      i++;
      continue;
    }
    let word = "";
    while (i < line.length && line[i] !== " ") {
      const quote = line[i];
      if (quote === "'" || quote === '"') {
        const end = line.indexOf(quote, i + 1);
        if (end < 0) throw new Error(`unterminated quote in: ${line}`);
        const inner = line.slice(i + 1, end);
        word += quote === "'" ? inner : expand(inner);
        i = end + 1;
      } else {
        const m = /^[^ '"]+/.exec(line.slice(i));
        word += expand(m?.[0] ?? "");
        i += m?.[0].length ?? 1;
      }
    }
    out.push(word);
  }
  return out;
}

interface Wire {
  method: string;
  url: string;
  headers: [string, string][];
  body: string;
}

/** The request curl would send for these arguments. */
function curlRequest(args: string[]): Wire {
  let url = "";
  let method = "";
  let body: string | null = null;
  const headers: [string, string][] = [];
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    if (a === "-H") {
      const h = args[++i];
      const colon = h.indexOf(":");
      headers.push([h.slice(0, colon).trim(), h.slice(colon + 1).trim()]);
    } else if (a === "--data-binary") body = args[++i];
    else if (a === "-X") method = args[++i];
    else if (a === "-sS" || a === "-s" || a === "-i") continue;
    else if (a.startsWith("-")) throw new Error(`curl option ${a} is not known to this test`);
    else url = a;
  }
  const u = new URL(url);
  return { method: method || (body === null ? "GET" : "POST"), url: u.pathname + u.search, headers, body: body ?? "" };
}

/** The documented request with this test's own signature, at time `ts`, under `secret`. */
function signedRequest(
  example: string,
  recipe: Recipe,
  opts: { secret: string; ts: string | number; body?: string },
): Wire {
  const vars: Record<string, string> = { ...recipe.literals, secret: opts.secret, ts: String(opts.ts) };
  if (opts.body !== undefined) vars.body = opts.body;
  Object.assign(vars, SIGNERS[example]({ secret: opts.secret, body: vars.body, ts: vars.ts, vars }));
  return curlRequest(
    shellWords(recipe.curl, (name) => {
      if (!(name in vars)) throw new Error(`the recipe's curl uses $${name}, which this test does not compute`);
      return vars[name];
    }),
  );
}

const HAVE_OPENSSL = spawnSync("openssl", ["version"]).status === 0 && spawnSync("bash", ["-c", "true"]).status === 0;

/** Run the page's recipe in bash, curl and date stood in for: the arguments curl was given. */
function runRecipe(sh: string, docFile: string, secretFile: string, now: number): string[] {
  const script = [
    `curl() { for a in "$@"; do printf '%s\\0' "$a"; done; }`,
    `date() { echo ${now}; }`,
    sh.replaceAll(docFile, secretFile),
  ].join("\n");
  const r = spawnSync("bash", ["-c", script], { encoding: "utf8" });
  if (r.status !== 0) throw new Error(`the recipe failed: ${r.stderr}`);
  return r.stdout.split("\0").slice(0, -1);
}

// ---------------------------------------------------------------------------------------------
// Loading an example and running a request through the intake's evaluate()

interface Loaded {
  config: Config;
  source: IntakeSource;
  secret: string;
  /** The secret file the page names, and the one the test wrote. */
  docSecretFile: string;
  secretFile: string;
}

async function loadExample(example: string): Promise<Loaded> {
  const dir = tempDir();
  let toml = block("example", example).text;
  const files = [...toml.matchAll(/\{ file = "([^"]+)" \}/g)].map((m) => m[1]);
  expect(files).toHaveLength(1);
  const secret = SECRETS[example];
  const secretFile = join(dir, "secret");
  writeFileSync(secretFile, `${secret}\n`, { mode: 0o600 });
  toml = toml.replace(files[0], secretFile);
  const mod = /^module = "([^"]+)"$/m.exec(toml);
  if (mod) {
    const code = block("module", example).text;
    expect(code).toContain('from "/opt/hookspool/src/plugin/types.ts"');
    const path = join(dir, basename(mod[1]));
    writeFileSync(path, code.replaceAll('"/opt/hookspool/', `"${ROOT}/`));
    toml = toml.replace(mod[0], `module = ${JSON.stringify(path)}`);
  }
  const file = join(dir, "config.toml");
  const { config, problems } = parseConfig(toml, file, { strict: true });
  expect(problems).toEqual([]);
  const sources = await loadSources(config, { configDir: dir, env: {}, file });
  expect(sources.size).toBe(1);
  return { config, source: [...sources.values()][0], secret, docSecretFile: files[0], secretFile };
}

const loaded = new Map<string, Promise<Loaded>>();
const example = (name: string) => {
  if (!loaded.has(name)) loaded.set(name, loadExample(name));
  return loaded.get(name) as Promise<Loaded>;
};

const NOW = T0;

function toRequest(w: Wire, now = NOW): HookRequest {
  const body = new TextEncoder().encode(w.body);
  return hookRequest({
    method: w.method,
    url: w.url,
    headers: [...w.headers, ["Content-Length", String(body.length)]],
    body,
    peer: "127.0.0.1",
    now,
  });
}

/** What the sender would be answered (before the spool's own dedup). */
function answerOf(ev: Evaluation): { status: number; body: string; headers: Record<string, string> } {
  const status = (s: string, code: number) => ({ status: code, body: JSON.stringify({ status: s }), headers: {} });
  switch (ev.kind) {
    case "classified":
      return status("queued", 202);
    case "ignored":
      return status("ignored", 200);
    case "quarantine":
      return status("quarantined", 202);
    case "unverified":
      return { status: 401, body: "", headers: {} };
    case "method":
      return { status: 405, body: "", headers: {} };
    case "verify_error":
      return { status: 503, body: "", headers: {} };
    case "learn":
      return { status: ev.response.status, body: String(ev.response.body ?? ""), headers: ev.response.headers ?? {} };
    case "answered": {
      const b = ev.response.body ?? "";
      return {
        status: ev.response.status,
        body: typeof b === "string" ? b : new TextDecoder().decode(b),
        headers: ev.response.headers ?? {},
      };
    }
  }
}

interface Claim {
  status: number;
  body: string;
  fields: Record<string, string>;
}

function parseResult(text: string): Claim {
  const [first, ...rest] = text.split("\n");
  const m = /^HTTP (\d{3})(?: (.*))?$/.exec(first);
  if (!m) throw new Error(`a result starts with HTTP <status> [body]: ${first}`);
  const fields: Record<string, string> = {};
  for (const line of rest) {
    const f = /^([a-z -]+): (.*)$/.exec(line);
    if (!f) throw new Error(`a result line is "name: value": ${line}`);
    fields[f[1]] = f[2];
  }
  return { status: Number(m[1]), body: m[2] ?? "", fields };
}

/**
 * Evaluate a documented request: signed at `ts` under `secret` (a `body` of its own is signed
 * too); `tamper` changes the body after signing; `strip` drops the signature or token.
 */
async function run(
  name: string,
  opts: { ts?: number; secret?: string; body?: string; tamper?: (body: string) => string; strip?: boolean } = {},
): Promise<{ ev: Evaluation; wire: Wire }> {
  const ex = exampleOf(name);
  const l = await example(ex);
  let wire = signedRequest(ex, parseRecipe(block("request", name).text), {
    secret: opts.secret ?? l.secret,
    ts: opts.ts ?? NOW,
    body: opts.body,
  });
  if (opts.tamper) wire = { ...wire, body: opts.tamper(wire.body) };
  if (opts.strip) {
    const auth = new Set(l.source.authHeaders);
    wire = { ...wire, url: wire.url.split("?")[0], headers: wire.headers.filter(([h]) => !auth.has(h.toLowerCase())) };
  }
  return { ev: await evaluate(l.config, l.source, toRequest(wire)), wire };
}

// ---------------------------------------------------------------------------------------------

describe("the template source section of docs/config.md", () => {
  test("is linked from the top of the page", () => {
    const top = PAGE.slice(0, PAGE.indexOf("\n## "));
    expect(top).toContain("](#the-template-source)");
  });

  test("has the worked examples, each with requests and results, and no unmarked TOML", () => {
    expect(EXAMPLES).toEqual(["github", "stripe", "standard-webhooks", "bearer-token", "pubsub", "slack"]);
    for (const ex of EXAMPLES) expect(REQUESTS.filter((r) => exampleOf(r) === ex).length).toBeGreaterThan(0);
    for (const r of REQUESTS) {
      expect(EXAMPLES).toContain(exampleOf(r));
      expect(block("request", r).lang).toBe("sh");
      expect(block("result", r).lang).toBe("text");
    }
    const marked = BLOCKS.filter((b) => b.lang === "toml").length;
    expect(SECTION.split("```toml\n").length - 1).toBe(marked);
    expect(SECTION).not.toMatch(/\bspec \d/);
  });

  test("the scheme table has one row per scheme, with its needs and its default dedup id", () => {
    const rows = tableRows("| scheme |");
    expect(rows.map((r) => r[0])).toEqual(Object.keys(SCHEMES).map((s) => `\`${s}\``));
    for (const [cell, verifies, needs, , dedup] of rows) {
      const scheme = cell.slice(1, -1) as Scheme;
      expect(verifies).toBe(SCHEMES[scheme].doc);
      const missing = checkTemplate({ scheme, key: "k" })
        .filter((p) => p.message.startsWith("required by scheme"))
        .map((p) => `\`${p.key}\``);
      if (scheme === "static-token")
        expect(checkTemplate({ scheme, key: "k" }).map((p) => p.message)).toContain(
          "scheme static-token needs exactly one of header or param",
        );
      else if (scheme === "ed25519" || scheme === "ecdsa-p256") for (const m of missing) expect(needs).toContain(m);
      else expect(needs).toBe(missing.length ? missing.join(", ") : "nothing more");
      // The generic schemes' default follows their settings: with a timestamp it is the signature's hash.
      const generic = scheme === "hmac" || scheme === "ed25519" || scheme === "ecdsa-p256";
      expect(dedup === "none").toBe(
        defaultDedup({ scheme, header: "X-Sig", ...(generic ? { timestamp_header: "X-Ts" } : {}) }) === undefined,
      );
    }
    const req = (headers: Record<string, string>) =>
      hookRequest({
        method: "POST",
        url: "/",
        headers: Object.entries(headers),
        body: new Uint8Array(),
        peer: "127.0.0.1",
        now: NOW,
      });
    const sw = defaultDedup({ scheme: "standard-webhooks" });
    expect([sw?.({}, req({ "webhook-id": "msg_1" })), sw?.({}, req({ "svix-id": "msg_2" }))]).toEqual([
      "msg_1",
      "msg_2",
    ]);
    const signature = "t=1714564800,v1=abc";
    expect(
      defaultDedup({ scheme: "timestamped", header: "Stripe-Signature" })?.({}, req({ "Stripe-Signature": signature })),
    ).toContain(sha256(signature));
  });

  test("the template key table has one row per template key, in order, and says which are always required", () => {
    const rows = tableRows("| key | type | required | meaning |");
    expect(rows.map((r) => r[0])).toEqual(TEMPLATE_KEYS.map((k) => `\`${k}\``));
    const always = checkTemplate({})
      .filter((p) => p.message.startsWith("required"))
      .map((p) => `\`${p.key}\``);
    expect(rows.filter((r) => r[2] === "always").map((r) => r[0])).toEqual(always);
  });

  test("the short example at the top loads", async () => {
    const dir = tempDir();
    const file = join(dir, "config.toml");
    const { config, problems } = parseConfig(block("toml", "intro").text, file, { strict: true });
    expect(problems).toEqual([]);
    expect([...(await loadSources(config, { configDir: dir, env: {}, file })).keys()]).toEqual(["demo"]);
  });
});

/** The cells of the markdown table whose header line starts with `header`. */
function tableRows(header: string): string[][] {
  const lines = SECTION.split("\n");
  const at = lines.findIndex((l) => l.startsWith(header));
  expect(at).toBeGreaterThan(0);
  const rows: string[][] = [];
  for (const line of lines.slice(at + 2)) {
    if (!line.startsWith("|")) break;
    rows.push(line.slice(2, -2).split(" | "));
  }
  return rows;
}

for (const name of REQUESTS) {
  const ex = exampleOf(name);
  describe(`worked example ${name}`, () => {
    test("the documented request gets the documented answer and classification", async () => {
      const l = await example(ex);
      const recipe = parseRecipe(block("request", name).text);
      expect(recipe.secretFile).toBe(l.docSecretFile);
      const claim = parseResult(block("result", name).text);
      const { ev, wire } = await run(name);
      const got = answerOf(ev);
      expect({ status: got.status, body: got.body }).toEqual({ status: claim.status, body: claim.body });
      if (ev.kind === "classified") {
        expect(Object.keys(claim.fields)).toEqual(
          expect.arrayContaining(["key", "dedup id", "event type", "destination"]),
        );
        const dedup = claim.fields["dedup id"];
        for (const [field, want] of Object.entries(claim.fields)) {
          const have = {
            key: ev.events[0].key,
            "dedup id": ev.events[0].dedupId,
            "event type": ev.events[0].eventType,
            route: ev.events[0].copies[0].route,
            destination: ev.events[0].copies[0].destination,
          }[field];
          if (field === "dedup id" && dedup === "sha256 of the body") expect(have).toBe(sha256(wire.body));
          else if (field === "dedup id" && dedup === "(none)") expect(have).toBeNull();
          else expect({ [field]: have }).toEqual({ [field]: want });
        }
        expect(ev.events[0].dedupWindowS).toBe(l.config.sources[l.source.name].dedup_window_s);
      } else {
        for (const [field, want] of Object.entries(claim.fields)) {
          const header = Object.entries(got.headers).find(([h]) => h.toLowerCase() === field)?.[1];
          expect({ [field]: header }).toEqual({ [field]: want });
        }
      }
    });

    test.skipIf(!HAVE_OPENSSL)("the page's openssl recipe makes the same request as node:crypto", async () => {
      const l = await example(ex);
      const sh = block("request", name).text;
      const args = runRecipe(sh, l.docSecretFile, l.secretFile, NOW);
      expect(curlRequest(args)).toEqual(signedRequest(ex, parseRecipe(sh), { secret: l.secret, ts: NOW }));
    });

    test("a tampered body, another secret, or no signature at all: 401", async () => {
      const l = await example(ex);
      const token = l.config.sources[l.source.name].template?.scheme === "static-token";
      const unverified = (ev: Evaluation) => (ev.kind === "unverified" ? ev.reason : `not unverified: ${ev.kind}`);
      // A token does not cover the body (as the page says); a signature does.
      const t = (await run(name, { tamper: (body) => body.replace("{", "{ ") })).ev;
      if (token) expect(t.kind).not.toBe("unverified");
      else expect(unverified(t)).toBe("mismatch");
      // (a whsec_ secret is another key only if its base64 decodes to other bytes)
      const another = l.secret.startsWith("whsec_") ? `whsec_${randomBytes(24).toString("base64")}` : `${l.secret}x`;
      expect(unverified((await run(name, { secret: another })).ev)).toBe("mismatch");
      expect(unverified((await run(name, { strip: true })).ev)).toBe("missing_signature");
    });

    const recipe = parseRecipe(block("request", name).text);
    if (recipe.computed.includes("ts"))
      test("a timestamp is good for 300 s either side of the clock, and may be in milliseconds", async () => {
        const kind = async (ts: number) => {
          const { ev } = await run(name, { ts });
          return ev.kind === "unverified" ? ev.reason : "verified";
        };
        expect(await kind(NOW - 300)).toBe("verified");
        expect(await kind(NOW + 300)).toBe("verified");
        expect(await kind(NOW - 301)).toBe("stale");
        expect(await kind(NOW + 301)).toBe("future");
        expect(await kind(NOW * 1000)).toBe("verified");
      });

    const claim = parseResult(block("result", name).text);
    if (claim.status === 202 && claim.fields["dedup id"] !== "(none)")
      test("the same delivery again: a duplicate inside dedup_window_s, a new event after it", async () => {
        const l = await example(ex);
        const { ev } = await run(name);
        if (ev.kind !== "classified") throw new Error(`expected classified, got ${ev.kind}`);
        const window = l.config.sources[l.source.name].dedup_window_s;
        expect(window).toBe(86400);
        const { spool } = freshSpool();
        try {
          expect(enqueue(spool, ev.events[0], NOW).status).toBe("queued");
          expect(enqueue(spool, ev.events[0], NOW + window - 1).status).toBe("duplicate");
          expect(enqueue(spool, ev.events[0], NOW + window).status).toBe("queued");
        } finally {
          spool.close();
        }
      });
  });
}

describe("the Slack module", () => {
  test("acknowledges an envelope other than event_callback without queueing it", async () => {
    const body =
      '{"token":"unused","type":"app_rate_limited","team_id":"T04XK2M8Q",' +
      '"minute_rate_limited":1714564800,"api_app_id":"A06P3RST1"}';
    const { ev } = await run("slack/message", { body });
    // Verified with the one secret (no rotation), then ignored.
    expect(ev).toEqual({ kind: "ignored", reason: "not_an_event", verifiedWith: { position: 0, until: null, of: 1 } });
  });

  test("quarantines a signed event without team_id (key_missing)", async () => {
    const { ev } = await run("slack/message", {
      body: '{"type":"event_callback","event_id":"Ev1","event":{"type":"message"}}',
    });
    expect(ev.kind).toBe("quarantine");
    expect(ev.kind === "quarantine" && (ev.error as { fault?: string }).fault).toBe("key_missing");
  });
});
