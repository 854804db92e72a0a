// hookspool bobbin list|show|expand: the bobbins this build and spool.bobbin_path carry, one
// bobbin's manifest, and what a [bobbins.<i>] table expands into.
import type { CommandDef } from "citty";
import { stringify } from "smol-toml";
import { catalogueFacts, catalogueMarkdown, matchesSearch } from "../bobbin/catalogue.ts";
import type { HealthSection, Manifest } from "../bobbin/manifest.ts";
import { type Bobbin, findBobbins } from "../bobbin/registry.ts";
import type { Config } from "../config/types.ts";
import { HookspoolError } from "../errors.ts";
import { bobbinCheckCommand } from "./bobbin-check.ts";
import { bobbinNewCommand } from "./bobbin-new.ts";
import { type Cli, GLOBAL_ARGS, loadFor, noConfigFile, notInConfig } from "./context.ts";
import { table, visible } from "./format.ts";

function bobbinsOf(config: Config): Map<string, Bobbin> {
  return findBobbins({ bobbinPath: config.spool.bobbin_path, presets: Object.keys(config.spans) }).bobbins;
}

function instancesOf(config: Config, name: string): string[] {
  return Object.entries(config.bobbins)
    .filter(([, b]) => b.bobbin === name)
    .map(([i]) => i);
}

function listCommand(cli: Cli): CommandDef {
  return {
    meta: {
      name: "list",
      description:
        "the bobbins found: built-in, then each spool.bobbin_path directory (--markdown: " +
        "the catalogue table; --search: only those that match)",
    },
    args: {
      ...GLOBAL_ARGS,
      markdown: { type: "boolean", description: "print the catalogue as a Markdown table (docs/bobbins/README.md)" },
      search: {
        type: "string",
        description: "only bobbins whose name, provider, summary or scheme holds this word (any letter case)",
        valueHint: "WORD",
      },
    },
    run({ args }) {
      const { config } = loadFor(cli);
      const word = typeof args.search === "string" ? args.search : "";
      const bobbins = [...bobbinsOf(config).values()].filter((b) => word === "" || matchesSearch(b, word));
      const rows = bobbins.map((b) => ({
        name: b.name,
        version: b.manifest.version,
        origin: b.origin,
        summary: b.manifest.summary,
        ...catalogueFacts(b),
        instances: instancesOf(config, b.name),
      }));
      if (cli.globals.json) cli.io.out(JSON.stringify(rows));
      else if (args.markdown) {
        cli.io.out(catalogueMarkdown(bobbins.filter((b) => b.origin === "built-in")));
      } else if (rows.length === 0) {
        if (word)
          throw new HookspoolError("E_NOTHING", `no bobbin matches "${word}"`, {
            hint: "hookspool bobbin list shows them all",
          });
        cli.io.out("no bobbins");
      } else
        cli.io.out(
          table(
            ["BOBBIN", "VERSION", "ORIGIN", "SCHEME", "INSTANCES", "SUMMARY"],
            rows.map((r) => [r.name, r.version, r.origin, r.scheme, r.instances.join(", ") || "-", r.summary]),
          ),
        );
      return 0;
    },
  };
}

/** What `bobbin show` prints for a manifest, as a document. */
function showDoc(b: Bobbin): Record<string, unknown> {
  const m: Manifest = b.manifest;
  const rulePacks = [...b.files().keys()]
    .filter((f) => f.startsWith("rule-packs/") && f.endsWith(".toml"))
    .map((f) => f.slice("rule-packs/".length, -".toml".length));
  return {
    name: m.name,
    version: m.version,
    summary: m.summary,
    origin: b.origin,
    dir: b.dir,
    provider: m.provider,
    source: m.poll
      ? { poll: m.poll }
      : {
          ...(m.source?.module ? { module: m.source.module } : { template: m.source?.template }),
          span: m.source?.span ?? null,
          expect_every_s: m.source?.expect_every_s ?? null,
          proxy: m.source?.proxy ?? null,
        },
    sender_retries:
      m.source?.sender_retries ??
      (typeof m.source?.template === "object" ? (m.source.template.sender_retries ?? null) : null),
    secrets: m.secrets,
    settings: m.settings,
    processor: m.processor ?? null,
    outputs: m.outputs,
    sweep: m.sweep ?? null,
    health: m.health ?? null,
    indexed: m.indexed,
    rule_packs: rulePacks,
  };
}

