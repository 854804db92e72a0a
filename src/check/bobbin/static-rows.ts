// The scorecard rows read from a bobbin's files alone: name, manifest, provider, files, todos,
// core-only and docs.
import { parse as parseToml } from "smol-toml";
import type { Manifest, ManifestProblem } from "../../bobbin/manifest.ts";
import { scanModule, scanVendorDir } from "../../bobbin/scan.ts";
import { ConfigError, parseConfig } from "../../config/load.ts";
import { lineOf, type Problem, type Row, row, skipped, tomlLine } from "./row.ts";
import { BOBBIN_FILE_KINDS, type CheckSubject } from "./subject.ts";

const MANIFEST = "bobbin.toml";
const DOCS = ["README.md", "SETUP.md", "AGENTS.md"];

const fromManifest = (s: CheckSubject, p: ManifestProblem): Problem => ({
  file: MANIFEST,
  line: tomlLine(s.files.get(MANIFEST), p.key),
  message: `${p.key ? `${p.key}: ` : ""}${p.message}`,
  fix: p.hint ?? (p.key ? `correct ${p.key}` : "correct the file"),
});

export function nameRow(
  s: CheckSubject,
  problems: ManifestProblem[],
  manifest: Manifest | null,
  builtinNames: ReadonlySet<string>,
): Row {
  const out = problems.filter((p) => p.key === "name").map((p) => fromManifest(s, p));
  const folded = (n: string) => n.replaceAll("_", "-");
  if (manifest && !s.shipped && [...builtinNames].some((b) => folded(b) === folded(manifest.name))) {
    out.push({
      file: MANIFEST,
      line: tomlLine(s.files.get(MANIFEST), "name"),
      message: `${manifest.name} is the name of a built-in bobbin`,
      fix: "a private bobbin may not shadow a built-in: give it its own <vendor>.<product>",
    });
  }
  return row("name", out);
}

export function manifestRow(s: CheckSubject, problems: ManifestProblem[]): Row {
  return row(
    "manifest",
    problems.filter((p) => p.key !== "name" && !p.key.startsWith("provider")).map((p) => fromManifest(s, p)),
  );
}

const PLACEHOLDER = /\bTODO\b|<[^>]*>|\.\.\./;
const TEST_HOST = /(^|\.)(example\.(com|org|net)|localhost)$|\.(test|example|invalid|localhost)$/i;
const IP_HOST = /^(\d{1,3}(\.\d{1,3}){3}|\[[0-9a-f:.]+\])$/i;

/** Why `url` is not a provider's public https page, or null. */
export function urlProblem(url: string): string | null {
  if (PLACEHOLDER.test(url)) return "is still a placeholder";
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return "is not a URL";
  }
  if (u.protocol !== "https:") return "is not https";
  if (IP_HOST.test(u.hostname)) return "is an IP address, not the provider's host";
  if (TEST_HOST.test(u.hostname)) return "is on a test or example host, not the provider's";
  return null;
}

/** The `key: value` lines of a document's opening YAML frontmatter, or null when it has none. */
export function frontmatter(text: string): Map<string, string> | null {
  const m = /^---\n([\s\S]*?)\n---(\n|$)/.exec(text.replace(/\r\n/g, "\n"));
  if (!m) return null;
  const out = new Map<string, string>();
  for (const line of m[1].split("\n")) {
    const c = line.indexOf(":");
    if (c > 0) out.set(line.slice(0, c).trim(), line.slice(c + 1).trim());
  }
  return out;
}

