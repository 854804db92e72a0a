// Every config example in the documentation loads: each ```toml block in docs/ and in the
// bobbins' documents is parsed, expanded and its sources built as hookspool would. A block
// preceded by `<!-- toml: continues -->` adds to the block before it (an example that builds on
// the previous one); <ANGLE_CASE> placeholders stand for a name (a <..._DESTINATION> for a Hermes
// route, which the test's gateway file then has). Each must also pass check's route, window,
// header and tee rules; the host's own files (a script, a module) are not part of it. A block preceded by
// `<!-- toml: bobbin.toml <vendor>/<product> -->` is a manifest and must pass parseManifest; one
// preceded by `<!-- toml: kit.toml -->` is a kit file and must pass parseKit.
import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import { parseKit } from "../src/bobbin/captures.ts";
import { parseManifest } from "../src/bobbin/manifest.ts";
import { ConfigError, parseConfig } from "../src/config/load.ts";
import { DEFAULT_SPANS } from "../src/config/schema.ts";
import { loadEverySource } from "../src/config/sources.ts";
import type { Config } from "../src/config/types.ts";
import { routeProblems } from "../src/check/routes.ts";
import { tempDir } from "./helpers/tmp.ts";

const ROOT = join(import.meta.dir, "..");

function markdown(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? markdown(join(dir, e.name)) : e.name.endsWith(".md") ? [join(dir, e.name)] : [],
  );
}

const MARKER = /<!-- toml: (continues|bobbin\.toml [a-z0-9_-]+\/[a-z0-9_-]+|kit\.toml) -->\n/;

/** The examples of one file: config blocks with the text each loads as, and the other files shown. */
function examples(file: string): { line: number; text: string; kind: string }[] {
  const md = readFileSync(file, "utf8");
  const out: { line: number; text: string; kind: string }[] = [];
  for (const m of md.matchAll(new RegExp(`(${MARKER.source})?\`\`\`toml\n([\\s\\S]*?)\`\`\``, "g"))) {
    const marker = m[2];
    const body = m[3].replace(
      /<([A-Z][A-Z0-9_]*)>/g,
      (_, name: string) => `${name.endsWith("DESTINATION") ? "hermes:" : ""}${name.toLowerCase().replaceAll("_", "-")}`,
    );
    const line = md.slice(0, m.index).split("\n").length;
    const configs = out.filter((e) => e.kind === "config");
    if (marker === "continues" && configs.length)
      out.push({ line, text: `${configs[configs.length - 1].text}\n${body}`, kind: "config" });
    else out.push({ line, text: body, kind: marker && marker !== "continues" ? marker : "config" });
  }
  return out;
}

/** The config with hermes.subscriptions_path at a file that has a route for each hermes: destination. */
function withGateway(config: Config): Config {
  const routes = new Set<string>();
  for (const d of Object.keys(config.destinations)) if (d.startsWith("hermes:")) routes.add(d.slice(7));
  for (const s of Object.values(config.sources)) if (s.action?.startsWith("hermes:")) routes.add(s.action.slice(7));
  for (const r of config.routes) if (r.destination?.startsWith("hermes:")) routes.add(r.destination.slice(7));
  const file = join(tempDir("hookspool-gateway-"), "webhook_subscriptions.json");
  writeFileSync(
    file,
    JSON.stringify(
      Object.fromEntries(
        [...routes].map((r) => [r, { secret: `whsec_${Buffer.from("docs-example-secret").toString("base64")}` }]),
      ),
    ),
  );
  return { ...config, hermes: { ...config.hermes, subscriptions_path: file } };
}

const files = [...markdown(join(ROOT, "docs")), ...markdown(join(ROOT, "bobbins"))].sort();
const all = files.flatMap((f) =>
  examples(f).map((e) => ({ where: `${relative(ROOT, f)}:${e.line}`, text: e.text, kind: e.kind })),
);
const cases = all.filter((e) => e.kind === "config");
const others = all.filter((e) => e.kind !== "config");

describe("config examples in the docs", () => {
  test("there are examples to check", () => {
    expect(cases.length).toBeGreaterThan(20);
  });

  test("there are manifest and kit examples to check", () => {
    expect(others.map((o) => o.kind).sort()).toEqual(expect.arrayContaining(["bobbin.toml acme/widgets", "kit.toml"]));
  });

  test.each(others)("$where is a valid $kind", ({ kind, text }) => {
    if (kind === "kit.toml") expect(() => parseKit(text)).not.toThrow();
    else
      expect(
        parseManifest(text, { dir: kind.split(" ")[1], builtin: false, presets: Object.keys(DEFAULT_SPANS) }).problems,
      ).toEqual([]);
  });

  test.each(cases)("$where loads", async ({ where, text }) => {
    let problems: { key: string; message: string }[] = [];
    try {
      const loaded = parseConfig(text, where, { home: () => "/var/lib/hookspool" });
      problems = loaded.problems;
      // A code source's module is the deployment's own file, not part of the example.
      const built = await loadEverySource(loaded.config, { configDir: "/", env: {}, file: where });
      problems.push(...built.problems.filter((p) => !/^cannot load .*: no file at /.test(p.message)));
      // check's routing, window, header and tee rules, with a gateway file naming every Hermes
      // route the example uses (the host's own file is not part of an example).
      if (!problems.length)
        problems.push(
          ...routeProblems(withGateway(loaded.config), new Map(), { env: {}, cwd: "/" }).filter(
            (p) => p.level === "error" && !/ is not an executable file$/.test(p.message),
          ),
        );
    } catch (e) {
      if (!(e instanceof ConfigError)) throw e;
      problems = e.problems;
    }
    expect(problems.map((p) => `${p.key}: ${p.message}`)).toEqual([]);
  });
});
