// Every config example in the documentation loads: each ```toml block in docs/ and in the
// bobbins' documents is parsed, expanded and its sources built as hookspool would. A block
// preceded by `<!-- toml: continues -->` adds to the block before it (an example that builds on
// the previous one); <ANGLE_CASE> placeholders stand for a name.
import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { ConfigError, parseConfig } from "../src/config/load.ts";
import { loadEverySource } from "../src/config/sources.ts";

const ROOT = join(import.meta.dir, "..");

function markdown(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? markdown(join(dir, e.name)) : e.name.endsWith(".md") ? [join(dir, e.name)] : []));
}

/** The examples of one file, each with the text it loads as. */
function examples(file: string): { line: number; text: string }[] {
  const md = readFileSync(file, "utf8");
  const out: { line: number; text: string }[] = [];
  for (const m of md.matchAll(/(<!-- toml: continues -->\n)?```toml\n([\s\S]*?)```/g)) {
    const body = m[2].replace(/<([A-Z][A-Z0-9_]*)>/g, (_, name: string) => name.toLowerCase().replaceAll("_", "-"));
    const line = md.slice(0, m.index).split("\n").length;
    if (m[1] && out.length) out.push({ line, text: `${out[out.length - 1].text}\n${body}` });
    else out.push({ line, text: body });
  }
  return out;
}

const files = [...markdown(join(ROOT, "docs")), ...markdown(join(ROOT, "bobbins"))].sort();
const cases = files.flatMap((f) => examples(f).map((e) => ({ where: `${relative(ROOT, f)}:${e.line}`, text: e.text })));

describe("config examples in the docs", () => {
  test("there are examples to check", () => {
    expect(cases.length).toBeGreaterThan(20);
  });

  test.each(cases)("$where loads", async ({ where, text }) => {
    let problems: { key: string; message: string }[] = [];
    try {
      const loaded = parseConfig(text, where, { home: () => "/var/lib/hookspool" });
      problems = loaded.problems;
      // A code source's module is the deployment's own file, not part of the example.
      const built = await loadEverySource(loaded.config, { configDir: "/", env: {}, file: where });
      problems.push(...built.problems.filter((p) => !/^cannot load .*: no file at /.test(p.message)));
    } catch (e) {
      if (!(e instanceof ConfigError)) throw e;
      problems = e.problems;
    }
    expect(problems.map((p) => `${p.key}: ${p.message}`)).toEqual([]);
  });
});