export function providerRow(s: CheckSubject, problems: ManifestProblem[], manifest: Manifest | null): Row {
  const out = problems.filter((p) => p.key.startsWith("provider")).map((p) => fromManifest(s, p));
  if (!manifest) return row("provider", out);
  const p = manifest.provider;
  const text = s.files.get(MANIFEST);
  const at = (k: string) => tomlLine(text, `provider.${k}`);
  const poll = manifest.poll !== undefined;
  // A poll bobbin has no webhook: it names the API it reads and the page that shows there is no push.
  const required = poll
    ? ["homepage", "api_docs", "no_push_note", "no_push_docs"]
    : ["homepage", "webhook_docs", ...(Object.keys(manifest.secrets).length ? ["signature_docs"] : [])];
  const values = p as unknown as Record<string, string | undefined>;
  const refused = poll ? ["webhook_docs", "signature_docs"] : ["no_push_note", "no_push_docs"];
  for (const k of refused) {
    if (values[k] !== undefined)
      out.push({
        file: MANIFEST,
        line: at(k),
        message:
          `provider.${k} is for ` +
          (poll ? "a webhook bobbin; a poll bobbin has no webhook" : "a poll bobbin; this one takes webhooks"),
        fix: `remove provider.${k}`,
      });
  }
  // A scaffold's placeholders are one problem, not one per page.
  const unfilled = ["vendor", "product", ...required].filter(
    (k) => values[k] !== undefined && PLACEHOLDER.test(values[k] ?? ""),
  );
  if (unfilled.length)
    out.push({
      file: MANIFEST,
      line: at(unfilled[0]),
      message: `[provider] still has placeholders: ${unfilled.join(", ")}`,
      fix: "write the provider's names and the https pages of its own developer documentation",
    });
  for (const k of required)
    if (values[k] === undefined)
      out.push({
        file: MANIFEST,
        line: tomlLine(text, "provider"),
        message: `provider.${k} is required`,
        fix: `add ${k} = "https://..." (the provider's own page)`,
      });
  for (const k of ["homepage", "webhook_docs", "signature_docs", "api_docs", "no_push_docs"]) {
    const v = values[k];
    if (v === undefined || unfilled.includes(k) || refused.includes(k)) continue;
    const why = urlProblem(v);
    if (why)
      out.push({
        file: MANIFEST,
        line: at(k),
        message: `provider.${k} ${why}`,
        fix: "an https page on the provider's own public host",
      });
  }
  const want = new Map([
    ["bobbin", manifest.name],
    ["provider", `${p.vendor} ${p.product}`],
    poll ? ["api_docs", p.api_docs ?? ""] : ["webhook_docs", p.webhook_docs ?? ""],
  ]);
  for (const doc of DOCS) {
    const body = s.files.get(doc);
    if (body === undefined) continue;
    const fm = frontmatter(body);
    if (!fm) {
      out.push({
        file: doc,
        line: 1,
        message: "does not open with the YAML frontmatter",
        fix: `start it with ---, then ${[...want].map(([k, v]) => `${k}: ${v}`).join(", ")}, then ---`,
      });
      continue;
    }
    for (const [k, v] of want) {
      if (fm.get(k) !== v)
        out.push({
          file: doc,
          line: lineOf(body, new RegExp(`^${k}:`)) ?? 1,
          message:
            `frontmatter ${k} is ${fm.has(k) ? JSON.stringify(fm.get(k)) : "missing"}, ` +
            `the manifest says ${JSON.stringify(v)}`,
          fix: `write ${k}: ${v}`,
        });
    }
    if (doc !== "AGENTS.md") {
      for (const k of fm.keys())
        if (!want.has(k))
          out.push({
            file: doc,
            line: lineOf(body, new RegExp(`^${k}:`)),
            message: `frontmatter key ${k} is not one of ${[...want.keys()].join(", ")}`,
            fix: "only AGENTS.md may add keys (of the agents.md convention)",
          });
    }
  }
  return row("provider", out);
}

export function filesRow(s: CheckSubject, manifest: Manifest | null): Row {
  const out: Problem[] = [];
  for (const f of [MANIFEST, ...DOCS, "captures/kit.toml"])
    if (!s.files.has(f)) out.push({ file: f, message: "missing", fix: `add ${f} (hookspool bobbin new writes one)` });
  const modules = [manifest?.source?.module, manifest?.processor?.module, manifest?.poll?.module].filter(
    (m): m is string => typeof m === "string",
  );
  for (const m of modules)
    if (!s.files.has(`${m}.ts`))
      out.push({
        file: `${m}.ts`,
        message: `the manifest names module "${m}", and there is no ${m}.ts`,
        fix: `add ${m}.ts or correct the module name`,
      });
  for (const f of s.allFiles) {
    if (!BOBBIN_FILE_KINDS.some((k) => f.endsWith(k)))
      out.push({
        file: f,
        message: "not a kind of file a bobbin carries",
        fix: `remove it: a bobbin holds only ${BOBBIN_FILE_KINDS.join(" ")} files (the binary embeds no others)`,
      });
  }
  return row("files", out);
}

export function todosRow(s: CheckSubject): Row {
  const out: Problem[] = [];
  for (const [f, text] of s.files) {
    for (const [i, line] of text.split("\n").entries()) {
      if (/\b(TODO|FIXME|XXX)\b/.test(line))
        out.push({
          file: f,
          line: i + 1,
          message: `a placeholder is left: ${line.trim().slice(0, 80)}`,
          fix: "fill it in from the provider's documentation",
        });
    }
  }
  return row("todos", out);
}