function showText(d: ReturnType<typeof showDoc>): string {
  const m = d as ReturnType<typeof showDoc> & {
    provider: Record<string, string | undefined>;
    secrets: Manifest["secrets"];
    settings: Manifest["settings"];
    outputs: Manifest["outputs"];
    source: Record<string, unknown>;
    rule_packs: string[];
    indexed: string[];
  };
  // Lines are escaped one by one (a manifest is someone's text); table() escapes its own cells.
  const out: string[] = [];
  const line = (s: string) => out.push(visible(s));
  line(`${m.name} ${m.version}: ${m.summary}`);
  line(`origin       ${m.origin} (${m.dir})`);
  line(`provider     ${m.provider.vendor} ${m.provider.product}`);
  for (const k of ["homepage", "webhook_docs", "signature_docs", "api_docs", "no_push_docs"])
    if (m.provider[k]) line(`  ${k.padEnd(15)}${m.provider[k]}`);
  const template = m.source.template === "settings" ? '"settings"' : JSON.stringify(m.source.template);
  line(
    `source       ${m.source.module ? `module ${m.source.module}` : m.source.poll ? "poll" : `template ${template}`}`,
  );
  line(`span         ${m.source.span ?? "-"}`);
  const sender =
    m.sender_retries === true
      ? "retries a failed delivery"
      : m.sender_retries === false
        ? "does not retry: install the sweep its README describes"
        : "-";
  line(`sender       ${sender}`);
  if (m.source.proxy) line(`proxy        ${m.source.proxy}`);
  const sweep = (d as { sweep?: { kind: string; secret: string } | null }).sweep;
  if (sweep) line(`sweep        ${sweep.kind}: hookspool sweep <instance> (its token in secrets.${sweep.secret})`);
  const health = (d as { health?: HealthSection | null }).health;
  if (health) {
    const args = Object.keys(health.args).map((a) => `${a} = "..."`);
    line(`health       health = { ${args.join(", ")} } and secrets.${health.secret}: asks ${health.url}${health.path}`);
    line(`  healthy      ${health.healthy.join(" and ")}`);
  }
  if (m.indexed.length) line(`indexed      ${m.indexed.join(", ")} (migrate builds a payload index of each)`);
  const secrets = Object.entries(m.secrets);
  if (secrets.length)
    out.push(
      "",
      table(
        ["SECRET", "REQUIRED", "PROCESSOR", "DESCRIPTION"],
        secrets.map(([n, s]) => [n, s.required ? "yes" : "no", s.processor ? "yes" : "no", s.description]),
      ),
    );
  const settings = Object.entries(m.settings);
  if (settings.length)
    out.push(
      "",
      table(
        ["SETTING", "TYPE", "REQUIRED", "DEFAULT", "DESCRIPTION"],
        settings.map(([n, s]) => [
          n,
          s.type,
          s.required ? "yes" : "no",
          s.default === undefined ? "-" : JSON.stringify(s.default),
          s.description,
        ]),
      ),
    );
  out.push(
    "",
    table(
      ["OUTPUT", "DESCRIPTION"],
      Object.entries(m.outputs).map(([n, o]) => [n, o.description]),
    ),
  );
  if (m.rule_packs.length) {
    out.push("");
    line(`rule packs   ${m.rule_packs.join(", ")}`);
  }
  return out.join("\n");
}

function showCommand(cli: Cli): CommandDef {
  return {
    meta: {
      name: "show",
      description: "one bobbin: provider pages, secrets, settings, outputs, span, whether the sender retries",
    },
    args: { ...GLOBAL_ARGS, name: { type: "positional", description: "<vendor>.<product>", required: true } },
    run({ args }) {
      const { config } = loadFor(cli);
      const name = String(args.name);
      const b = bobbinsOf(config).get(name);
      if (!b)
        throw new HookspoolError("E_NOT_FOUND", `no bobbin "${name}"`, { hint: "hookspool bobbin list shows them" });
      const doc = showDoc(b);
      cli.io.out(cli.globals.json ? JSON.stringify(doc) : showText(doc));
      return 0;
    },
  };
}

/** The tables one instance expanded into, secret references kept as references. */
export function expandedTables(config: Config, instance: string): Record<string, unknown> {
  const out: Record<string, unknown> = { sources: { [instance]: config.sources[instance] } };
  const dest = config.destinations[`script:${instance}`];
  if (dest) {
    // The processor's secret references are shown by name: the table above has them already.
    const env = { ...dest.env };
    if (env.HOOKSPOOL_SECRET_REFS)
      env.HOOKSPOOL_SECRET_REFS = Object.keys(JSON.parse(env.HOOKSPOOL_SECRET_REFS)).join(", ");
    out.destinations = { [`script:${instance}`]: { ...dest, env } };
  }
  const routes = config.routes.filter((r) => r.instance === instance).map(({ instance: _, ...r }) => r);
  if (routes.length) out.routes = routes;
  return out;
}

function expandCommand(cli: Cli): CommandDef {
  return {
    meta: {
      name: "expand",
      description:
        "the [sources], [destinations] and [[routes]] tables a [bobbins.<instance>] becomes (secrets as references)",
    },
    args: {
      ...GLOBAL_ARGS,
      instance: { type: "positional", description: "one instance (default: every one)", required: false },
    },
    run({ args }) {
      const loaded = loadFor(cli);
      const { config } = loaded;
      const names = args.instance ? [String(args.instance)] : Object.keys(config.bobbins);
      for (const n of names)
        if (!Object.hasOwn(config.bobbins, n))
          throw notInConfig(loaded, new HookspoolError("E_NOT_FOUND", `no [bobbins.${n}] in the config`));
      const docs = Object.fromEntries(names.map((n) => [n, expandedTables(config, n)]));
      if (cli.globals.json) cli.io.out(JSON.stringify(docs));
      else if (names.length === 0) {
        const none = noConfigFile(loaded);
        if (none) throw none;
        cli.io.out("no [bobbins.*] instances in the config");
      } else
        cli.io.out(
          names.map((n) => `# [bobbins.${n}] (${config.bobbins[n].bobbin})\n${stringify(docs[n])}`).join("\n\n"),
        );
      return 0;
    },
  };
}

export function bobbinCommand(cli: Cli): CommandDef {
  return {
    meta: { name: "bobbin", description: "service plugins: list, show, expand, new, check" },
    args: { ...GLOBAL_ARGS },
    subCommands: {
      list: listCommand(cli),
      show: showCommand(cli),
      expand: expandCommand(cli),
      new: bobbinNewCommand(cli),
      check: bobbinCheckCommand(cli),
    },
  };
}