export function coreOnlyRow(s: CheckSubject): Row {
  const products = (s.vendorEntries ?? []).filter((e) => e.isDirectory).map((e) => e.name);
  const own = s.relDir.split("/")[1];
  const out: Problem[] = [];
  for (const [f, text] of s.files) {
    // A bobbin's own tests are not bobbin code: they may use bun:test and fixtures.
    if (!f.endsWith(".ts") || f.startsWith("tests/")) continue;
    for (const p of scanModule(f, text, { siblings: products.filter((n) => n !== own) }))
      out.push({ file: p.file, line: p.line, message: p.message, fix: p.hint });
  }
  // Relative to the bobbin's directory, as every other problem is.
  if (s.vendorEntries)
    for (const p of scanVendorDir(s.relDir.split("/")[0], s.vendorEntries))
      out.push({ file: `../${p.file.split("/").pop()}`, message: p.message, fix: p.hint });
  const code = [...s.files.keys()].filter((f) => f.endsWith(".ts") && !f.startsWith("tests/")).length;
  return row("core-only", out, code ? undefined : "no code: a template bobbin");
}

const wordIn = (text: string, word: string) =>
  new RegExp(`(^|[^A-Za-z0-9_])${word.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}([^A-Za-z0-9_]|$)`).test(text);

/** The ```toml blocks of a document that hold a [bobbins.<i>] table, with their lines. */
function configBlocks(text: string): { line: number; toml: string }[] {
  const out: { line: number; toml: string }[] = [];
  for (const m of text.matchAll(/```toml\n([\s\S]*?)```/g)) {
    if (!/^\s*\[bobbins\./m.test(m[1])) continue;
    // A <NAME> placeholder stands for a name; a <..._DESTINATION> one for a Hermes route.
    const toml = m[1].replace(
      /<([A-Z][A-Z0-9_]*)>/g,
      (_, n: string) => `${n.endsWith("DESTINATION") ? "hermes:" : ""}${n.toLowerCase().replaceAll("_", "-")}`,
    );
    out.push({ line: text.slice(0, m.index).split("\n").length, toml });
  }
  return out;
}

export function docsRow(s: CheckSubject, manifest: Manifest | null): Row {
  const out: Problem[] = [];
  if (!manifest) return skipped("docs", "the manifest does not load");
  const names = [
    ...Object.keys(manifest.secrets),
    ...Object.entries(manifest.settings)
      .filter(([, v]) => v.required)
      .map(([k]) => k),
  ];
  for (const doc of ["SETUP.md", "AGENTS.md"]) {
    const text = s.files.get(doc);
    if (text === undefined) {
      out.push({
        file: doc,
        message: "missing",
        fix: `write ${doc}: the setup procedure for ${doc === "SETUP.md" ? "a person" : "an agent"}`,
      });
      continue;
    }
    for (const n of names)
      if (!wordIn(text, n))
        out.push({
          file: doc,
          message: `does not mention ${n}, a ${n in manifest.secrets ? "secret" : "required setting"} of the manifest`,
          fix: `say where ${n} comes from and where it goes`,
        });
    const blocks = configBlocks(text);
    if (!blocks.length)
      out.push({
        file: doc,
        message: "shows no [bobbins.<instance>] table in a ```toml block",
        fix: "show the table a deployment adds",
      });
    for (const b of blocks) {
      for (const p of expandProblems(s, b.toml))
        out.push({
          file: doc,
          line: b.line,
          message: `the config block does not load: ${p}`,
          fix: "correct the example so `hookspool check` passes on it",
        });
    }
  }
  const agents = s.files.get("AGENTS.md");
  if (agents !== undefined) {
    if (!/^#+\s*Needs from the human/im.test(agents))
      out.push({
        file: "AGENTS.md",
        message: "has no Needs from the human list",
        fix: "open with ## Needs from the human: accounts, consents, values only a person can give",
      });
    if ((agents.match(/^\d+\.\s/gm) ?? []).length < 2)
      out.push({
        file: "AGENTS.md",
        message: "has no numbered steps",
        fix: "write the procedure as numbered steps: goal, command, check, what to do if it fails",
      });
  }
  return row("docs", out);
}

/** What loading a documented config block reports, with this bobbin visible to it. */
function expandProblems(s: CheckSubject, toml: string): string[] {
  let text = toml;
  if (!s.shipped && s.root) {
    try {
      const doc = parseToml(toml) as { spool?: Record<string, unknown> };
      // An example that sets [spool] itself must name the bobbin's directory on its own.
      if (!doc.spool) text = `[spool]\nbobbin_path = [${JSON.stringify(s.root)}]\n\n${toml}`;
    } catch (e) {
      return [`not valid TOML (${(e as Error).message.split("\n")[0]})`];
    }
  }
  try {
    return parseConfig(text, "example", { home: () => "/var/lib/hookspool" }).problems.map(
      (p) => `${p.key}: ${p.message}`,
    );
  } catch (e) {
    if (e instanceof ConfigError) return e.problems.map((p) => `${p.key}: ${p.message}`);
    throw e;
  }
}
